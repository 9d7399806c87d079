//! The kernel ABI, checked without a GPU: for every kernel of the sample project and the test
//! kernels (memrefs of rank 0 to 3, strided layouts, odd names) and every object it is built
//! into, what the launch stub packs (one value per lowered parameter of the manifest, held in
//! `Param::storage()`, the type the macro uses) is what the object declares:
//!
//! - PTX: the `.entry` parameter list (count, each `.param`'s size);
//! - hsaco: the AMDGPU metadata note (`amdhsa.kernels[].args`: size and offset of each explicit
//!   argument, `.kernarg_segment_size`), the layout `hipModuleLaunchKernel` copies into.
//!
//! The host target is checked by running every kernel (`host_semantics.rs`, `sample-project`).

use crate::common::*;
use gpu_build::Vendor;
use gpu_manifest::{Format, Kernel};
use object::{Object as _, ObjectSection};
use std::path::PathBuf;

/// The size of each parameter the stub passes, from the manifest.
fn stub_param_sizes(kernel: &Kernel) -> Result<Vec<usize>, String> {
    kernel
        .params
        .iter()
        .map(|param| {
            param
                .storage()
                .map(|storage| storage.size)
                .ok_or_else(|| format!("no storage for `{}`", param.llvm_type))
        })
        .collect()
}

/// The sizes of the `.param`s of `.entry <kernel>(...)` in `ptx`.
fn ptx_entry_params(ptx: &str, kernel: &str) -> Result<Vec<usize>, String> {
    let start = ptx
        .find(&format!(".entry {kernel}("))
        .ok_or_else(|| format!("no `.entry {kernel}(` in the PTX"))?;
    let list = &ptx[start..];
    let list = &list[list.find('(').unwrap_or(0) + 1..list.find(')').unwrap_or(list.len())];
    list.split(',')
        .map(str::trim)
        .filter(|param| !param.is_empty())
        .map(|param| {
            let words: Vec<&str> = param.split_whitespace().collect();
            if let Some(array) = words.last().and_then(|name| name.split_once('[')) {
                return array
                    .1
                    .trim_end_matches(']')
                    .parse()
                    .map_err(|_| format!("cannot read `{param}`"));
            }
            let ty = words
                .iter()
                .find(|w| {
                    w.len() > 2 && w.starts_with('.') && w[2..].chars().all(|c| c.is_ascii_digit())
                })
                .ok_or_else(|| format!("no type in `{param}`"))?;
            Ok(ty[2..]
                .parse::<usize>()
                .map_err(|_| format!("cannot read `{param}`"))?
                / 8)
        })
        .collect()
}

/// The explicit arguments (size, offset) of `kernel` and its kernarg segment size, from the
/// hsaco's `NT_AMDGPU_METADATA` note.
fn hsaco_kernel_args(hsaco: &[u8], kernel: &str) -> Result<(Vec<(usize, usize)>, usize), String> {
    let file = object::File::parse(hsaco).map_err(|e| e.to_string())?;
    let note = file
        .section_by_name(".note")
        .ok_or("no .note section")?
        .data()
        .map_err(|e| e.to_string())?;
    // ELF note: name size, descriptor size, type, then the name and descriptor, 4-byte aligned.
    let word = |at: usize| u32::from_le_bytes(note[at..at + 4].try_into().unwrap()) as usize;
    let mut at = 0;
    let mut metadata = None;
    while at + 12 <= note.len() {
        let (name_size, desc_size, kind) = (word(at), word(at + 4), word(at + 8));
        let name_at = at + 12;
        let desc_at = name_at + name_size.div_ceil(4) * 4;
        if kind == 32 && &note[name_at..name_at + name_size] == b"AMDGPU\0" {
            metadata = Some(&note[desc_at..desc_at + desc_size]);
        }
        at = desc_at + desc_size.div_ceil(4) * 4;
    }
    let mut metadata = metadata.ok_or("no NT_AMDGPU_METADATA note")?;
    let value = rmpv::decode::read_value(&mut metadata).map_err(|e| e.to_string())?;
    let field = |map: &rmpv::Value, key: &str| {
        map.as_map()
            .and_then(|entries| entries.iter().find(|(k, _)| k.as_str() == Some(key)))
            .map(|(_, v)| v.clone())
    };
    let kernels = field(&value, "amdhsa.kernels").ok_or("no amdhsa.kernels")?;
    let entry = kernels
        .as_array()
        .and_then(|all| {
            all.iter().find(|k| {
                field(k, ".name")
                    .as_ref()
                    .and_then(|n| n.as_str().map(String::from))
                    .as_deref()
                    == Some(kernel)
            })
        })
        .ok_or_else(|| format!("no kernel `{kernel}` in the metadata"))?;
    let number = |map: &rmpv::Value, key: &str| {
        field(map, key)
            .and_then(|v| v.as_u64())
            .map(|v| v as usize)
            .ok_or_else(|| format!("no {key}"))
    };
    let mut args = Vec::new();
    for arg in field(entry, ".args")
        .and_then(|a| a.as_array().cloned())
        .unwrap_or_default()
    {
        let kind = field(&arg, ".value_kind")
            .and_then(|v| v.as_str().map(String::from))
            .unwrap_or_default();
        if !kind.starts_with("hidden_") {
            args.push((number(&arg, ".size")?, number(&arg, ".offset")?));
        }
    }
    Ok((args, number(entry, ".kernarg_segment_size")?))
}

fn check_ptx(kernel: &Kernel, ptx: &str) -> Result<(), String> {
    let stub = stub_param_sizes(kernel)?;
    let entry = ptx_entry_params(ptx, &kernel.name)?;
    if stub != entry {
        return Err(format!(
            "`{}`: the stub passes parameters of {stub:?} bytes, the PTX entry declares {entry:?}",
            kernel.name
        ));
    }
    Ok(())
}

fn check_hsaco(kernel: &Kernel, hsaco: &[u8]) -> Result<(), String> {
    let stub = stub_param_sizes(kernel)?;
    let (args, segment) = hsaco_kernel_args(hsaco, &kernel.name)?;
    let sizes: Vec<usize> = args.iter().map(|(size, _)| *size).collect();
    if stub != sizes {
        return Err(format!(
            "`{}`: the stub passes parameters of {stub:?} bytes, the hsaco declares {sizes:?}",
            kernel.name
        ));
    }
    // Packed in order, each at its natural alignment: where the runtime copies each value.
    let mut end = 0usize;
    for (index, (size, offset)) in args.iter().enumerate() {
        let packed = end.div_ceil(*size) * size;
        if *offset != packed {
            return Err(format!(
                "`{}`: argument {index} sits at offset {offset}, packing puts it at {packed}",
                kernel.name
            ));
        }
        end = packed + size;
    }
    if segment < end {
        return Err(format!(
            "`{}`: kernarg segment of {segment} bytes, the arguments need {end}",
            kernel.name
        ));
    }
    Ok(())
}

/// Every kernel file to check, each built for its own targets.
fn kernel_files() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = crate::child::sample_project_kernels()
        .iter()
        .map(|k| workspace().join("sample-project").join(k))
        .collect();
    files.push(workspace().join("tests/kernels/memrefs.mlir"));
    files.push(workspace().join("tests/kernels/names.mlir"));
    files
}

fn built() -> (gpu_build::Report, tempfile::TempDir) {
    let out = tempfile::tempdir().unwrap();
    let mut build = build_in(out.path());
    for file in kernel_files() {
        build.kernel(file);
    }
    let report = build.compile().unwrap_or_else(|e| panic!("{e}"));
    (report, out)
}

#[test]
fn every_stub_passes_what_every_object_declares() {
    let (report, _out) = built();
    let mut checked = (0, 0);
    for module in &report.manifest.modules {
        for object in &module.objects {
            let bytes = std::fs::read(report.out_dir.join(&object.path)).unwrap();
            for kernel in &module.kernels {
                let result = match (object.vendor, object.format) {
                    (Vendor::Nvptx, Format::Isa) => {
                        checked.0 += 1;
                        check_ptx(kernel, &String::from_utf8_lossy(&bytes))
                    }
                    (Vendor::Amdgpu, Format::Bin) => {
                        checked.1 += 1;
                        check_hsaco(kernel, &bytes)
                    }
                    _ => Ok(()),
                };
                result.unwrap_or_else(|why| panic!("{} ({}): {why}", module.name, object.path));
            }
        }
    }
    // Sample: 9 kernels; memrefs: 5; names: 3 (AMDGPU only).
    assert_eq!(checked, (14, 17), "(PTX, hsaco) kernel checks");
}

/// A manifest that lies about a kernel's parameters fails the check, for both object kinds.
#[test]
fn a_manifest_that_lies_fails_the_check() {
    let (report, _out) = built();
    let module = report
        .manifest
        .modules
        .iter()
        .find(|m| m.name == "memrefs")
        .unwrap();
    let object = |vendor, format| {
        let object = module
            .objects
            .iter()
            .find(|o| o.vendor == vendor && o.format == format)
            .unwrap();
        std::fs::read(report.out_dir.join(&object.path)).unwrap()
    };
    let ptx = String::from_utf8(object(Vendor::Nvptx, Format::Isa)).unwrap();
    let hsaco = object(Vendor::Amdgpu, Format::Bin);
    let truth = module
        .kernels
        .iter()
        .find(|k| k.name == "store0")
        .unwrap()
        .clone();
    check_ptx(&truth, &ptx).unwrap();
    check_hsaco(&truth, &hsaco).unwrap();

    let mut one_short = truth.clone();
    one_short.params.pop();
    let mut wrong_width = truth.clone();
    wrong_width.params.last_mut().unwrap().llvm_type = "float".into();
    let mut swapped = truth.clone();
    swapped.params.swap(2, 3);
    swapped.params[2].llvm_type = "i32".into();
    for (what, lie) in [
        ("one short", one_short),
        ("f64 as f32", wrong_width),
        ("i32 inserted", swapped),
    ] {
        assert!(
            check_ptx(&lie, &ptx).is_err(),
            "PTX check passed a manifest with {what}"
        );
        assert!(
            check_hsaco(&lie, &hsaco).is_err(),
            "hsaco check passed a manifest with {what}"
        );
    }
}
