//! Builds in a child process, for the tests that must survive what a build does to its process:
//! being killed (fault injection), aborting or hanging (fuzzing). The child is this test binary
//! again, running the ignored test [`child_process`] with its job in environment variables.

use crate::common::*;
use gpu_build::Vendor;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// Set in the child: what to build. Unset, [`child_process`] does nothing.
const JOB: &str = "GPU_BUILD_TEST_CHILD_JOB";
const OUT: &str = "GPU_BUILD_TEST_CHILD_OUT";
const BASE: &str = "GPU_BUILD_TEST_CHILD_BASE";
const KERNELS: &str = "GPU_BUILD_TEST_CHILD_KERNELS";
/// Set to `1` in the child: the host objects are the checked flavour (`Build::checked`).
pub const CHECKED: &str = "GPU_BUILD_TEST_CHILD_CHECKED";

/// What the child builds.
#[derive(Debug, Clone, Copy)]
pub enum Job {
    /// The sample kernels for sm_80, sm_90, gfx90a, gfx1100 and the host.
    Samples,
    /// Each kernel file for its own NVPTX and AMDGPU targets (else the default chips), the host,
    /// Vulkan and OpenCL: every target family.
    EveryTarget,
    /// Each kernel file for its own target attributes only.
    FileTargets,
}

impl Job {
    fn name(self) -> &'static str {
        match self {
            Job::Samples => "samples",
            Job::EveryTarget => "every-target",
            Job::FileTargets => "file-targets",
        }
    }
}

/// The kernels of `sample-project` (relative to its directory): the base of fault injection and
/// the seeds of fuzzing.
pub fn sample_project_kernels() -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(workspace().join("sample-project/kernels"))
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".mlir"))
        .map(|name| format!("kernels/{name}"))
        .collect();
    names.sort();
    names
}

/// A build in a child process, not yet started.
pub struct ChildBuild {
    command: Command,
}

impl ChildBuild {
    /// Builds `kernels` (relative to `base`) into `out`. Its scratch directories (`TMPDIR`,
    /// `HOME`) and working directory are `outside`, so a test can check nothing was left there.
    pub fn new(job: Job, base: &Path, kernels: &[String], out: &Path, outside: &Path) -> Self {
        let mut command = Command::new(std::env::current_exe().unwrap());
        command
            .args([
                "--exact",
                "child::child_process",
                "--ignored",
                "--nocapture",
            ])
            .args(["--test-threads=1", "-q"])
            .env(JOB, job.name())
            .env(OUT, out)
            .env(BASE, base)
            .env(KERNELS, kernels.join("\n"))
            .env("TMPDIR", outside)
            .env("HOME", outside)
            .current_dir(outside)
            .env_remove("GPU_BUILD_DUMP")
            .env_remove("GPU_BUILD_NVPTX_CHIPS")
            .env_remove("GPU_BUILD_AMDGPU_CHIPS")
            .env_remove("GPU_BUILD_CACHE")
            .env_remove("GPU_BUILD_CACHE_DIR")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        ChildBuild { command }
    }

    /// Sets an environment variable for the child.
    pub fn env(mut self, name: &str, value: &str) -> Self {
        self.command.env(name, value);
        self
    }

    pub fn start(mut self) -> Child {
        self.command.spawn().expect("the test binary starts again")
    }

    /// Runs to the end, or for at most `limit` (then it is killed and `timed_out` is set).
    /// Its output is read while it runs: a child writing more than a pipe holds would otherwise
    /// wait for a reader and look hung.
    pub fn run(self, limit: Duration) -> Outcome {
        let started = Instant::now();
        let mut child = self.start();
        let drain = |pipe: Option<Box<dyn std::io::Read + Send>>| {
            std::thread::spawn(move || {
                let mut bytes = Vec::new();
                if let Some(mut pipe) = pipe {
                    let _ = pipe.read_to_end(&mut bytes);
                }
                bytes
            })
        };
        let stdout = drain(child.stdout.take().map(|p| Box::new(p) as _));
        let stderr = drain(child.stderr.take().map(|p| Box::new(p) as _));
        let status = wait_until(&mut child, started + limit);
        let timed_out = status.is_none();
        if timed_out {
            let _ = child.kill();
        }
        let status = child.wait().expect("the child can be waited for");
        let _ = stdout.join();
        let stderr = stderr
            .join()
            .expect("the reader of the child's errors ends");
        Outcome {
            status,
            timed_out,
            elapsed: started.elapsed(),
            stderr: String::from_utf8_lossy(&stderr).into_owned(),
        }
    }
}

/// How a child build ended.
#[derive(Debug)]
pub struct Outcome {
    pub status: ExitStatus,
    pub timed_out: bool,
    pub elapsed: Duration,
    pub stderr: String,
}

impl Outcome {
    pub fn succeeded(&self) -> bool {
        self.status.success() && !self.timed_out
    }

    /// A failure the way a build script should fail: exit status 1 and an `error:` message that
    /// is ours, with no panic, no bare LLVM error and no signal.
    pub fn failed_cleanly(&self) -> bool {
        self.status.code() == Some(1)
            && !self.timed_out
            && self.stderr.contains("gpu-build child: error: ")
            && !self.stderr.contains("panicked")
            && !self.stderr.contains("LLVM ERROR")
    }

    /// Ended by LLVM's fatal-error handler: an error naming what was being compiled and exit
    /// status 1, but no check of ours caught the input first.
    pub fn stopped_by_llvm(&self) -> bool {
        self.status.code() == Some(1)
            && !self.timed_out
            && self
                .stderr
                .contains("LLVM cannot compile this and stopped the build")
            && !self.stderr.contains("LLVM ERROR")
    }

    /// Neither a success nor a clean failure: a crash, an abort, a panic or a hang.
    pub fn crashed(&self) -> bool {
        !self.succeeded() && !self.failed_cleanly() && !self.stopped_by_llvm()
    }
}

/// Waits for the child until `deadline`; `None` if it is still running then.
pub fn wait_until(child: &mut Child, deadline: Instant) -> Option<ExitStatus> {
    loop {
        if let Some(status) = child.try_wait().expect("the child can be polled") {
            return Some(status);
        }
        if Instant::now() >= deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// Every file under `dir` with its bytes, by path relative to `dir`.
pub fn tree(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut files = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(current) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(&current) else {
            continue;
        };
        for entry in entries {
            let path = entry.unwrap().path();
            if path.is_dir() {
                pending.push(path);
            } else {
                let bytes = std::fs::read(&path).unwrap_or_default();
                files.push((path.strip_prefix(dir).unwrap().to_path_buf(), bytes));
            }
        }
    }
    files.sort();
    files
}

/// The child: does the job its environment names, then exits 0, or prints the error and exits 1
/// (as a build script's `compile_or_exit` does). Without a job it does nothing.
#[test]
#[ignore = "a helper the reliability tests run in a child process"]
fn child_process() {
    let Ok(job) = std::env::var(JOB) else {
        return;
    };
    let var = |name| std::env::var(name).unwrap_or_else(|_| panic!("{name} is set"));
    let (out, base) = (PathBuf::from(var(OUT)), var(BASE));
    let kernels = var(KERNELS);
    let build_into = |out: &Path| {
        let mut build = build_in(out);
        build.base_dir(&base);
        for kernel in kernels.lines() {
            build.kernel(kernel);
        }
        if std::env::var(CHECKED).is_ok_and(|v| v == "1") {
            build.checked(true);
        }
        build
    };
    let mut build = build_into(&out);
    match job.as_str() {
        "samples" => {
            build
                .target(Vendor::Nvptx, &["sm_80", "sm_90"])
                .target(Vendor::Amdgpu, &["gfx90a", "gfx1100"])
                .target(Vendor::Host, &[]);
        }
        "file-targets" => {}
        _ => return every_target(build_into),
    }
    match build.compile() {
        Ok(report) if report.reused => eprintln!("gpu-build child: reused the previous outputs"),
        Ok(report) => eprintln!(
            "gpu-build child: compiled {}, cache hits {}",
            report.compiled, report.cache_hits
        ),
        Err(error) => {
            eprintln!("gpu-build child: error: {error}");
            std::process::exit(1);
        }
    }
}

/// [`Job::EveryTarget`]: one build per target family, each into its own folder of `OUT`, so a
/// family that rejects the input does not keep the others from compiling it. Exits 1 after the
/// last when any rejected it, 2 if a failed build left a manifest.
fn every_target(build_into: impl Fn(&Path) -> gpu_build::Build) {
    let out = PathBuf::from(std::env::var(OUT).unwrap());
    let mut failed = false;
    let mut compiled = Vec::new();
    for vendor in [
        Vendor::Nvptx,
        Vendor::Amdgpu,
        Vendor::Host,
        Vendor::Vulkan,
        Vendor::OpenCl,
    ] {
        let dir = out.join(vendor.to_string());
        let mut build = build_into(&dir);
        build.target(vendor, &[]);
        match build.compile() {
            Ok(_) => compiled.push(vendor.to_string()),
            Err(error) => {
                failed = true;
                eprintln!("gpu-build child: error: {vendor}: {error}");
                if dir.join(gpu_manifest::MANIFEST_PATH).exists() {
                    eprintln!("gpu-build child: the failed {vendor} build left a manifest");
                    std::process::exit(2);
                }
            }
        }
    }
    eprintln!("gpu-build child: compiled for [{}]", compiled.join(", "));
    std::process::exit(i32::from(failed));
}
