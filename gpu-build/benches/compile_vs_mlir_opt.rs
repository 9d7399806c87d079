//! Compile-time benchmark against the peer: the sample kernels for sm_80, sm_90, gfx90a and
//! gfx1100 (PTX, cubin, hsaco) through gpu-build, and the same work through upstream's
//! `mlir-opt-22 --gpu-module-to-binary`, in one run. Prints wall times, their ratio and peak memory.
//!
//!     cargo bench -p gpu-build --bench compile_vs_mlir_opt
//!
//! Upstream cannot lower one module for both vendors, so it gets one process per file and vendor,
//! each with that vendor's two targets, and a ROCm-shaped directory (it cannot use Debian's
//! layout). Peak memory: ours is this process's maximum resident set; upstream's the largest of
//! its processes.

use gpu_build::{Build, Vendor};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

const ROUNDS: usize = 5;
const NVPTX_CHIPS: [&str; 2] = ["sm_80", "sm_90"];
const AMDGPU_CHIPS: [&str; 2] = ["gfx90a", "gfx1100"];

fn kernels() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../sample-project/kernels");
    ["vadd", "saxpy", "reduce", "math"]
        .iter()
        .map(|k| dir.join(format!("{k}.mlir")))
        .collect()
}

fn ours(out: &Path) -> Duration {
    let start = Instant::now();
    let mut build = Build::new();
    build
        .out_dir(out)
        .quiet(true)
        .target(Vendor::Nvptx, &NVPTX_CHIPS)
        .target(Vendor::Amdgpu, &AMDGPU_CHIPS);
    for kernel in kernels() {
        build.kernel(kernel);
    }
    let report = build
        .compile()
        .unwrap_or_else(|e| panic!("gpu-build failed: {e}"));
    let elapsed = start.elapsed();
    let objects: usize = report
        .manifest
        .modules
        .iter()
        .map(|m| m.objects.len())
        .sum();
    assert_eq!(
        objects, 24,
        "PTX + cubin per sm and hsaco per gfx, for four modules"
    );
    elapsed
}

/// The sample file with its target list replaced by one vendor's targets.
fn single_vendor_copy(kernel: &Path, vendor: Vendor, dir: &Path) -> PathBuf {
    let text = std::fs::read_to_string(kernel).unwrap();
    let targets: Vec<String> = match vendor {
        Vendor::Nvptx => NVPTX_CHIPS
            .iter()
            .map(|c| format!("#nvvm.target<chip = \"{c}\">"))
            .collect(),
        Vendor::Amdgpu => AMDGPU_CHIPS
            .iter()
            .map(|c| format!("#rocdl.target<chip = \"{c}\", abi = \"500\">"))
            .collect(),
        Vendor::Host => unreachable!("only the GPU vendors are compared with mlir-opt"),
    };
    let original = "[#nvvm.target<chip = \"sm_80\">, #rocdl.target<chip = \"gfx90a\">]";
    assert!(
        text.contains(original),
        "{} changed its target list",
        kernel.display()
    );
    let path = dir.join(format!(
        "{}-{vendor}.mlir",
        kernel.file_stem().unwrap().to_string_lossy()
    ));
    std::fs::write(
        &path,
        text.replace(original, &format!("[{}]", targets.join(", "))),
    )
    .unwrap();
    path
}

/// Runs one process and returns its peak resident set in KiB.
#[allow(
    clippy::zombie_processes,
    reason = "reaped by wait4, which also reports its memory"
)]
fn run_measured(command: &mut Command) -> u64 {
    let child = command
        .spawn()
        .expect("mlir-opt-22 starts (install mlir-22-tools)");
    let mut status = 0;
    let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: waiting for our own child; `usage` is written by the kernel.
    let pid = unsafe { libc::wait4(child.id() as i32, &mut status, 0, usage.as_mut_ptr()) };
    assert!(
        pid > 0 && libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "mlir-opt-22 failed: {command:?}"
    );
    // SAFETY: initialized by a successful wait4.
    unsafe { usage.assume_init() }.ru_maxrss as u64
}

fn upstream(inputs: &[(PathBuf, Vendor)], cuda: &Path, rocm: &Path) -> (Duration, u64) {
    let lowering = |vendor| match vendor {
        Vendor::Nvptx => "convert-gpu-to-nvvm",
        Vendor::Amdgpu => "convert-gpu-to-rocdl{chipset=gfx90a}",
        Vendor::Host => unreachable!("only the GPU vendors are compared with mlir-opt"),
    };
    let start = Instant::now();
    let mut peak = 0;
    for (input, vendor) in inputs {
        let pipeline = format!(
            "builtin.module(gpu.module(lower-affine,expand-strided-metadata,convert-scf-to-cf,{},reconcile-unrealized-casts),gpu-module-to-binary{{format=bin}})",
            lowering(*vendor)
        );
        let mut command = Command::new("mlir-opt-22");
        command
            .arg(format!("--pass-pipeline={pipeline}"))
            .arg(input)
            .arg("-o")
            .arg("/dev/null")
            .env("CUDA_ROOT", cuda)
            .env("ROCM_PATH", rocm);
        peak = peak.max(run_measured(&mut command));
    }
    (start.elapsed(), peak)
}

fn peak_rss_kib() -> u64 {
    let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: getrusage writes the struct.
    unsafe {
        libc::getrusage(libc::RUSAGE_SELF, usage.as_mut_ptr());
        usage.assume_init().ru_maxrss as u64
    }
}

fn median(mut times: Vec<Duration>) -> Duration {
    times.sort();
    times[times.len() / 2]
}

fn main() {
    let scratch = tempfile::tempdir().unwrap();
    let cuda = Command::new("python3")
        .args([
            "-c",
            "import nvidia.cuda_nvcc as m; print(list(m.__path__)[0])",
        ])
        .output()
        .map(|o| PathBuf::from(String::from_utf8_lossy(&o.stdout).trim()))
        .expect("the CUDA wheel (scripts/setup.sh installs it)");
    // A ROCm-shaped directory over Debian's packages, which upstream cannot find by itself.
    let rocm = scratch.path().join("rocm");
    std::fs::create_dir_all(rocm.join("amdgcn")).unwrap();
    std::fs::create_dir_all(rocm.join("llvm/bin")).unwrap();
    let multiarch = format!("{}-linux-gnu", std::env::consts::ARCH);
    std::os::unix::fs::symlink(
        format!("/usr/lib/{multiarch}/amdgcn/bitcode"),
        rocm.join("amdgcn/bitcode"),
    )
    .unwrap();
    std::os::unix::fs::symlink("/usr/bin/ld.lld-22", rocm.join("llvm/bin/ld.lld")).unwrap();
    let inputs: Vec<(PathBuf, Vendor)> = kernels()
        .iter()
        .flat_map(|k| Vendor::GPUS.map(|v| (single_vendor_copy(k, v, scratch.path()), v)))
        .collect();

    ours(&scratch.path().join("warm-up"));
    let our_times: Vec<Duration> = (0..ROUNDS)
        .map(|i| ours(&scratch.path().join(format!("out{i}"))))
        .collect();
    // Again into the last directory: nothing changed, so the outputs are reused (what a Rust-only
    // edit costs the build script).
    let last = scratch.path().join(format!("out{}", ROUNDS - 1));
    let reused = median((0..ROUNDS).map(|_| ours(&last)).collect());
    let our_peak = peak_rss_kib();
    let mut their_times = Vec::new();
    let mut their_peak = 0;
    for _ in 0..ROUNDS {
        let (time, peak) = upstream(&inputs, &cuda, &rocm);
        their_times.push(time);
        their_peak = their_peak.max(peak);
    }
    let (ours, theirs) = (median(our_times), median(their_times));
    println!(
        "4 sample kernels x (sm_80, sm_90, gfx90a, gfx1100): 24 objects, median of {ROUNDS} runs"
    );
    println!("{:<34} {:>10} {:>14}", "", "wall", "peak memory");
    println!(
        "{:<34} {:>8.0}ms {:>11} MiB",
        "gpu-build (one process)",
        ours.as_secs_f64() * 1e3,
        our_peak / 1024
    );
    println!(
        "{:<34} {:>8.1}ms",
        "gpu-build, nothing changed",
        reused.as_secs_f64() * 1e3
    );
    println!(
        "{:<34} {:>8.0}ms {:>11} MiB",
        "mlir-opt-22 (8 processes)",
        theirs.as_secs_f64() * 1e3,
        their_peak / 1024
    );
    println!(
        "ratio gpu-build / mlir-opt-22: {:.2}x",
        ours.as_secs_f64() / theirs.as_secs_f64()
    );
}
