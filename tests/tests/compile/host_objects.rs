//! The host target at build time: kernels compiled for the build's own triple into a static
//! library, with one entry point per kernel and GPU intrinsics turned into CPU code.

use crate::common::*;
use gpu_build::{ErrorKind, Vendor};
use object::{Object as _, ObjectSymbol};

#[test]
fn host_objects_have_an_entry_per_kernel_and_no_gpu_intrinsics() {
    let out = tempfile::tempdir().unwrap();
    let mut build = build_in(out.path());
    for kernel in sample_kernels() {
        build.kernel(kernel);
    }
    let report = build
        .target(Vendor::Host, &[])
        .compile()
        .unwrap_or_else(|e| panic!("{e}"));
    for module in &report.manifest.modules {
        assert_eq!(module.objects.len(), 1);
        let object = &module.objects[0];
        assert_eq!(object.vendor, Vendor::Host);
        let host = object.abi.host().expect("host entries");
        // reduce's barriers are split into thread loops: no kernel needs coroutines.
        assert_eq!(
            host.coroutine_kernels,
            Vec::<String>::new(),
            "{}",
            module.name
        );
        assert!(report.warnings.is_empty(), "{:?}", report.warnings);
        let bytes = std::fs::read(out.path().join(&object.path)).unwrap();
        let file = object::File::parse(bytes.as_slice()).unwrap();
        let defined: Vec<String> = file
            .symbols()
            .filter(|s| s.is_definition() && s.is_global())
            .filter_map(|s| s.name().ok().map(String::from))
            .collect();
        let entries: Vec<String> = module
            .kernels
            .iter()
            .flat_map(|k| {
                [
                    format!("{}{}", host.symbol_prefix, k.name),
                    format!("{}{}.blocks", host.symbol_prefix, k.name),
                ]
            })
            .collect();
        let mut defined_sorted = defined.clone();
        defined_sorted.sort();
        let mut entries_sorted = entries.clone();
        entries_sorted.sort();
        assert_eq!(
            defined_sorted, entries_sorted,
            "only the entry points are exported"
        );
        let undefined: Vec<String> = file
            .symbols()
            .filter(|s| s.is_undefined())
            .filter_map(|s| s.name().ok().map(String::from))
            .filter(|n| !n.is_empty())
            .collect();
        for name in &undefined {
            assert!(
                !name.starts_with("llvm.") && !name.starts_with("__nv_"),
                "{}: {name}",
                module.name
            );
        }
        if module.name == "math" {
            for libm in ["expf", "logf", "sinf", "cos", "pow"] {
                assert!(
                    undefined.iter().any(|n| n == libm),
                    "math calls {libm}: {undefined:?}"
                );
            }
        }
    }
    let library = out
        .path()
        .join("gpu-build/host")
        .read_dir()
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    assert!(library
        .file_name()
        .unwrap()
        .to_string_lossy()
        .starts_with("libgpu_host_kernels_"));
    assert!(report
        .cargo_directives
        .iter()
        .any(|d| d.starts_with("cargo::rustc-link-lib=static=gpu_host_kernels_")));
}

#[test]
fn subgroup_operations_the_host_does_not_emulate_are_a_build_error_for_it() {
    // gpu.shuffle, gpu.lane_id, gpu.all_reduce and the subgroup MMA ops run on the host
    // (host_semantics.rs); gpu.subgroup_id does not.
    let text = r#"gpu.module @k [#nvvm.target<chip = "sm_80">] {
  gpu.func @k(%x: memref<4xindex>) kernel {
    %c0 = arith.constant 0 : index
    %s = gpu.subgroup_id : index
    memref.store %s, %x[%c0] : memref<4xindex>
    gpu.return
  }
}
"#;
    let error = compile_error("k.mlir", text.as_bytes(), |b| {
        b.target(Vendor::Host, &[]);
    });
    assert_eq!(error.kind(), ErrorKind::Unsupported);
    assert!(error.message().contains("k.mlir:4:10: error: `gpu.subgroup_id` is a nvptx/amdgpu/vulkan/opencl operation and cannot be compiled for host"), "{error}");
    assert!(
        error
            .message()
            .contains("does not emulate this subgroup (warp) operation"),
        "{error}"
    );
}

#[test]
fn kernels_are_split_at_their_barriers_unless_a_barrier_depends_on_the_thread() {
    let out = tempfile::tempdir().unwrap();
    let mut build = build_in(out.path());
    let report = build
        .kernel(workspace().join("tests/kernels/barriers.mlir"))
        .target(Vendor::Host, &[])
        .compile()
        .unwrap_or_else(|e| panic!("{e}"));
    let object = &report.manifest.modules[0].objects[0];
    let host = object.abi.host().expect("host entries");
    assert_eq!(host.coroutine_kernels, ["early_exit"]);
    assert_eq!(
        report.warnings,
        ["kernel `early_exit` runs one coroutine per GPU thread on the host (slow): its barriers \
          cannot be split into thread loops: a barrier in control flow that depends on the \
          thread (threads of a block may reach it a different number of times)"]
    );
}

/// Shuffles in control flow that depends on the thread (`if (warp == 0)`, `if (lane < 16)`)
/// are split into thread loops run by thread state, not coroutines: no subgroup kernel of the
/// tests needs coroutines, and the build warns of none.
#[test]
fn shuffles_only_some_subgroups_run_are_split_not_run_as_coroutines() {
    let out = tempfile::tempdir().unwrap();
    let report = build_in(out.path())
        .kernel(workspace().join("tests/kernels/subgroups.mlir"))
        .target(Vendor::Host, &[])
        .compile()
        .unwrap_or_else(|e| panic!("{e}"));
    let module = &report.manifest.modules[0];
    for kernel in ["warp_then_block", "split_subgroup"] {
        assert!(module.kernels.iter().any(|k| k.name == kernel), "{kernel}");
    }
    let host = module.objects[0].abi.host().expect("host entries");
    assert!(
        host.coroutine_kernels.is_empty(),
        "{:?}",
        host.coroutine_kernels
    );
    assert!(report.warnings.is_empty(), "{:?}", report.warnings);
}

/// `gpu.all_reduce` (every operation, and the region form) goes through workgroup memory with
/// barriers the whole block reaches (`block_reduce.rs`): thread loops, not coroutines, where
/// MLIR's shuffle lowering (its second stage runs in the first warp only) needed coroutines.
#[test]
fn all_reduce_kernels_run_as_thread_loops() {
    let out = tempfile::tempdir().unwrap();
    let mut build = build_in(out.path());
    let report = build
        .kernel(workspace().join("tests/kernels/subgroups.mlir"))
        .kernel(workspace().join("sample-project/kernels/block_total.mlir"))
        .target(Vendor::Host, &[])
        .compile()
        .unwrap_or_else(|e| panic!("{e}"));
    for module in &report.manifest.modules {
        let host = module.objects[0].abi.host().expect("host entries");
        assert!(
            host.coroutine_kernels.is_empty(),
            "{}: {:?}",
            module.name,
            host.coroutine_kernels
        );
    }
    assert!(report.warnings.is_empty(), "{:?}", report.warnings);
}

#[test]
fn dynamic_shared_memory_gets_its_full_size_in_thread_local_storage() {
    // MLIR 22 names the zero-length global of `gpu.dynamic_shared_memory` `__dynamic_shmem__0`;
    // taken for static workgroup memory, it became a zero-byte thread-local that kernels wrote
    // past (silently over the program's other thread-locals, or a crash in a loaded module).
    let text = r#"gpu.module @k [#nvvm.target<chip = "sm_80">] {
  gpu.func @k(%x: memref<4xf32>) kernel {
    %c0 = arith.constant 0 : index
    %t = gpu.thread_id x
    %raw = gpu.dynamic_shared_memory : memref<?xi8, #gpu.address_space<workgroup>>
    %row = memref.view %raw[%c0][] : memref<?xi8, #gpu.address_space<workgroup>> to memref<4xf32, #gpu.address_space<workgroup>>
    %v = memref.load %x[%t] : memref<4xf32>
    memref.store %v, %row[%t] : memref<4xf32, #gpu.address_space<workgroup>>
    gpu.barrier
    %w = memref.load %row[%c0] : memref<4xf32, #gpu.address_space<workgroup>>
    memref.store %w, %x[%t] : memref<4xf32>
    gpu.return
  }
}
"#;
    let (report, dir) = compile_ok("k.mlir", text, |b| {
        b.target(Vendor::Host, &[]);
    });
    let object = &report.manifest.modules[0].objects[0];
    let bytes = std::fs::read(dir.path().join(&object.path)).unwrap();
    let file = object::File::parse(bytes.as_slice()).unwrap();
    let sizes: Vec<(String, u64)> = file
        .symbols()
        .filter_map(|s| Some((s.name().ok()?.to_string(), s.size())))
        .filter(|(name, _)| name.contains("dynamic_shmem"))
        .collect();
    assert_eq!(
        sizes.iter().map(|(_, size)| *size).collect::<Vec<_>>(),
        [u64::from(
            gpu_build::manifest::targets::host::DYNAMIC_SHARED_BYTES
        )],
        "{sizes:?}"
    );
}

#[test]
fn a_private_allocation_in_another_address_space_is_split_at_barriers_too() {
    // A `memref.alloca` in the workgroup address space is an alloca of `ptr addrspace(3)`: its
    // per-thread copy must keep that type (was "the split kernel is invalid" and coroutines).
    let text = r#"gpu.module @k [#nvvm.target<chip = "sm_80">] {
  gpu.func @k(%x: memref<4xf32>) kernel {
    %t = gpu.thread_id x
    %row = memref.alloca() : memref<4xf32, #gpu.address_space<workgroup>>
    %v = memref.load %x[%t] : memref<4xf32>
    memref.store %v, %row[%t] : memref<4xf32, #gpu.address_space<workgroup>>
    gpu.barrier
    %w = memref.load %row[%t] : memref<4xf32, #gpu.address_space<workgroup>>
    memref.store %w, %x[%t] : memref<4xf32>
    gpu.return
  }
}
"#;
    let (report, _dir) = compile_ok("k.mlir", text, |b| {
        b.target(Vendor::Host, &[]);
    });
    assert!(report.warnings.is_empty(), "{:?}", report.warnings);
    let host = report.manifest.modules[0].objects[0].abi.host().unwrap();
    assert!(host.coroutine_kernels.is_empty(), "{host:?}");
}

/// The instructions of `symbol` in `object`, as llvm-objdump prints them.
fn disassembly(object: &std::path::Path, symbol: &str) -> String {
    let output = std::process::Command::new("llvm-objdump-22")
        .arg("-d")
        .arg("--no-show-raw-insn")
        .arg(format!("--disassemble-symbols={symbol}"))
        .arg(object)
        .output()
        .expect("llvm-objdump-22 (scripts/setup.sh installs it)");
    assert!(output.status.success(), "{output:?}");
    let text = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        text.contains(&format!("<{symbol}>:")),
        "{symbol} not found: {text}"
    );
    text
}

#[test]
fn x86_64_blocks_entries_have_a_copy_per_cpu_level_behind_a_dispatcher() {
    use gpu_build::manifest::targets::host::X86_64_CPUS;
    if !cfg!(target_arch = "x86_64") {
        eprintln!("skipped: host objects are compiled for x86-64 only on an x86-64 build machine");
        return;
    }
    let compile = |level: u8| {
        let out = tempfile::tempdir().unwrap();
        let report = build_in(out.path())
            .kernel(workspace().join("sample-project/kernels/saxpy.mlir"))
            .target(Vendor::Host, &[])
            .opt_level(level)
            .compile()
            .unwrap_or_else(|e| panic!("{e}"));
        let module = &report.manifest.modules[0];
        let host = module.objects[0].abi.host().cloned().unwrap();
        (out, module.objects[0].path.clone(), host.symbol_prefix)
    };
    let (out, path, prefix) = compile(3);
    let object = out.path().join(&path);
    let bytes = std::fs::read(&object).unwrap();
    let file = object::File::parse(bytes.as_slice()).unwrap();
    let local = |name: &str| {
        file.symbols()
            .any(|s| s.is_definition() && !s.is_global() && s.name() == Ok(name))
    };
    let copy = |cpu: &str| format!("{prefix}saxpy.{cpu}.blocks");
    for cpu in &X86_64_CPUS[1..] {
        assert!(local(&copy(cpu)), "no local {}", copy(cpu));
    }
    // The exported entry reads the runtime's CPU level and calls the copy for it; the
    // baseline's copy is its own function or inlined into it. Either way the exported entry
    // runs on every x86-64 processor: SSE2 only, no AVX registers.
    let entry = format!("{prefix}saxpy.blocks");
    let mut exported = disassembly(&object, &entry);
    if local(&copy(X86_64_CPUS[0])) {
        exported += &disassembly(&object, &copy(X86_64_CPUS[0]));
    }
    assert!(
        exported.contains(&format!(
            "0x{:x}(",
            gpu_build::manifest::targets::host::CPU_LEVEL_OFFSET
        )),
        "the CPU level is read from the context: {exported}"
    );
    assert!(
        !exported.contains("ymm") && !exported.contains("zmm"),
        "{exported}"
    );
    assert!(exported.contains("mulps"), "{exported}");
    // Each other copy uses its CPU's instructions: AVX registers in v3 (AVX2) and v4 (AVX-512,
    // which LLVM still runs 256 bits wide for most loops).
    for cpu in &X86_64_CPUS[1..] {
        let text = disassembly(&object, &copy(cpu));
        assert!(
            text.contains("ymm") || text.contains("zmm"),
            "{cpu}: {text}"
        );
    }

    // Unoptimized builds (debugging) keep one copy.
    let (out, path, prefix) = compile(0);
    let bytes = std::fs::read(out.path().join(&path)).unwrap();
    let file = object::File::parse(bytes.as_slice()).unwrap();
    assert!(!file.symbols().any(|s| s
        .name()
        .is_ok_and(|n| n.starts_with(&prefix) && n.contains(".x86-64-v"))));
}
