//! The sample kernels, compiled for sm_80, sm_90, gfx90a and gfx1100, checked with real tools:
//! ptxas accepts every PTX, every hsaco is an AMDGPU ELF shared object with a `.kd` descriptor
//! per kernel, and nothing calls into a device library that was not linked.

use crate::common::*;
use gpu_build::Vendor;
use gpu_manifest::Format;
use object::{Object as _, ObjectSymbol};
use std::process::Command;

fn compile_samples() -> (gpu_build::Report, tempfile::TempDir) {
    let out = tempfile::tempdir().unwrap();
    let mut build = build_in(out.path());
    for kernel in sample_kernels() {
        build.kernel(kernel);
    }
    build
        .target(Vendor::Nvptx, &["sm_80", "sm_90"])
        .target(Vendor::Amdgpu, &["gfx90a", "gfx1100"]);
    let report = build.compile().unwrap_or_else(|e| panic!("{e}"));
    (report, out)
}

#[test]
fn every_module_has_every_object_and_the_manifest_matches_the_files() {
    let (report, _out) = compile_samples();
    let names: Vec<&str> = report
        .manifest
        .modules
        .iter()
        .map(|m| m.name.as_str())
        .collect();
    assert_eq!(names, ["vadd", "saxpy", "reduce", "math"]);
    for module in &report.manifest.modules {
        let mut got: Vec<(String, Format)> = module
            .objects
            .iter()
            .map(|o| (o.chip.clone(), o.format))
            .collect();
        got.sort();
        let mut want = vec![
            ("gfx1100".to_string(), Format::Bin),
            ("gfx90a".to_string(), Format::Bin),
            ("sm_80".to_string(), Format::Bin),
            ("sm_80".to_string(), Format::Isa),
            ("sm_90".to_string(), Format::Bin),
            ("sm_90".to_string(), Format::Isa),
        ];
        want.sort();
        assert_eq!(got, want, "objects of {}", module.name);
        for object in &module.objects {
            let bytes = std::fs::read(report.out_dir.join(&object.path)).unwrap();
            assert_eq!(bytes.len() as u64, object.size, "{}", object.path);
            let sha = Command::new("sha256sum")
                .arg(report.out_dir.join(&object.path))
                .output()
                .unwrap();
            assert!(
                String::from_utf8_lossy(&sha.stdout).starts_with(&object.sha256),
                "{}",
                object.path
            );
        }
    }
    let vadd = &report.manifest.modules[0].kernels[0];
    assert_eq!(
        vadd.signature,
        "(memref<?xf32>, memref<?xf32>, memref<?xf32>, index)"
    );
    // Three rank-1 memref descriptors (5 fields each) and an index.
    assert_eq!(vadd.params.len(), 16);
    assert_eq!(vadd.params[15].argument, 3);
    assert_eq!(vadd.params[15].llvm_type, "i64");
    assert_eq!(vadd.params[0].llvm_type, "ptr");
}

#[test]
fn ptxas_accepts_every_ptx_for_its_chip() {
    let (report, out) = compile_samples();
    let ptxas = ptxas();
    let objects = objects_of(&report, Vendor::Nvptx);
    assert_eq!(
        objects
            .iter()
            .filter(|(o, _)| o.format == Format::Isa)
            .count(),
        8
    );
    for (object, bytes) in objects.iter().filter(|(o, _)| o.format == Format::Isa) {
        let text = String::from_utf8(bytes.clone()).unwrap();
        assert!(
            text.contains(&format!(".target {}", object.chip)),
            "{}",
            object.path
        );
        assert!(
            !text.contains(".extern .func"),
            "{} keeps an unresolved call:\n{text}",
            object.path
        );
        let cubin = out.path().join("check.cubin");
        let status = Command::new(&ptxas)
            .args(["-arch", &object.chip])
            .arg(out.path().join(&object.path))
            .arg("-o")
            .arg(&cubin)
            .status()
            .unwrap();
        assert!(status.success(), "ptxas rejected {}", object.path);
    }
    for (object, bytes) in objects.iter().filter(|(o, _)| o.format == Format::Bin) {
        let elf = object::File::parse(bytes.as_slice()).unwrap();
        assert_eq!(
            elf.architecture(),
            object::Architecture::Unknown,
            "cubin is an NVIDIA ELF"
        );
        assert!(bytes.starts_with(b"\x7fELF"), "{}", object.path);
    }
}

#[test]
fn every_hsaco_is_an_amdgpu_shared_object_with_a_descriptor_per_kernel() {
    let (report, _out) = compile_samples();
    let mut checked = 0;
    for module in &report.manifest.modules {
        for object in module.objects.iter().filter(|o| o.vendor == Vendor::Amdgpu) {
            let bytes = std::fs::read(report.out_dir.join(&object.path)).unwrap();
            let elf = object::read::elf::ElfFile64::<object::Endianness>::parse(bytes.as_slice())
                .unwrap_or_else(|e| panic!("{} is not ELF64: {e}", object.path));
            let header = elf.elf_header();
            let endian = elf.endian();
            assert_eq!(
                header.e_machine.get(endian),
                object::elf::EM_AMDGPU,
                "{}",
                object.path
            );
            assert_eq!(
                header.e_type.get(endian),
                object::elf::ET_DYN,
                "{} is not a shared object",
                object.path
            );
            let symbols: Vec<String> = elf
                .symbols()
                .filter_map(|s| s.name().ok().map(str::to_string))
                .collect();
            for kernel in &module.kernels {
                assert!(
                    symbols.contains(&format!("{}.kd", kernel.name)),
                    "{}: no {}.kd in {symbols:?}",
                    object.path,
                    kernel.name
                );
            }
            let undefined: Vec<String> = elf
                .symbols()
                .filter(|s| s.is_undefined())
                .filter_map(|s| s.name().ok().map(str::to_string))
                .filter(|name| !name.is_empty())
                .collect();
            assert!(
                undefined.is_empty(),
                "{} has undefined symbols {undefined:?}",
                object.path
            );
            checked += 1;
        }
    }
    assert_eq!(checked, 8);
}

#[test]
fn math_calls_resolve_to_the_vendor_libraries() {
    let (report, out) = compile_samples();
    let math = report
        .manifest
        .modules
        .iter()
        .find(|m| m.name == "math")
        .unwrap();
    let ptx = math
        .objects
        .iter()
        .find(|o| o.chip == "sm_80" && o.format == Format::Isa)
        .unwrap();
    let text = std::fs::read_to_string(out.path().join(&ptx.path)).unwrap();
    // libdevice was linked and inlined: no calls remain, but its code is there.
    assert!(
        !text.contains("__nv_"),
        "unresolved libdevice call:\n{text}"
    );
    assert!(
        text.contains("ex2.approx") || text.contains("lg2.approx"),
        "no libdevice code in:\n{text}"
    );
}

/// What the program embeds: every device object as a zstd frame of its bytes, smaller than
/// they are; nothing for the host object, which is linked.
#[test]
fn every_device_object_has_a_smaller_zstd_frame_of_its_bytes() {
    let (report, out) = compile_samples();
    for object in report.manifest.objects() {
        let compressed = object
            .compressed
            .as_ref()
            .unwrap_or_else(|| panic!("{} has no compressed copy", object.path));
        let frame = std::fs::read(out.path().join(compressed)).unwrap();
        let bytes = std::fs::read(out.path().join(&object.path)).unwrap();
        let mut decompressed = Vec::new();
        std::io::Read::read_to_end(
            &mut ruzstd::decoding::StreamingDecoder::new(frame.as_slice()).unwrap(),
            &mut decompressed,
        )
        .unwrap();
        assert!(decompressed == bytes, "{compressed} is not {}", object.path);
        assert!(
            frame.len() < bytes.len(),
            "{compressed}: {} bytes",
            frame.len()
        );
    }
}
