//! Every class of bad input gets a clear error (what, where as file:line:col, how to fix it),
//! never a panic, and leaves no manifest behind (checked by `compile_error`).

use crate::common::*;
use gpu_build::{ErrorKind, Vendor};

const GOOD_MODULE: &str = r#"gpu.module @k [#nvvm.target<chip = "sm_80">] {
  gpu.func @k(%a: memref<?xf32>) kernel {
    gpu.return
  }
}
"#;

fn with_target(target: &str) -> String {
    GOOD_MODULE.replace(r#"#nvvm.target<chip = "sm_80">"#, target)
}

#[test]
fn parse_errors_carry_mlirs_diagnostic_at_file_line_col() {
    let error = compile_error(
        "bad.mlir",
        b"gpu.module @k {\n  gpu.func @k() kernel {\n    %x = arith.constant 1 : f32 f32\n",
        |_| {},
    );
    assert_eq!(error.kind(), ErrorKind::InvalidInput);
    assert!(error.message().starts_with("bad.mlir:3:"), "{error}");
    assert!(error.message().contains("error:"), "{error}");
    // The offending line is shown under the message.
    assert!(
        error.message().contains("arith.constant 1 : f32 f32"),
        "{error}"
    );
}

#[test]
fn verifier_errors_carry_the_location() {
    let text = "gpu.module @k [#nvvm.target] {\n  gpu.func @k(%a: f32) kernel {\n    %x = arith.addi %a, %a : f32\n    gpu.return\n  }\n}\n";
    let error = compile_error("verify.mlir", text.as_bytes(), |_| {});
    assert!(
        error.message().starts_with("verify.mlir:3:10: error:"),
        "{error}"
    );
    assert!(error.message().contains("signless-integer"), "{error}");
}

#[test]
fn a_file_without_gpu_module_says_how_to_write_one() {
    let error = compile_error("none.mlir", b"func.func @f() { return }\n", |_| {});
    assert_eq!(error.kind(), ErrorKind::NothingToCompile);
    assert!(
        error
            .message()
            .contains("none.mlir: error: no gpu.module in this file"),
        "{error}"
    );
    assert!(error.message().contains("gpu.module @kernels"), "{error}");
}

#[test]
fn a_gpu_module_without_kernels_is_a_warning() {
    let (report, _dir) = compile_ok(
        "empty.mlir",
        "gpu.module @helpers [#nvvm.target<chip = \"sm_80\">] {\n}\n",
        |_| {},
    );
    assert!(
        report
            .warnings
            .iter()
            .any(|w| w.contains("empty.mlir:1:1: gpu.module @helpers has no kernels")),
        "{:?}",
        report.warnings
    );
    assert!(report
        .cargo_directives
        .iter()
        .any(|d| d.starts_with("cargo::warning=empty.mlir:1:1")));
}

#[test]
fn an_empty_target_list_names_both_fixes() {
    let error = compile_error(
        "k.mlir",
        GOOD_MODULE
            .replace(r#" [#nvvm.target<chip = "sm_80">]"#, "")
            .as_bytes(),
        |_| {},
    );
    assert_eq!(error.kind(), ErrorKind::InvalidTarget);
    assert!(
        error
            .message()
            .contains("k.mlir:1:1: error: gpu.module @k has no targets"),
        "{error}"
    );
    assert!(error.message().contains("#nvvm.target<chip"), "{error}");
    assert!(error.message().contains(".target(Vendor::Nvptx"), "{error}");
}

#[test]
fn optimization_level_out_of_range() {
    // In the file: MLIR's own verifier rejects it, with the location.
    let error = compile_error(
        "k.mlir",
        with_target(r#"#nvvm.target<O = 4, chip = "sm_80">"#).as_bytes(),
        |_| {},
    );
    assert!(error.message().starts_with("k.mlir:1:"), "{error}");
    assert!(error.message().contains("O"), "{error}");
    // From build.rs.
    let error = compile_error("k.mlir", GOOD_MODULE.as_bytes(), |b| {
        b.opt_level(7);
    });
    assert!(
        error
            .message()
            .contains("optimization level 7 is out of range; use 0, 1, 2 or 3"),
        "{error}"
    );
}

#[test]
fn empty_and_unknown_chips_are_rejected_with_the_valid_ones() {
    let error = compile_error("k.mlir", GOOD_MODULE.as_bytes(), |b| {
        b.target(Vendor::Nvptx, &["sm_91"]);
    });
    assert_eq!(error.kind(), ErrorKind::InvalidTarget);
    assert!(
        error.message().contains("k.mlir:1:1: error: gpu.module @k"),
        "{error}"
    );
    assert!(
        error
            .message()
            .contains("`sm_91` is not a nvptx chip LLVM 22 knows (did you mean `sm_90`?)"),
        "{error}"
    );
    assert!(error.message().contains("valid chips: sm_20"), "{error}");

    let error = compile_error(
        "k.mlir",
        with_target(r#"#rocdl.target<chip = "gfx9000">"#).as_bytes(),
        |_| {},
    );
    assert!(
        error.message().contains("`gfx9000` is not a amdgpu chip"),
        "{error}"
    );

    let error = compile_error("k.mlir", GOOD_MODULE.as_bytes(), |b| {
        b.target(Vendor::Amdgpu, &[""]);
    });
    assert!(
        error.message().contains("the amdgpu chip is empty"),
        "{error}"
    );
}

#[test]
fn unknown_rocdl_abi() {
    let error = compile_error(
        "k.mlir",
        with_target(r#"#rocdl.target<chip = "gfx90a", abi = "700">"#).as_bytes(),
        |_| {},
    );
    assert!(
        error.message().contains("k.mlir:1:1: error: gpu.module @k"),
        "{error}"
    );
    assert!(
        error
            .message()
            .contains("unknown ROCDL abi `700`; use one of 400, 500, 600"),
        "{error}"
    );
}

#[test]
fn a_missing_link_file_is_named_with_where_it_was_looked_for() {
    let error = compile_error(
        "k.mlir",
        with_target(r#"#nvvm.target<chip = "sm_80", link = ["libs/missing.bc"]>"#).as_bytes(),
        |_| {},
    );
    assert!(
        error
            .message()
            .contains("link file `libs/missing.bc` does not exist"),
        "{error}"
    );
    assert!(
        error
            .message()
            .contains("relative to the crate's directory"),
        "{error}"
    );
}

#[test]
fn a_call_to_a_function_defined_nowhere_is_named_with_its_caller() {
    let text = r#"gpu.module @k [#nvvm.target<chip = "sm_80">, #rocdl.target<chip = "gfx90a">] {
  llvm.func @helper_from_nowhere(f32) -> f32
  llvm.func @k(%p: !llvm.ptr) attributes {gpu.kernel} {
    %x = llvm.load %p : !llvm.ptr -> f32
    %y = llvm.call @helper_from_nowhere(%x) : (f32) -> f32
    llvm.store %y, %p : f32, !llvm.ptr
    llvm.return
  }
}
"#;
    for vendor in [Vendor::Nvptx, Vendor::Amdgpu] {
        let error = compile_error("k.mlir", text.as_bytes(), |b| {
            b.target(vendor, &[]);
        });
        assert_eq!(error.kind(), ErrorKind::Link);
        assert!(
            error.message().contains(
                "`helper_from_nowhere` is used from `k` but defined nowhere after linking"
            ),
            "{error}"
        );
    }
}

#[test]
fn garbage_and_non_utf8_files() {
    let error = compile_error("k.mlir", b"\x7fELF\x02\x01\x01\x00\xff\xfe", |_| {});
    assert!(
        error
            .message()
            .contains("k.mlir:1:9: error: the file is not UTF-8 text (invalid byte 0xff)"),
        "{error}"
    );
    let error = compile_error("k.mlir", b"gpu.module @k {\0}", |_| {});
    assert!(error.message().contains("NUL byte"), "{error}");
    let error = compile_error("k.mlir", b"}}}} this is not MLIR {{{{", |_| {});
    assert!(error.message().starts_with("k.mlir:1:1: error:"), "{error}");
    let error = compile_error("k.ll", b"define garbage", |_| {});
    assert!(
        error
            .message()
            .contains("k.ll: error: LLVM could not read the file"),
        "{error}"
    );
    let error = compile_error("k.bc", b"BC\xc0\xde garbage", |_| {});
    assert!(
        error
            .message()
            .contains("k.bc: error: LLVM could not read the file"),
        "{error}"
    );
    let error = compile_error("k.cu", b"__global__ void k() {}", |_| {});
    assert!(
        error
            .message()
            .contains("use `.mlir` (MLIR), `.ll` (LLVM IR) or `.bc`"),
        "{error}"
    );
}

#[test]
fn a_missing_kernel_file_names_the_resolved_path() {
    let dir = tempfile::tempdir().unwrap();
    let error = build_in(dir.path())
        .kernel("kernels/nope.mlir")
        .compile()
        .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Io);
    assert!(
        error
            .message()
            .contains("cannot read kernel file kernels/nope.mlir"),
        "{error}"
    );
    assert!(
        error
            .message()
            .contains(&dir.path().join("kernels/nope.mlir").display().to_string()),
        "{error}"
    );
}

#[test]
fn deeply_nested_input_is_refused_not_a_stack_overflow() {
    let mut text = String::from("gpu.module @k [#nvvm.target] {\n  gpu.func @k() kernel {\n");
    for _ in 0..100_000 {
        text.push_str("scf.execute_region { ");
    }
    let error = compile_error("deep.mlir", text.as_bytes(), |_| {});
    assert!(error.message().contains("deep.mlir:3:"), "{error}");
    assert!(
        error.message().contains("nest more than 256 levels"),
        "{error}"
    );
    let brackets = format!("gpu.module @k {{ {} }}", "[".repeat(50_000));
    let error = compile_error("deep.mlir", brackets.as_bytes(), |_| {});
    assert!(error.message().contains("nest more than"), "{error}");
}

#[test]
fn vendor_specific_ops_for_the_other_vendor_name_the_op_and_target() {
    let text = r#"gpu.module @k [#nvvm.target<chip = "sm_80">, #rocdl.target<chip = "gfx90a">] {
  llvm.func @k(%p: !llvm.ptr) attributes {gpu.kernel} {
    %t = nvvm.read.ptx.sreg.tid.x : i32
    llvm.store %t, %p : i32, !llvm.ptr
    llvm.return
  }
}
"#;
    let error = compile_error("k.mlir", text.as_bytes(), |_| {});
    assert_eq!(error.kind(), ErrorKind::Unsupported);
    assert!(
        error.message().contains("k.mlir:3:10: error: `nvvm.read.ptx.sreg.tid.x` is a nvptx operation and cannot be compiled for amdgpu (gfx90a)"),
        "{error}"
    );
    // For its own vendor it compiles.
    let (report, _dir) = compile_ok("k.mlir", text, |b| {
        b.target(Vendor::Nvptx, &[]);
    });
    assert_eq!(report.manifest.modules[0].kernels[0].name, "k");
}

#[test]
fn unknown_target_flags_and_targets() {
    let error = compile_error(
        "k.mlir",
        with_target(r#"#nvvm.target<chip = "sm_80", flags = {fats}>"#).as_bytes(),
        |_| {},
    );
    assert!(error.message().contains("k.mlir:1:1: error: gpu.module @k: unknown nvptx target flag `fats`; known flags: fast, ftz"), "{error}");
}

#[test]
fn a_ptx_version_too_old_for_the_chip_is_an_error_not_an_abort() {
    let error = compile_error(
        "k.mlir",
        with_target(r#"#nvvm.target<chip = "sm_90", features = "+ptx60">"#).as_bytes(),
        |_| {},
    );
    assert!(
        error
            .message()
            .contains("PTX ISA 6.0 (`+ptx60` in features) cannot target sm_90; it needs 7.8"),
        "{error}"
    );
}

#[test]
fn llvm_ir_for_one_vendor_cannot_be_built_for_the_other() {
    let text =
        "target triple = \"nvptx64-nvidia-cuda\"\ndefine ptx_kernel void @k() {\n  ret void\n}\n";
    let error = compile_error("k.ll", text.as_bytes(), |b| {
        b.target(Vendor::Amdgpu, &["gfx90a"]);
    });
    assert!(error.message().contains("this LLVM IR is for nvptx (triple `nvptx64-nvidia-cuda`) and cannot be compiled for amdgpu"), "{error}");
}

#[test]
fn a_failed_build_removes_the_previous_manifest() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("k.mlir"), GOOD_MODULE).unwrap();
    build_in(dir.path()).kernel("k.mlir").compile().unwrap();
    let manifest = dir.path().join(gpu_manifest::MANIFEST_PATH);
    assert!(manifest.exists());
    std::fs::write(dir.path().join("k.mlir"), "gpu.module @k {").unwrap();
    build_in(dir.path()).kernel("k.mlir").compile().unwrap_err();
    assert!(
        !manifest.exists(),
        "a later build could embed the stale objects"
    );
}
