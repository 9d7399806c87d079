//! Compile-time benchmark against the peer: the sample kernels for sm_80, sm_90, gfx90a and
//! gfx1100 (PTX, cubin, hsaco) through gpu-build, and the same work through upstream's
//! `mlir-opt-22 --gpu-module-to-binary`, in one run. Prints wall and CPU times, their ratios,
//! peak memory, and where gpu-build's time goes.
//!
//!     cargo bench -p gpu-build --bench compile_vs_mlir_opt
//!
//! gpu-build runs cold (no object cache) with all files in one process, cold with one process
//! per file (how a peer is driven), from a warm object cache (a new `OUT_DIR`, as a release build
//! after a debug build), and with nothing changed (the same `OUT_DIR`: a Rust-only edit).
//! Upstream cannot lower one module for both vendors, so it gets one process per file and vendor,
//! each with that vendor's two targets, and a ROCm-shaped directory (it cannot use Debian's
//! layout). Peak memory: ours is this process's maximum resident set; upstream's the largest of
//! its processes. CPU time is user + system, children included.

use gpu_build::{Build, CacheSetting, Report, Vendor};
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

/// A build of `files` into `out`; the report and the wall time.
fn ours(out: &Path, files: &[PathBuf], cache: CacheSetting) -> (Duration, Report) {
    let start = Instant::now();
    let mut build = Build::new();
    build
        .out_dir(out)
        .quiet(true)
        .cache(cache)
        .target(Vendor::Nvptx, &NVPTX_CHIPS)
        .target(Vendor::Amdgpu, &AMDGPU_CHIPS);
    for kernel in files {
        build.kernel(kernel);
    }
    let report = build
        .compile()
        .unwrap_or_else(|e| panic!("gpu-build failed: {e}"));
    let elapsed = start.elapsed();
    assert_eq!(
        report.manifest.objects().count(),
        6 * files.len(),
        "PTX + cubin per sm and hsaco per gfx, per module"
    );
    (elapsed, report)
}

/// Set in a child of this benchmark: the one kernel file it builds (cold), and where.
const CHILD_FILE: &str = "GPU_BUILD_BENCH_CHILD_FILE";
const CHILD_OUT: &str = "GPU_BUILD_BENCH_CHILD_OUT";

/// gpu-build with one process per file, as a peer is driven: this benchmark again, once per file.
fn ours_per_file(dir: &Path) -> Duration {
    let start = Instant::now();
    for (index, file) in kernels().iter().enumerate() {
        let status = Command::new(std::env::current_exe().unwrap())
            .env(CHILD_FILE, file)
            .env(CHILD_OUT, dir.join(format!("file{index}")))
            .status()
            .unwrap();
        assert!(status.success(), "the per-file build of {}", file.display());
    }
    start.elapsed()
}

/// User + system time of this process and its waited-for children.
fn cpu_time() -> Duration {
    let usage = |who| {
        let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
        // SAFETY: getrusage writes the struct.
        let usage = unsafe {
            libc::getrusage(who, usage.as_mut_ptr());
            usage.assume_init()
        };
        let time = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
        time(usage.ru_utime) + time(usage.ru_stime)
    };
    usage(libc::RUSAGE_SELF) + usage(libc::RUSAGE_CHILDREN)
}

/// Runs `work` `ROUNDS` times; the median wall time and median CPU time.
fn measure(mut work: impl FnMut(usize) -> Duration) -> (Duration, Duration) {
    let (mut walls, mut cpus) = (Vec::new(), Vec::new());
    for round in 0..ROUNDS {
        let cpu = cpu_time();
        walls.push(work(round));
        cpus.push(cpu_time() - cpu);
    }
    (median(walls), median(cpus))
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
        Vendor::Host | Vendor::Vulkan | Vendor::OpenCl => {
            unreachable!("only the LLVM GPU vendors are compared with mlir-opt")
        }
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
        Vendor::Host | Vendor::Vulkan | Vendor::OpenCl => {
            unreachable!("only the LLVM GPU vendors are compared with mlir-opt")
        }
    };
    let start = Instant::now();
    let mut peak = 0;
    for (input, vendor) in inputs {
        let pipeline = format!(
            "builtin.module(gpu.module(expand-strided-metadata,lower-affine,convert-scf-to-cf,{},reconcile-unrealized-casts),gpu-module-to-binary{{format=bin}})",
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
    if let (Some(file), Some(out)) = (std::env::var_os(CHILD_FILE), std::env::var_os(CHILD_OUT)) {
        ours(Path::new(&out), &[PathBuf::from(file)], CacheSetting::Off);
        return;
    }
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
    // Both tools are told where the toolkits are (upstream cannot find the CUDA wheel or
    // Debian's ROCm layout by itself). Without CUDA_ROOT, gpu-build asks Python where the wheel
    // is: 60-110 ms more per build.
    // Set before any other thread runs.
    std::env::set_var("CUDA_ROOT", &cuda);
    std::env::set_var("ROCM_PATH", &rocm);
    let inputs: Vec<(PathBuf, Vendor)> = kernels()
        .iter()
        .flat_map(|k| {
            [Vendor::Nvptx, Vendor::Amdgpu].map(|v| (single_vendor_copy(k, v, scratch.path()), v))
        })
        .collect();
    let files = kernels();
    let dir = |name: String| scratch.path().join(name);

    ours(&dir("warm-up".into()), &files, CacheSetting::Off);
    let mut stages = Vec::new();
    let cold = measure(|round| {
        let (time, report) = ours(&dir(format!("cold{round}")), &files, CacheSetting::Off);
        stages.push(report.timings);
        time
    });
    let per_file = measure(|round| ours_per_file(&dir(format!("per-file{round}"))));
    // A warm cache, each round into a new OUT_DIR.
    let cache = CacheSetting::At(dir("cache".into()));
    ours(&dir("fill".into()), &files, cache.clone());
    let warm = measure(|round| {
        let (time, report) = ours(&dir(format!("warm{round}")), &files, cache.clone());
        assert_eq!(report.compiled, 0, "everything comes from the cache");
        time
    });
    // Again into the last directory: nothing changed, so the outputs are reused (what a
    // Rust-only edit costs the build script).
    let last = dir(format!("cold{}", ROUNDS - 1));
    let reused = measure(|_| ours(&last, &files, CacheSetting::Off).0);
    let our_peak = peak_rss_kib();
    let mut their_peak = 0;
    let theirs = measure(|_| {
        let (time, peak) = upstream(&inputs, &cuda, &rocm);
        their_peak = their_peak.max(peak);
        time
    });

    println!(
        "4 sample kernels x (sm_80, sm_90, gfx90a, gfx1100): 24 objects, median of {ROUNDS} runs, {} cores",
        std::thread::available_parallelism().map_or(1, |n| n.get())
    );
    println!(
        "{:<40} {:>10} {:>10} {:>9} {:>9}",
        "", "wall", "CPU", "wall/mlir", "CPU/mlir"
    );
    let row = |name: &str, (wall, cpu): (Duration, Duration)| {
        println!(
            "{name:<40} {:>8.1}ms {:>8.1}ms {:>8.2}x {:>8.2}x",
            wall.as_secs_f64() * 1e3,
            cpu.as_secs_f64() * 1e3,
            wall.as_secs_f64() / theirs.0.as_secs_f64(),
            cpu.as_secs_f64() / theirs.1.as_secs_f64()
        );
    };
    row("gpu-build cold, one process", cold);
    row("gpu-build cold, one process per file", per_file);
    row("gpu-build, warm object cache", warm);
    row("gpu-build, nothing changed", reused);
    row("mlir-opt-22 (8 processes)", theirs);
    println!(
        "peak memory: gpu-build {} MiB (one process), mlir-opt-22 {} MiB (largest process)",
        our_peak / 1024,
        their_peak / 1024
    );

    // Where a cold build's time goes (summed over threads; median round by total).
    stages.sort_by_key(|s| s.total());
    let stages = &stages[stages.len() / 2];
    let total = stages.total().as_secs_f64();
    println!("\ngpu-build cold, time per stage (all threads):");
    for (stage, time) in stages.iter() {
        println!(
            "  {:<16} {:>8.1}ms {:>5.1}%{}",
            stage.name(),
            time.as_secs_f64() * 1e3,
            100.0 * time.as_secs_f64() / total,
            if stage.is_floor() { "  (floor)" } else { "" }
        );
    }
    // Against the whole CPU time of the cold build: everything outside the floor is ours.
    let (floor, cpu) = (stages.floor().as_secs_f64(), cold.1.as_secs_f64());
    println!(
        "floor (LLVM optimize + codegen, ptxas, ld.lld): {:.1}% of the cold build's CPU time; \
         gpu-build's own pipeline (parse, lower, link, outputs, set-up): {:.1}%",
        100.0 * floor / cpu,
        100.0 * (cpu - floor).max(0.0) / cpu
    );
}
