//! `gpu-build run`: whole MLIR programs executed on the host device with our compiler and
//! runtime, their output checked by their own `CHECK` lines with `FileCheck-22` (Debian's
//! `llvm-22-tools`). The programs: MLIR 22.1.8's own GPU integration tests (unpacked by
//! `scripts/setup.sh` from Debian's LLVM source) and ours in `tests/programs/`. The same
//! programs on a GPU run with `--ignored` (`scripts/gpu-tests.sh`). Upstream's `GPU/Vulkan`
//! tests run on the first Vulkan device (Mesa's lavapipe on any machine) under the Khronos
//! validation layer, and the host's (SYCL and LevelZero ones among them) on
//! the first OpenCL device that takes SPIR-V (Intel's CPU Runtime for OpenCL on any x86-64
//! machine), in every `cargo test`.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub(crate) const CORPUS: &str = "/opt/gpu-build/mlir-integration-tests/GPU";

/// Upstream's integration tests whose output our host run matches (every CHECK line).
pub(crate) const UPSTREAM_ON_THE_HOST: &[&str] = &[
    "CUDA/all-reduce-and.mlir",
    "CUDA/all-reduce-maxsi.mlir",
    "CUDA/all-reduce-minsi.mlir",
    "CUDA/all-reduce-op.mlir",
    "CUDA/all-reduce-or.mlir",
    "CUDA/all-reduce-region.mlir",
    "CUDA/all-reduce-xor.mlir",
    "CUDA/alloc-host-shared.mlir",
    "CUDA/assert.mlir",
    "CUDA/async.mlir",
    "CUDA/gpu-to-cubin.mlir",
    "CUDA/multiple-all-reduce.mlir",
    "CUDA/printf.mlir",
    "CUDA/shuffle.mlir",
    "CUDA/two-modules.mlir",
    "CUDA/TensorCore/wmma-matmul-f16.mlir",
    "CUDA/TensorCore/wmma-matmul-f32.mlir",
    "CUDA/TensorCore/wmma-matmul-f32-bare-ptr.mlir",
    "CUDA/TensorCore/sm80/wmma-matmul-f64.mlir",
    "ROCM/gpu-to-hsaco.mlir",
    "ROCM/printf.mlir",
    "ROCM/two-modules.mlir",
    "ROCM/vecadd.mlir",
    "SYCL/gpu-addf32-to-spirv.mlir",
    "SYCL/gpu-addi64-to-spirv.mlir",
    "SYCL/gpu-memcpy-addf32-to-spirv.mlir",
    "SYCL/gpu-reluf32-to-spirv.mlir",
    "LevelZero/gpu-addf32-to-spirv.mlir",
    "LevelZero/gpu-addi64-to-spirv.mlir",
    "LevelZero/gpu-memcpy-addf32-to-spirv.mlir",
    "LevelZero/gpu-reluf32-to-spirv.mlir",
    "SPIRV/double.mlir",
    "SPIRV/simple_add.mlir",
];

/// Upstream's `GPU/Vulkan` tests whose output `gpu-build run --device vulkan` matches (every
/// CHECK line), under the validation layer, any message of which fails the run. Those whose
/// RUN lines run twice (`-test-vulkan-runner-pipeline` with and without
/// `spirv-webgpu-prepare`) run once: our pipeline has no WebGPU variant, and both runs check
/// the same lines.
const UPSTREAM_ON_VULKAN: &[&str] = &[
    "addf.mlir",
    "addf_if.mlir",
    "addi.mlir",
    "addi8.mlir",
    "addui_extended.mlir",
    "mulf.mlir",
    "smul_extended.mlir",
    "subf.mlir",
    "time.mlir",
    "umul_extended.mlir",
    "vector-deinterleave.mlir",
    "vector-interleave.mlir",
    "vector-shuffle.mlir",
];

/// Upstream's `GPU/Vulkan` tests that do not pass yet, each with the reason. A corpus file is
/// in exactly one of the two lists (checked), so neither can shrink silently.
const NOT_YET_ON_VULKAN: &[(&str, &str)] = &[];

/// Upstream's tests from the other folders that pass on Vulkan too: CUDA's and ROCM's programs
/// written for no particular block size (the workgroup size is specialization constants set at
/// launch, `targets/vulkan/workgroup_size.rs`), CUDA's block reductions (`gpu.all_reduce` through
/// workgroup memory, `targets/support/all_reduce.rs`; `all-reduce-op`'s 3-D dynamic memref with its
/// sizes as hidden arguments, `targets/support/memref_sizes.rs`), ROCM's `vecadd` (host memory
/// registered, its "device view" the host memory the launch stages), the `printf` and `assert`
/// programs (a log buffer the runtime reads, `targets/vulkan/log.rs`), `shuffle` (its width-13
/// shuffle through workgroup memory on lavapipe's 8-wide subgroups, its branches structured,
/// `targets/support/{shuffle,structured}.rs`), the four WMMA programs (each thread holds whole
/// fragments, `targets/support/mma.rs`), SYCL's and LevelZero's four each and the SPIR-V CPU
/// runner's two programs (its `fillI32Buffer` / `fillF32Buffer*D` helpers).
const OTHER_UPSTREAM_ON_VULKAN: &[&str] = &[
    "CUDA/all-reduce-and.mlir",
    "CUDA/all-reduce-maxsi.mlir",
    "CUDA/all-reduce-minsi.mlir",
    "CUDA/all-reduce-op.mlir",
    "CUDA/all-reduce-or.mlir",
    "CUDA/all-reduce-region.mlir",
    "CUDA/all-reduce-xor.mlir",
    "CUDA/assert.mlir",
    "CUDA/async.mlir",
    "CUDA/gpu-to-cubin.mlir",
    "CUDA/multiple-all-reduce.mlir",
    "CUDA/printf.mlir",
    "CUDA/shuffle.mlir",
    "CUDA/two-modules.mlir",
    "CUDA/TensorCore/wmma-matmul-f16.mlir",
    "CUDA/TensorCore/wmma-matmul-f32.mlir",
    "CUDA/TensorCore/wmma-matmul-f32-bare-ptr.mlir",
    "CUDA/TensorCore/sm80/wmma-matmul-f64.mlir",
    "ROCM/gpu-to-hsaco.mlir",
    "ROCM/printf.mlir",
    "ROCM/two-modules.mlir",
    "ROCM/vecadd.mlir",
    "SYCL/gpu-addf32-to-spirv.mlir",
    "SYCL/gpu-addi64-to-spirv.mlir",
    "SYCL/gpu-memcpy-addf32-to-spirv.mlir",
    "SYCL/gpu-reluf32-to-spirv.mlir",
    "LevelZero/gpu-addf32-to-spirv.mlir",
    "LevelZero/gpu-addi64-to-spirv.mlir",
    "LevelZero/gpu-memcpy-addf32-to-spirv.mlir",
    "LevelZero/gpu-reluf32-to-spirv.mlir",
    "SPIRV/double.mlir",
    "SPIRV/simple_add.mlir",
];

/// Why the OpenCL tests cannot run here (no loader, no device that takes SPIR-V), or `None`.
fn no_opencl_device() -> Option<String> {
    let found = gpu_embed::Device::gpus().ok().is_some_and(|devices| {
        devices
            .iter()
            .any(|d| d.vendor() == gpu_embed::Vendor::OpenCl)
    });
    (!found).then(|| {
        format!(
            "no OpenCL device that takes SPIR-V (scripts/setup.sh installs Intel's CPU runtime): {}",
            gpu_embed::Device::discovery_report().join("; ")
        )
    })
}

/// What every Vulkan run gets: the validation layer, and the launch times upstream's Vulkan
/// runtime prints after every dispatch (which `time.mlir` checks).
const VULKAN_ENV: &[(&str, &str)] = &[
    ("GPU_EMBED_VULKAN_VALIDATION", "1"),
    ("GPU_MGPU_LAUNCH_TIMES", "1"),
];

/// Why these tests cannot run on Vulkan here (no loader, no device), or `None`.
fn no_vulkan_device() -> Option<String> {
    match gpu_embed::Device::gpus() {
        Ok(devices)
            if devices
                .iter()
                .any(|d| d.vendor() == gpu_embed::Vendor::Vulkan) =>
        {
            None
        }
        Ok(_) => Some("no Vulkan device (install Mesa's lavapipe: scripts/setup.sh)".into()),
        Err(error) => Some(format!("no Vulkan device: {}", error.message())),
    }
}

pub(crate) fn corpus() -> PathBuf {
    let corpus = PathBuf::from(CORPUS);
    assert!(
        corpus.join("CUDA").is_dir(),
        "{CORPUS} is missing: run scripts/setup.sh (it unpacks MLIR's GPU integration tests)"
    );
    corpus
}

fn run(program: &Path, device: &str) -> Output {
    run_with(program, device, &[])
}

fn run_with(program: &Path, device: &str, env: &[(&str, &str)]) -> Output {
    run_with_args(program, &["--device", device], env)
}

/// `gpu-build run ARGS PROGRAM`.
pub(crate) fn run_with_args(program: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_gpu-build"))
        .arg("run")
        .args(args)
        .arg(program)
        .env_remove("GPU_MGPU_DEVICE")
        .env_remove("GPU_MGPU_LAUNCH_TIMES")
        .envs(env.iter().copied())
        .output()
        .expect("gpu-build runs")
}

/// Runs `program` on `device` and checks its output with its CHECK lines.
fn run_and_check(program: &Path, device: &str) -> Result<(), String> {
    run_and_check_with(program, device, &[])
}

fn run_and_check_with(program: &Path, device: &str, env: &[(&str, &str)]) -> Result<(), String> {
    run_and_check_args(program, &["--device", device], env)
}

/// Runs `gpu-build run ARGS PROGRAM` and checks its output with the program's CHECK lines.
pub(crate) fn run_and_check_args(
    program: &Path,
    args: &[&str],
    env: &[(&str, &str)],
) -> Result<(), String> {
    let output = run_with_args(program, args, env);
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    if !output.status.success() {
        return Err(format!(
            "{}: gpu-build run failed ({}):\n{stderr}",
            program.display(),
            output.status
        ));
    }
    // Every program checked here, upstream's shuffles and all-reduces included, runs its
    // kernels as thread loops on the host: none may fall back to a coroutine per thread.
    if let Some(warning) = stderr
        .lines()
        .find(|line| line.contains("runs one coroutine per GPU thread"))
    {
        return Err(format!("{}: {warning}", program.display()));
    }
    // A program whose RUN line checks stderr too (`2>&1`: assertion reports) gets both.
    let run_lines = std::fs::read_to_string(program).unwrap_or_default();
    let checked = if run_lines
        .lines()
        .any(|l| l.starts_with("// RUN:") && l.contains("2>&1"))
    {
        format!("{stdout}{stderr}")
    } else {
        stdout.into_owned()
    };
    file_check(program, &checked).map_err(|why| format!("{why}\nstderr:\n{stderr}"))
}

fn file_check(program: &Path, output: &str) -> Result<(), String> {
    use std::io::Write;
    let mut child = Command::new("FileCheck-22")
        .arg(program)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("FileCheck-22 runs (scripts/setup.sh installs llvm-22-tools)");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(output.as_bytes())
        .unwrap();
    let result = child.wait_with_output().unwrap();
    if result.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{}: FileCheck failed:\n{}\noutput:\n{output}",
            program.display(),
            String::from_utf8_lossy(&result.stderr)
        ))
    }
}

#[test]
fn upstream_gpu_integration_tests_pass_on_the_host() {
    let corpus = corpus();
    let failures: Vec<String> = UPSTREAM_ON_THE_HOST
        .iter()
        .filter_map(|program| run_and_check(&corpus.join(program), "host").err())
        .collect();
    assert!(
        failures.is_empty(),
        "{} of {} failed:\n{}",
        failures.len(),
        UPSTREAM_ON_THE_HOST.len(),
        failures.join("\n\n")
    );
}

#[test]
fn our_programs_pass_on_the_host() {
    let programs = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/programs");
    for program in ["streams.mlir", "shared_memory.mlir", "host_memory.mlir"] {
        run_and_check(&programs.join(program), "host").unwrap_or_else(|why| panic!("{why}"));
    }
}

#[test]
fn upstream_vulkan_integration_tests_pass_on_vulkan() {
    let corpus = corpus();
    if let Some(why) = no_vulkan_device() {
        eprintln!("skipped: upstream's Vulkan tests need a Vulkan device: {why}");
        return;
    }
    let programs: Vec<PathBuf> = UPSTREAM_ON_VULKAN
        .iter()
        .map(|name| corpus.join("Vulkan").join(name))
        .chain(
            OTHER_UPSTREAM_ON_VULKAN
                .iter()
                .map(|name| corpus.join(name)),
        )
        .collect();
    let failures: Vec<String> = programs
        .iter()
        .filter_map(|program| run_and_check_with(program, "vulkan", VULKAN_ENV).err())
        .collect();
    assert!(
        failures.is_empty(),
        "{} of {} failed:\n{}",
        failures.len(),
        programs.len(),
        failures.join("\n\n")
    );
    println!(
        "on Vulkan: Vulkan {}/{}, {}",
        UPSTREAM_ON_VULKAN.len(),
        UPSTREAM_ON_VULKAN.len() + NOT_YET_ON_VULKAN.len(),
        per_folder(OTHER_UPSTREAM_ON_VULKAN)
    );
}

/// How many of `passing` each folder has, against the host's count: `CUDA 11 (host 19), …`.
fn per_folder(passing: &[&str]) -> String {
    let count = |list: &[&str], folder: &str| {
        list.iter()
            .filter(|p| p.starts_with(&format!("{folder}/")))
            .count()
    };
    ["CUDA", "ROCM", "SYCL", "LevelZero", "SPIRV"]
        .iter()
        .map(|folder| {
            format!(
                "{folder} {} (host {})",
                count(passing, folder),
                count(UPSTREAM_ON_THE_HOST, folder)
            )
        })
        .collect::<Vec<_>>()
        .join(", ")
}

#[test]
fn every_upstream_vulkan_test_is_listed_once() {
    let corpus = corpus().join("Vulkan");
    let mut files: Vec<String> = std::fs::read_dir(&corpus)
        .unwrap_or_else(|e| panic!("{}: {e}", corpus.display()))
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".mlir"))
        .collect();
    files.sort();
    let mut listed: Vec<String> = UPSTREAM_ON_VULKAN
        .iter()
        .map(|name| name.to_string())
        .chain(NOT_YET_ON_VULKAN.iter().map(|(name, _)| name.to_string()))
        .collect();
    listed.sort();
    assert_eq!(
        files,
        listed,
        "every {} test must be in UPSTREAM_ON_VULKAN or, with its reason, in NOT_YET_ON_VULKAN \
         (exactly once)",
        corpus.display()
    );
    for (name, why) in NOT_YET_ON_VULKAN {
        assert!(
            !why.trim().is_empty(),
            "{name}: say why it does not pass yet"
        );
    }
}

/// Every upstream program the host runs passes on an OpenCL device that takes SPIR-V too: the
/// SYCL and LevelZero ones, and those that need what MLIR 22's OpenCL lowering lacks, which
/// the opencl target supplies (`gpu.all_reduce` through workgroup memory,
/// `targets/support/all_reduce.rs`; `all-reduce-op`'s 3-D dynamic memref's sizes at launch,
/// `targets/support/memref_sizes.rs`; `shuffle`'s branches structured and its shuffles at any
/// width, `targets/support/{structured,shuffle}.rs`; `assert`'s report printed through OpenCL's
/// printf, `targets/opencl/assert.rs`; the WMMA programs' fragments held per thread,
/// `targets/support/mma.rs`).
#[test]
fn upstream_integration_tests_pass_on_opencl() {
    if let Some(why) = no_opencl_device() {
        eprintln!("skipped: {why}");
        return;
    }
    let corpus = corpus();
    let failures: Vec<String> = UPSTREAM_ON_THE_HOST
        .iter()
        .filter_map(|program| run_and_check(&corpus.join(program), "opencl").err())
        .collect();
    assert!(
        failures.is_empty(),
        "{} of {} failed on OpenCL:\n{}",
        failures.len(),
        UPSTREAM_ON_THE_HOST.len(),
        failures.join("\n\n")
    );
    println!("on OpenCL: {}", per_folder(UPSTREAM_ON_THE_HOST));
}

#[test]
fn our_programs_pass_on_vulkan() {
    if let Some(why) = no_vulkan_device() {
        eprintln!("skipped: {why}");
        return;
    }
    let programs = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/programs");
    run_and_check_with(&programs.join("host_memory.mlir"), "vulkan", VULKAN_ENV)
        .unwrap_or_else(|why| panic!("{why}"));
}

#[test]
fn a_validation_message_fails_the_run() {
    // The layer's best-practice checks comment on ordinary code: with them on, the run must
    // print what the layer said and fail, so the passing runs' silence means something.
    if let Some(why) = no_vulkan_device() {
        eprintln!("skipped: {why}");
        return;
    }
    let program = corpus().join("Vulkan/addf.mlir");
    let mut env = VULKAN_ENV.to_vec();
    env.push((
        "VK_LAYER_ENABLES",
        "VK_VALIDATION_FEATURE_ENABLE_BEST_PRACTICES_EXT",
    ));
    let output = run_with(&program, "vulkan", &env);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{stderr}");
    assert!(
        stderr.contains("Vulkan validation warning: ")
            && stderr.contains("the Vulkan validation layer reported"),
        "{stderr}"
    );
}

#[test]
fn partly_overlapping_host_views_are_refused_on_vulkan() {
    // Staged one by one, the second copy back would undo the first's writes: refused, said.
    if let Some(why) = no_vulkan_device() {
        eprintln!("skipped: {why}");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let program = dir.path().join("overlap.mlir");
    std::fs::write(&program, OVERLAPPING_VIEWS).unwrap();
    let output = run_with(&program, "vulkan", VULKAN_ENV);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains(
            "'mgpuLaunchKernel' failed: kernel `copy`: the memref bound at binding 1 \
             overlaps another argument's host memory"
        ),
        "{stderr}"
    );
}

/// Two `memref.view`s 16 bytes apart in one host buffer, passed to one launch.
const OVERLAPPING_VIEWS: &str = r#"module attributes {gpu.container_module} {
  gpu.module @kernels {
    gpu.func @copy(%a: memref<8xi32>, %b: memref<8xi32>) kernel
        attributes {known_block_size = array<i32: 8, 1, 1>} {
      %t = gpu.thread_id x
      %v = memref.load %a[%t] : memref<8xi32>
      memref.store %v, %b[%t] : memref<8xi32>
      gpu.return
    }
  }
  func.func @main() {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c8 = arith.constant 8 : index
    %c16 = arith.constant 16 : index
    %buffer = memref.alloc() : memref<64xi8>
    %a = memref.view %buffer[%c0][] : memref<64xi8> to memref<8xi32>
    %b = memref.view %buffer[%c16][] : memref<64xi8> to memref<8xi32>
    gpu.launch_func @kernels::@copy blocks in (%c1, %c1, %c1) threads in (%c8, %c1, %c1)
        args(%a : memref<8xi32>, %b : memref<8xi32>)
    return
  }
}
"#;

#[test]
fn emit_mlir_is_refused_for_vulkan_and_opencl() {
    let dir = tempfile::tempdir().unwrap();
    let program = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/programs/host_memory.mlir");
    for (device, what) in [
        ("vulkan", "a Vulkan device"),
        ("opencl", "an OpenCL device"),
    ] {
        let output = Command::new(env!("CARGO_BIN_EXE_gpu-build"))
            .args(["run", "--device", device, "--emit-mlir"])
            .arg(dir.path().join("lowered.mlir"))
            .arg(&program)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success());
        assert!(
            stderr.contains(&format!("--emit-mlir with {what}"))
                || stderr.contains(&format!("--device {device}: no")),
            "{stderr}"
        );
        assert!(!dir.path().join("lowered.mlir").exists());
    }
}

#[test]
fn file_check_catches_a_wrong_result() {
    // The check above could pass vacuously if FileCheck saw no CHECK lines or no output: a
    // wrong value must fail it.
    let program = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/programs/streams.mlir");
    let output = run(&program, "host");
    let right = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(file_check(&program, &right).is_ok());
    let wrong = right.replace("[40,  41,  42,  43]", "[40,  41,  42,  44]");
    assert_ne!(wrong, right, "the output format changed: {right}");
    assert!(file_check(&program, &wrong).is_err());
    assert!(file_check(&program, "").is_err());
}

#[test]
fn a_program_that_does_not_compile_fails_with_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    let program = dir.path().join("bad.mlir");
    std::fs::write(
        &program,
        r#"module attributes {gpu.container_module} {
  gpu.module @kernels {
    gpu.func @k(%x: memref<4xindex>) kernel {
      %c0 = arith.constant 0 : index
      %s = gpu.subgroup_id : index
      memref.store %s, %x[%c0] : memref<4xindex>
      gpu.return
    }
  }
  func.func @main() {
    return
  }
}
"#,
    )
    .unwrap();
    let output = run(&program, "host");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success());
    assert!(
        stderr.contains("compiling the kernels of")
            && stderr.contains("`gpu.subgroup_id` is a nvptx/amdgpu")
            && stderr.contains("operation and cannot be compiled for host"),
        "{stderr}"
    );

    std::fs::write(
        &program,
        "module {\n  func.func @other() {\n    return\n  }\n}\n",
    )
    .unwrap();
    let output = run(&program, "host");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success());
    assert!(stderr.contains("no function `main` to run"), "{stderr}");
}

/// `libgpu_mgpu.so`, next to the test's `gpu-build` (the dev-dependency builds it).
fn libgpu_mgpu() -> PathBuf {
    let dir = Path::new(env!("CARGO_BIN_EXE_gpu-build")).parent().unwrap();
    [dir.join("libgpu_mgpu.so"), dir.join("deps/libgpu_mgpu.so")]
        .into_iter()
        .find(|p| p.is_file())
        .unwrap_or_else(|| {
            panic!(
                "no libgpu_mgpu.so in {}: cargo build -p gpu-mgpu",
                dir.display()
            )
        })
}

#[test]
fn upstreams_mlir_runner_runs_our_lowered_programs_with_libgpu_mgpu() {
    // The cdylib is a drop-in for upstream's runtime wrappers: `gpu-build run --emit-mlir`
    // writes the lowered program (kernels embedded), Debian's mlir-runner-22 runs it.
    let dir = tempfile::tempdir().unwrap();
    let programs = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/programs");
    let corpus = corpus();
    for program in [
        programs.join("streams.mlir"),
        corpus.join("CUDA/all-reduce-region.mlir"),
    ] {
        let lowered = dir.path().join("lowered.mlir");
        let output = Command::new(env!("CARGO_BIN_EXE_gpu-build"))
            .args(["run", "--device", "host", "--emit-mlir"])
            .arg(&lowered)
            .arg(&program)
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        let libraries = [
            libgpu_mgpu(),
            PathBuf::from("/usr/lib/llvm-22/lib/libmlir_runner_utils.so"),
            PathBuf::from("/usr/lib/llvm-22/lib/libmlir_c_runner_utils.so"),
        ];
        let output = Command::new("mlir-runner-22")
            .arg(&lowered)
            .arg("--entry-point-result=void")
            .arg(format!(
                "--shared-libs={}",
                libraries.map(|l| l.display().to_string()).join(",")
            ))
            .env("GPU_MGPU_DEVICE", "host")
            .output()
            .expect("mlir-runner-22 runs (scripts/setup.sh installs mlir-22-tools)");
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(
            output.status.success(),
            "{}: {}",
            program.display(),
            String::from_utf8_lossy(&output.stderr)
        );
        file_check(&program, &stdout).unwrap_or_else(|why| panic!("{why}"));
    }
}

#[test]
#[ignore = "needs a GPU; run scripts/gpu-tests.sh on a GPU machine"]
fn upstream_gpu_integration_tests_pass_on_the_gpu() {
    let corpus = corpus();
    let failures: Vec<String> = UPSTREAM_ON_THE_HOST
        .iter()
        .filter(|program| !program.starts_with("SYCL/") && !program.starts_with("LevelZero/"))
        .filter_map(|program| run_and_check(&corpus.join(program), "default").err())
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
    let programs = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/programs");
    run_and_check(&programs.join("streams.mlir"), "default").unwrap_or_else(|why| panic!("{why}"));
}
