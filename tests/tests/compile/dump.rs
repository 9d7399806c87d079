//! `GPU_BUILD_DUMP` and the AMDGPU device-library control variables it lets us see. Each test
//! runs in a process of its own, with `GPU_BUILD_DUMP=llvm,isa` set there (see [`dumping`]).

use crate::common::*;

#[test]
fn amdgpu_device_library_control_variables_follow_the_flags() {
    if !dumping("amdgpu_device_library_control_variables_follow_the_flags") {
        return;
    }
    let text = r#"gpu.module @m [#rocdl.target<chip = "gfx90a", flags = {daz}>, #rocdl.target<chip = "gfx1100", flags = {fast}>] {
  gpu.func @m(%x: memref<?xf32>) kernel {
    %i = gpu.global_id x
    %a = memref.load %x[%i] : memref<?xf32>
    %t = math.tan %a : f32
    %p = math.powf %t, %a : f32
    memref.store %p, %x[%i] : memref<?xf32>
    gpu.return
  }
}
"#;
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("m.mlir"), text).unwrap();
    let report = build_in(dir.path())
        .kernel("m.mlir")
        .compile()
        .unwrap_or_else(|e| panic!("{e}"));
    let object_dir = dir
        .path()
        .join(&report.manifest.modules[0].objects[0].path)
        .parent()
        .unwrap()
        .to_path_buf();
    let linked =
        |chip: &str| std::fs::read_to_string(object_dir.join(format!("{chip}.linked.ll"))).unwrap();
    // The control variables the libraries read survive linking, with the values the flags ask for.
    let variables = |chip: &str| -> std::collections::BTreeMap<String, u64> {
        linked(chip)
            .lines()
            .filter_map(|line| {
                let rest = line.strip_prefix("@__oclc_")?;
                let (name, definition) = rest.split_once(" = ")?;
                assert!(
                    definition.starts_with(
                        "linkonce_odr protected local_unnamed_addr addrspace(4) constant i"
                    ),
                    "{line}"
                );
                let value = definition
                    .split(' ')
                    .nth(6)?
                    .trim_end_matches(',')
                    .parse()
                    .ok()?;
                Some((name.to_string(), value))
            })
            .collect()
    };
    let gfx90a = variables("gfx90a");
    assert_eq!(gfx90a.get("daz_opt"), Some(&1), "{gfx90a:?}");
    assert_eq!(gfx90a.get("ISA_version"), Some(&9010), "{gfx90a:?}");
    assert_eq!(gfx90a.get("finite_only_opt"), Some(&0), "{gfx90a:?}");
    assert!(linked("gfx90a").contains("!\"amdhsa_code_object_version\", i32 500"));
    let gfx1100 = variables("gfx1100");
    assert_eq!(gfx1100.get("ISA_version"), Some(&11000), "{gfx1100:?}");
    // `fast` = finite_only + unsafe_math + daz, without correctly rounded sqrt.
    assert_eq!(gfx1100.get("finite_only_opt"), Some(&1), "{gfx1100:?}");
    assert_eq!(gfx1100.get("daz_opt"), Some(&1), "{gfx1100:?}");
    for (name, want) in [("unsafe_math_opt", 1), ("correctly_rounded_sqrt32", 0)] {
        assert!(
            gfx1100.get(name).is_none_or(|v| *v == want),
            "{name}: {gfx1100:?}"
        );
    }
    // All dumps exist and were announced.
    for file in ["gfx90a.opt.ll", "gfx90a.s", "gfx1100.s"] {
        assert!(object_dir.join(file).is_file(), "{file}");
        assert!(
            report
                .warnings
                .iter()
                .any(|w| w.contains("GPU_BUILD_DUMP wrote") && w.ends_with(file)),
            "{:?}",
            report.warnings
        );
    }
    let isa = std::fs::read_to_string(object_dir.join("gfx90a.s")).unwrap();
    assert!(isa.contains(".amdhsa_kernel m"));
    // HIP's block-size limit, not the translation's 256: the runtime allows 1024-thread blocks.
    assert!(gfx90a_opt(&object_dir).contains("\"amdgpu-flat-work-group-size\"=\"1,1024\""));
}

/// Whether the test `name` runs here: in the process of its own it starts with
/// `GPU_BUILD_DUMP=llvm,isa` (the variable is the process's: set in this one, it would make every
/// build of the binary's other tests dump too, and race with their reads of the environment).
fn dumping(name: &str) -> bool {
    rerun::in_own_process(module_path!(), name, &[("GPU_BUILD_DUMP", "llvm,isa")])
}

/// The host's thread loops over a kernel's body are LLVM parallel loops, so the vectorizer
/// checks no overlap of the kernel's pointers at run time: the stencil's in and out memrefs
/// may alias as far as LLVM knows, and its 16-thread rows paid that check in every row.
#[test]
fn host_thread_loops_vectorize_as_parallel_loops_without_overlap_checks() {
    if !dumping("host_thread_loops_vectorize_as_parallel_loops_without_overlap_checks") {
        return;
    }
    let optimized = optimized_host_ir("sample-project/kernels/stencil.mlir");
    assert!(
        optimized.contains("llvm.loop.parallel_accesses"),
        "{optimized}"
    );
    assert!(
        optimized.contains("vector.body"),
        "the thread loop vectorized"
    );
    assert!(
        !optimized.contains("vector.memcheck") && !optimized.contains("found.conflict"),
        "a run-time overlap check is left: {optimized}"
    );
}

/// A thread loop left at its guard runs as many threads as the guard lets through: the tree
/// reduction's steps run 128, 64, ..., 1 threads, and a vector body interleaved four times
/// (64 threads an iteration with AVX-512) left the 32- and 16-thread steps to scalar code. Each
/// vector body adds one vector an iteration.
#[test]
fn host_loops_left_at_their_guard_are_not_interleaved() {
    if !dumping("host_loops_left_at_their_guard_are_not_interleaved") {
        return;
    }
    let optimized = optimized_host_ir("sample-project/kernels/reduce.mlir");
    // The IR's basic blocks: a label line starts each, after a function's first.
    let mut vector_bodies = 0;
    for block in optimized.split("\n\n") {
        let label = block.lines().next().unwrap_or_default();
        if !label.starts_with("vector.body") {
            continue;
        }
        vector_bodies += 1;
        let adds = block.matches(" = fadd <").count();
        assert!(
            adds <= 1,
            "{adds} vector adds in one iteration of:\n{block}"
        );
    }
    assert!(
        vector_bodies > 0,
        "the reduction's steps vectorized: {optimized}"
    );
}

/// A thread loop whose body branches on a value the same for every thread runs as one copy per
/// side, chosen before the loop: the tiled matmul's region after its second barrier loads the
/// next tiles only while `t + 1 < tiles`, and vectorized with that test inside it ran every
/// load and store of the tiles masked (54 masked loads and stores in its IR; microcoded on
/// AMD's Zen, where the matmul spent most of its time in them).
#[test]
fn host_thread_loops_branching_on_a_uniform_value_vectorize_without_masks() {
    if !dumping("host_thread_loops_branching_on_a_uniform_value_vectorize_without_masks") {
        return;
    }
    let optimized = optimized_host_ir("sample-project/kernels/matmul.mlir");
    assert!(
        optimized.contains("vector.body"),
        "the thread loops vectorized: {optimized}"
    );
    for masked in ["@llvm.masked.load", "@llvm.masked.store"] {
        assert!(
            !optimized.contains(masked),
            "a thread loop still runs {masked}: {optimized}"
        );
    }
}

/// The optimized LLVM IR of the host object of `kernel` (relative to the workspace), in a process
/// that dumps.
fn optimized_host_ir(kernel: &str) -> String {
    let dir = tempfile::tempdir().unwrap();
    let report = build_in(dir.path())
        .kernel(workspace().join(kernel))
        .target(gpu_build::Vendor::Host, &[])
        .compile()
        .unwrap_or_else(|e| panic!("{e}"));
    let object = dir.path().join(&report.manifest.modules[0].objects[0].path);
    std::fs::read_to_string(object.with_extension("opt.ll")).unwrap()
}

fn gfx90a_opt(dir: &std::path::Path) -> String {
    std::fs::read_to_string(dir.join("gfx90a.opt.ll")).unwrap()
}
