//! The peer check: for single-vendor llvm-dialect input, our PTX equals what upstream's
//! `mlir-opt-22 --gpu-module-to-binary=format=isa` emits at the same O (comment lines aside).

use crate::common::*;
use std::process::Command;

/// A reduction-free but non-trivial kernel: index math, a branch, loads, fma, a loop.
fn kernel(level: u8) -> String {
    format!(
        r#"module attributes {{gpu.container_module}} {{
  gpu.module @peer [#nvvm.target<O = {level}, chip = "sm_80">] {{
    llvm.func @scale(%x: !llvm.ptr, %n: i32, %a: f32) attributes {{gpu.kernel, nvvm.kernel}} {{
      %tid = nvvm.read.ptx.sreg.tid.x : i32
      %ntid = nvvm.read.ptx.sreg.ntid.x : i32
      %ctaid = nvvm.read.ptx.sreg.ctaid.x : i32
      %base = llvm.mul %ctaid, %ntid : i32
      %i = llvm.add %base, %tid : i32
      %ok = llvm.icmp "slt" %i, %n : i32
      llvm.cond_br %ok, ^body, ^done
    ^body:
      %p = llvm.getelementptr %x[%i] : (!llvm.ptr, i32) -> !llvm.ptr, f32
      %v = llvm.load %p : !llvm.ptr -> f32
      %w = llvm.fmul %v, %a : f32
      %r = llvm.fadd %w, %a : f32
      llvm.store %r, %p : f32, !llvm.ptr
      llvm.br ^done
    ^done:
      llvm.return
    }}
  }}
}}
"#
    )
}

/// The PTX inside `#gpu.object<..., assembly = "...">` as mlir-opt prints it.
fn upstream_ptx(source: &std::path::Path) -> String {
    let output = Command::new("mlir-opt-22")
        .arg("--gpu-module-to-binary=format=isa")
        .arg(source)
        .env_remove("CUDA_ROOT")
        .env_remove("CUDA_HOME")
        .env_remove("CUDA_PATH")
        .output()
        .expect("mlir-opt-22 runs (install mlir-22-tools)");
    assert!(
        output.status.success(),
        "mlir-opt-22 failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let text = String::from_utf8(output.stdout).unwrap();
    let start = text.find("assembly = \"").expect("an assembly object") + "assembly = \"".len();
    let bytes = &text.as_bytes()[start..];
    let mut ptx = Vec::new();
    let mut i = 0;
    while bytes[i] != b'"' {
        if bytes[i] == b'\\' {
            if bytes[i + 1] == b'\\' {
                ptx.push(b'\\');
                i += 2;
            } else {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).unwrap();
                ptx.push(u8::from_str_radix(hex, 16).unwrap());
                i += 3;
            }
        } else {
            ptx.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(ptx).unwrap()
}

#[test]
fn our_ptx_equals_mlir_opt_at_every_optimization_level() {
    let mut seen = Vec::new();
    for level in 0..=3 {
        let (report, dir) = compile_ok("peer.mlir", &kernel(level), |_| {});
        let object = &report.manifest.modules[0].objects[0];
        assert_eq!((object.chip.as_str(), object.opt_level), ("sm_80", level));
        let ours = std::fs::read_to_string(dir.path().join(&object.path)).unwrap();
        let theirs = upstream_ptx(&dir.path().join("peer.mlir"));
        assert!(theirs.contains(".target sm_80"), "{theirs}");
        assert_eq!(
            strip_ptx_comments(&ours),
            strip_ptx_comments(&theirs),
            "PTX differs at O{level}"
        );
        seen.push(strip_ptx_comments(&ours));
    }
    // The levels really produce different code, so the comparison above is not vacuous.
    assert_ne!(seen[0], seen[2]);
}
