//! Pipeline behaviour beyond the sample: NVPTX `fast` / `ftz`, user bitcode linking, LLVM IR
//! input, several gpu.modules in one file.

use crate::common::*;
use gpu_build::Vendor;
use gpu_manifest::Format;
use std::process::Command;

fn ptx_of(report: &gpu_build::Report, dir: &std::path::Path) -> String {
    let object = report.manifest.modules[0]
        .objects
        .iter()
        .find(|o| o.format == Format::Isa)
        .unwrap();
    std::fs::read_to_string(dir.join(&object.path)).unwrap()
}

/// out[i] = sqrt(x[i]) / y[i] + x[i] * y[i] in f32.
fn float_kernel(flags: &str) -> String {
    format!(
        r#"gpu.module @fp [#nvvm.target<chip = "sm_80"{flags}>] {{
  gpu.func @fp(%x: memref<?xf32>, %y: memref<?xf32>, %out: memref<?xf32>) kernel {{
    %i = gpu.global_id x
    %a = memref.load %x[%i] : memref<?xf32>
    %b = memref.load %y[%i] : memref<?xf32>
    %s = math.sqrt %a : f32
    %q = arith.divf %s, %b : f32
    %m = arith.mulf %a, %b : f32
    %r = arith.addf %q, %m : f32
    memref.store %r, %out[%i] : memref<?xf32>
    gpu.return
  }}
}}
"#
    )
}

#[test]
fn nvptx_ftz_and_fast_change_the_generated_code() {
    let (plain, plain_dir) = compile_ok("fp.mlir", &float_kernel(""), |_| {});
    let plain = ptx_of(&plain, plain_dir.path());
    assert!(
        plain.contains("div.rn.f32"),
        "IEEE division without flags:\n{plain}"
    );
    assert!(plain.contains("sqrt.rn.f32"), "{plain}");
    assert!(!plain.contains(".ftz."), "{plain}");

    let (ftz, ftz_dir) = compile_ok("fp.mlir", &float_kernel(", flags = {ftz}"), |_| {});
    let ftz = ptx_of(&ftz, ftz_dir.path());
    assert!(
        ftz.contains("div.rn.ftz.f32") || ftz.contains("div.ftz.rn.f32"),
        "flushing division with ftz:\n{ftz}"
    );
    assert!(ftz.contains(".ftz."), "{ftz}");

    let (fast, fast_dir) = compile_ok("fp.mlir", &float_kernel(", flags = {fast}"), |_| {});
    let fast = ptx_of(&fast, fast_dir.path());
    assert!(
        !fast.contains("div.rn.f32"),
        "no IEEE division with fast:\n{fast}"
    );
    assert!(
        fast.contains("approx"),
        "approximate operations with fast:\n{fast}"
    );
    for ptx in [&ftz, &fast] {
        // Still valid PTX.
        let file = ftz_dir.path().join("check.ptx");
        std::fs::write(&file, ptx).unwrap();
        let status = Command::new(ptxas())
            .args(["-arch", "sm_80"])
            .arg(&file)
            .arg("-o")
            .arg(ftz_dir.path().join("c.cubin"))
            .status()
            .unwrap();
        assert!(status.success());
    }
}

#[test]
fn ftz_reaches_libdevice_through_nvvm_reflect() {
    let kernel = |flags: &str| {
        format!(
            r#"gpu.module @m [#nvvm.target<chip = "sm_80"{flags}>] {{
  gpu.func @m(%x: memref<?xf32>) kernel {{
    %i = gpu.global_id x
    %a = memref.load %x[%i] : memref<?xf32>
    %e = math.exp %a : f32
    memref.store %e, %x[%i] : memref<?xf32>
    gpu.return
  }}
}}
"#
        )
    };
    let (plain, d1) = compile_ok("m.mlir", &kernel(""), |_| {});
    let (ftz, d2) = compile_ok("m.mlir", &kernel(", flags = {ftz}"), |_| {});
    let (plain, ftz) = (ptx_of(&plain, d1.path()), ptx_of(&ftz, d2.path()));
    // __nv_expf's non-FTZ path rescales by 2^k with an IEEE multiply; its FTZ path does not.
    let flushing = |ptx: &str| ptx.matches(".ftz.").count();
    assert!(
        flushing(&ftz) > flushing(&plain),
        "libdevice took its FTZ branch:\n{plain}\n---\n{ftz}"
    );
    assert!(!ftz.contains("mul.rn.f32"), "{ftz}");
}

#[test]
fn user_bitcode_is_linked_only_as_needed_and_internalized() {
    let dir = tempfile::tempdir().unwrap();
    let helper = r#"target triple = "nvptx64-nvidia-cuda"
define float @twice(float %x) { %y = fmul float %x, 2.0
  ret float %y }
define float @never_called(float %x) { ret float %x }
"#;
    std::fs::write(dir.path().join("helper.ll"), helper).unwrap();
    let status = Command::new("llvm-as-22")
        .arg(dir.path().join("helper.ll"))
        .arg("-o")
        .arg(dir.path().join("helper.bc"))
        .status()
        .unwrap();
    assert!(status.success());
    let kernel = r#"gpu.module @k [#nvvm.target<chip = "sm_80", link = ["helper.bc"]>] {
  llvm.func @twice(f32) -> f32
  llvm.func @k(%p: !llvm.ptr) attributes {gpu.kernel} {
    %x = llvm.load %p : !llvm.ptr -> f32
    %y = llvm.call @twice(%x) : (f32) -> f32
    llvm.store %y, %p : f32, !llvm.ptr
    llvm.return
  }
}
"#;
    std::fs::write(dir.path().join("k.mlir"), kernel).unwrap();
    let report = build_in(dir.path())
        .kernel("k.mlir")
        .compile()
        .unwrap_or_else(|e| panic!("{e}"));
    let ptx = ptx_of(&report, dir.path());
    assert!(
        !ptx.contains("never_called"),
        "unneeded library code was imported:\n{ptx}"
    );
    assert!(
        !ptx.contains(".visible .func") && !ptx.contains("twice"),
        "the helper was inlined, not exported:\n{ptx}"
    );
    assert!(ptx.contains("add.rn.f32"), "twice(x) became x + x:\n{ptx}");
    assert!(report
        .cargo_directives
        .iter()
        .any(|d| d.ends_with("helper.bc") && d.starts_with("cargo::rerun-if-changed=")));
}

#[test]
fn llvm_ir_input_builds_for_its_triple() {
    let text = r#"target triple = "amdgcn-amd-amdhsa"
define amdgpu_kernel void @fill(ptr addrspace(1) %p, i32 %v) {
  store i32 %v, ptr addrspace(1) %p
  ret void
}
"#;
    let (report, dir) = compile_ok("fill.ll", text, |b| {
        b.target(Vendor::Amdgpu, &["gfx1100"]);
    });
    let module = &report.manifest.modules[0];
    assert_eq!(module.name, "fill");
    assert_eq!(module.kernels[0].name, "fill");
    assert_eq!(
        module.kernels[0]
            .params
            .iter()
            .map(|p| p.llvm_type.as_str())
            .collect::<Vec<_>>(),
        ["ptr addrspace(1)", "i32"]
    );
    let hsaco = std::fs::read(dir.path().join(&module.objects[0].path)).unwrap();
    assert!(hsaco.windows(7).any(|w| w == b"fill.kd"));
}

#[test]
fn every_gpu_module_in_a_file_is_found_at_any_depth() {
    let text = r#"module {
  gpu.module @first [#nvvm.target<chip = "sm_80">] {
    gpu.func @a() kernel { gpu.return }
  }
  module @inner {
    gpu.module @second [#rocdl.target<chip = "gfx90a">] {
      gpu.func @b() kernel { gpu.return }
      gpu.func @not_a_kernel() { gpu.return }
    }
  }
}
"#;
    let (report, _dir) = compile_ok("two.mlir", text, |_| {});
    let modules: Vec<(&str, Vec<&str>, Vendor)> = report
        .manifest
        .modules
        .iter()
        .map(|m| {
            (
                m.name.as_str(),
                m.kernels.iter().map(|k| k.name.as_str()).collect(),
                m.objects[0].vendor,
            )
        })
        .collect();
    assert_eq!(
        modules,
        [
            ("first", vec!["a"], Vendor::Nvptx),
            ("second", vec!["b"], Vendor::Amdgpu)
        ]
    );
}

#[test]
fn llvm_bitcode_input_builds_too() {
    let dir = tempfile::tempdir().unwrap();
    let text = "target triple = \"nvptx64-nvidia-cuda\"\ndefine ptx_kernel void @zero(ptr %p) {\n  store i32 0, ptr %p\n  ret void\n}\n";
    std::fs::write(dir.path().join("zero.ll"), text).unwrap();
    let status = Command::new("llvm-as-22")
        .arg(dir.path().join("zero.ll"))
        .arg("-o")
        .arg(dir.path().join("zero.bc"))
        .status()
        .unwrap();
    assert!(status.success());
    let report = build_in(dir.path())
        .kernel("zero.bc")
        .target(Vendor::Nvptx, &["sm_90"])
        .compile()
        .unwrap_or_else(|e| panic!("{e}"));
    let ptx = ptx_of(&report, dir.path());
    assert!(
        ptx.contains(".visible .entry zero(") && ptx.contains(".target sm_90"),
        "{ptx}"
    );
}

#[test]
fn ptxas_command_options_are_passed_to_ptxas() {
    let kernel = |options: &str| {
        format!(
            "gpu.module @k [#nvvm.target<chip = \"sm_80\", flags = {{\"ptxas-cmd-options\" = {options}}}>] {{\n  gpu.func @k() kernel {{ gpu.return }}\n}}\n"
        )
    };
    // `-v` makes ptxas report register usage, which comes back as a warning.
    let (report, _dir) = compile_ok("k.mlir", &kernel(r#"["-v"]"#), |_| {});
    assert!(
        report
            .warnings
            .iter()
            .any(|w| w.starts_with("ptxas (sm_80):") && w.contains("Used")),
        "{:?}",
        report.warnings
    );
    // An option ptxas rejects fails the build with ptxas's own message.
    let error = compile_error("k.mlir", kernel(r#""--no-such-option""#).as_bytes(), |_| {});
    assert_eq!(error.kind(), gpu_build::ErrorKind::ToolFailed);
    assert!(
        error.message().contains("rejected the PTX for sm_80")
            && error.message().contains("no-such-option"),
        "{error}"
    );
}

#[test]
fn collect_compiler_diagnostics_reports_ptxas_resource_usage() {
    let kernel = |flags: &str| {
        format!(
            "gpu.module @k [#nvvm.target<chip = \"sm_80\"{flags}>, #rocdl.target<chip = \"gfx90a\">] {{\n  gpu.func @k() kernel {{ gpu.return }}\n}}\n"
        )
    };
    let usage = |report: &gpu_build::Report| {
        report
            .warnings
            .iter()
            .any(|w| w.starts_with("ptxas (sm_80):") && w.contains("Used"))
    };
    let flags = r#", flags = {"collect-compiler-diagnostics"}"#;
    let (report, _dir) = compile_ok("k.mlir", &kernel(flags), |_| {});
    assert!(usage(&report), "{:?}", report.warnings);
    // Without the flag ptxas says nothing; the flag is accepted when only AMDGPU is built.
    let (report, _dir) = compile_ok("k.mlir", &kernel(""), |_| {});
    assert!(!usage(&report), "{:?}", report.warnings);
    compile_ok("k.mlir", &kernel(flags), |build| {
        build.target(Vendor::Amdgpu, &[]);
    });
}

#[test]
fn gpu_printf_reaches_the_hip_runtime_on_amdgpu_and_vprintf_on_nvptx() {
    let text = r#"gpu.module @p [#rocdl.target<chip = "gfx90a">, #nvvm.target<chip = "sm_80">] {
  gpu.func @hello(%x: f32) kernel {
    %t = gpu.thread_id x
    %t32 = arith.index_cast %t : index to i32
    gpu.printf "thread %d: %f\n", %t32, %x : i32, f32
    gpu.return
  }
}
"#;
    let (report, dir) = compile_ok("p.mlir", text, |build| {
        build.target(Vendor::Nvptx, &[]).target(Vendor::Amdgpu, &[]);
    });
    for (object, bytes) in objects_of(&report, Vendor::Amdgpu) {
        let notes = String::from_utf8_lossy(&bytes).into_owned();
        // The kernel asks the HIP runtime for its printf buffer (a hidden argument).
        assert!(notes.contains("hidden_hostcall_buffer"), "{}", object.path);
    }
    let ptx = ptx_of(&report, dir.path());
    assert!(ptx.contains("vprintf"), "{ptx}");
}

#[test]
fn nvgpu_mma_sync_on_f16_vectors_lowers_like_upstreams_nvvm_pipeline() {
    // n-D vectors (vector<4x2xf16>) went through an unrealized cast the LLVM IR translation
    // could not take; vector-to-scf and nvgpu-to-nvvm first, as upstream, lower them.
    let text = r#"gpu.module @m [#nvvm.target<chip = "sm_80">] {
  gpu.func @k(%x: memref<?xf16>, %y: memref<?xf16>) kernel {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %v = memref.load %x[%c0] : memref<?xf16>
    %w = memref.load %x[%c1] : memref<?xf16>
    %a0 = vector.broadcast %v : f16 to vector<4x2xf16>
    %a = vector.insert %w, %a0 [1, 1] : f16 into vector<4x2xf16>
    %b = vector.broadcast %w : f16 to vector<2x2xf16>
    %c = vector.broadcast %v : f16 to vector<2x2xf16>
    %d = nvgpu.mma.sync (%a, %b, %c) {mmaShape = [16, 8, 16]} : (vector<4x2xf16>, vector<2x2xf16>, vector<2x2xf16>) -> vector<2x2xf16>
    %e = vector.extract %d[0, 1] : f16 from vector<2x2xf16>
    memref.store %e, %y[%c0] : memref<?xf16>
    gpu.return
  }
}
"#;
    let (report, dir) = compile_ok("m.mlir", text, |_| {});
    let ptx = ptx_of(&report, dir.path());
    assert!(ptx.contains("mma.sync.aligned.m16n8k16"), "{ptx}");
    assert!(
        report.manifest.modules[0]
            .objects
            .iter()
            .any(|o| o.format == Format::Bin),
        "ptxas assembled it"
    );
}

#[test]
fn a_kernel_taking_a_tma_descriptor_compiles_for_sm_90a() {
    // Upstream's CUDA/sm90 TMA tests, outlined: a `!nvgpu.tensormap.descriptor` argument (which
    // convert-gpu-to-nvvm cannot convert in a signature) and mbarrier waits (NVVM ops that are
    // PTX inline assembly, for convert-nvvm-to-llvm).
    let text = r#"gpu.module @m [#nvvm.target<chip = "sm_90a", features = "+ptx80">] {
  gpu.func @k(%d: !nvgpu.tensormap.descriptor<tensor = memref<64x8xf32, 3>, swizzle = none, l2promo = none, oob = zero, interleave = none>, %out: memref<64x8xf32>) kernel {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %bytes = arith.constant 2048 : index
    %phase = arith.constant false
    %ticks = arith.constant 10000000 : index
    %tile = memref.alloca() : memref<64x8xf32, 3>
    %bar = nvgpu.mbarrier.create -> !nvgpu.mbarrier.group<memorySpace = #gpu.address_space<workgroup>>
    nvgpu.mbarrier.init %bar[%c0], %c1 : !nvgpu.mbarrier.group<memorySpace = #gpu.address_space<workgroup>>
    nvgpu.mbarrier.arrive.expect_tx %bar[%c0], %bytes : !nvgpu.mbarrier.group<memorySpace = #gpu.address_space<workgroup>>
    nvgpu.tma.async.load %d[%c0, %c0], %bar[%c0] to %tile : !nvgpu.tensormap.descriptor<tensor = memref<64x8xf32, 3>, swizzle = none, l2promo = none, oob = zero, interleave = none>, !nvgpu.mbarrier.group<memorySpace = #gpu.address_space<workgroup>> -> memref<64x8xf32, 3>
    nvgpu.mbarrier.try_wait.parity %bar[%c0], %phase, %ticks : !nvgpu.mbarrier.group<memorySpace = #gpu.address_space<workgroup>>
    %v = memref.load %tile[%c1, %c1] : memref<64x8xf32, 3>
    memref.store %v, %out[%c1, %c1] : memref<64x8xf32>
    gpu.return
  }
}
"#;
    let (report, dir) = compile_ok("m.mlir", text, |_| {});
    let ptx = ptx_of(&report, dir.path());
    assert!(ptx.contains("cp.async.bulk.tensor.2d"), "{ptx}");
    assert!(ptx.contains("mbarrier.try_wait.parity"), "{ptx}");
    // The descriptor is one pointer parameter, as upstream passes it.
    let kernel = &report.manifest.modules[0].kernels[0];
    assert_eq!(kernel.params[0].llvm_type, "ptr", "{kernel:?}");
    assert!(
        report.manifest.modules[0]
            .objects
            .iter()
            .any(|o| o.format == Format::Bin),
        "ptxas assembled it"
    );
}

#[test]
fn a_subview_at_a_run_time_offset_lowers_on_every_target() {
    // expand-strided-metadata turns the subview into affine.apply, so affine is lowered after
    // it (before the fix: an unrealized cast the LLVM IR translation rejected).
    let text = r#"gpu.module @m [#nvvm.target<chip = "sm_80">, #rocdl.target<chip = "gfx90a">] {
  gpu.func @k(%x: memref<128x128xf32>, %i: index, %j: index) kernel {
    %c0 = arith.constant 0 : index
    %s = memref.subview %x[%i, %j] [64, 64] [1, 1] : memref<128x128xf32> to memref<64x64xf32, strided<[128, 1], offset: ?>>
    %t = gpu.thread_id x
    %v = memref.load %s[%t, %c0] : memref<64x64xf32, strided<[128, 1], offset: ?>>
    memref.store %v, %s[%c0, %t] : memref<64x64xf32, strided<[128, 1], offset: ?>>
    gpu.return
  }
}
"#;
    for vendor in [Vendor::Nvptx, Vendor::Amdgpu, Vendor::Host] {
        compile_ok("m.mlir", text, |b| {
            b.target(vendor, &[]);
        });
    }
}
