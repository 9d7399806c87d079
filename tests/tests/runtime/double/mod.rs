//! The runtime against the CUDA and HIP driver double (`driver-double/`): each test runs in a
//! child process whose CUDA and HIP libraries are the double (`GPU_EMBED_CUDA_LIBRARY`,
//! `GPU_EMBED_HIP_LIBRARY`), then reads the double's record of that process: every call, every
//! violation of the drivers' rules, every launch as the loaded image reads it, and at exit
//! whatever was never freed. The double checks protocol and ABI; it runs no kernel, so these
//! tests assert on the record and on copies and fills, never on a kernel's results.

mod checks;
mod cuda;
mod errors;
mod hip;

use std::path::PathBuf;

/// The double, built by cargo next to this test binary (a dev-dependency's cdylib goes to
/// `target/<profile>/deps/`).
pub fn library() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let path = exe.parent().unwrap().join("libgpu_driver_double.so");
    assert!(
        path.exists(),
        "{} is missing: `cargo test -p gpu-tests` builds it (a dev-dependency)",
        path.display()
    );
    path
}

/// One test's run against the double: its settings and where its record goes.
pub struct Double {
    vars: Vec<(String, String)>,
    log: PathBuf,
}

impl Double {
    /// A run of the test `name`; its record goes to a file of the target directory.
    pub fn new(name: &str) -> Double {
        let log = match std::env::var("GPU_DOUBLE_LOG") {
            Ok(path) => PathBuf::from(path),
            Err(_) => {
                let directory = std::env::current_exe()
                    .unwrap()
                    .parent()
                    .unwrap()
                    .join("driver-double-records");
                std::fs::create_dir_all(&directory).unwrap();
                let log = directory.join(format!("{name}.log"));
                let _ = std::fs::remove_file(&log);
                log
            }
        };
        let library = library().display().to_string();
        Double {
            vars: vec![
                ("GPU_EMBED_CUDA_LIBRARY".into(), library.clone()),
                ("GPU_EMBED_HIP_LIBRARY".into(), library),
                ("GPU_DOUBLE_LOG".into(), log.display().to_string()),
            ],
            log,
        }
    }

    /// Sets one of the double's variables (`GPU_DOUBLE_CUDA_DEVICES`, `GPU_DOUBLE_FAIL`, ...).
    pub fn with(mut self, variable: &str, value: &str) -> Double {
        self.vars.push((variable.into(), value.into()));
        self
    }

    /// True in the child process that runs the test's body against the double; in the
    /// harness's process, runs that child and fails when it fails.
    pub fn here(&self, module_path: &str, name: &str) -> bool {
        let vars: Vec<(&str, &str)> = self
            .vars
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        crate::rerun::in_own_process(module_path, name, &vars)
    }

    /// The record so far (in the child) or of the whole run (in the harness, after it).
    pub fn record(&self) -> Record {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        Record {
            lines: text.lines().map(String::from).collect(),
            path: self.log.clone(),
        }
    }
}

/// The double's record of one process.
pub struct Record {
    pub lines: Vec<String>,
    path: PathBuf,
}

impl Record {
    pub fn starting(&self, prefix: &str) -> Vec<&str> {
        self.lines
            .iter()
            .filter(|l| l.starts_with(prefix))
            .map(String::as_str)
            .collect()
    }

    /// No rule broken, nothing leaked, and the process reached its exit report. What gpu-embed
    /// keeps for the life of the process by design is not a leak: per device, its helper
    /// stream (`Device::helper_stream`, nothing queued) and at most 256 pooled marker events
    /// (events without timing, `Device::marker_event`).
    pub fn assert_clean(&self) {
        let mut kept: std::collections::HashMap<(String, &str), usize> = Default::default();
        let mut bad = Vec::new();
        for line in &self.lines {
            if line.starts_with("violation") {
                bad.push(line.as_str());
            } else if let Some(thing) = line.strip_prefix("leak ") {
                let device = thing.split(" on ").nth(1).unwrap_or_default().to_string();
                let kind =
                    if thing.starts_with("stream ") && thing.contains("(0 operations queued)") {
                        "helper stream"
                    } else if thing.starts_with("event ") && thing.contains("(no timing)") {
                        "marker event"
                    } else {
                        bad.push(line.as_str());
                        continue;
                    };
                *kept.entry((device, kind)).or_default() += 1;
            }
        }
        for ((device, kind), count) in kept {
            let most = if kind == "helper stream" { 1 } else { 256 };
            assert!(
                count <= most,
                "{count} {kind}s kept on {device} ({})",
                self.path.display()
            );
        }
        assert!(
            bad.is_empty(),
            "the double's record ({}) has:\n{}",
            self.path.display(),
            bad.join("\n")
        );
        assert!(
            self.lines.iter().any(|l| l == "exit"),
            "no exit report in {}",
            self.path.display()
        );
    }

    /// Fails unless some line contains every one of `parts`.
    pub fn assert_has(&self, parts: &[&str]) {
        assert!(
            self.lines
                .iter()
                .any(|l| parts.iter().all(|p| l.contains(p))),
            "no line of {} contains all of {parts:?}:\n{}",
            self.path.display(),
            self.lines.join("\n")
        );
    }
}

/// The GPU tests (ignored without a GPU) that assert on no kernel's result: copies, fills,
/// events, graphs of them, peers, discovery, attributes and occupancy. They run on the double as
/// they would on a GPU; the ones left out compare a kernel's output.
const GPU_TESTS_WITHOUT_KERNEL_RESULTS: [&str; 9] = [
    "device_lookup::a_gpu_has_a_uuid_and_is_found_by_it",
    "graphs::a_captured_graph_replays_like_the_direct_calls_on_a_gpu",
    "host_semantics::streams::an_event_orders_one_stream_after_another::gpu",
    "host_semantics::streams::events_recorded_on_streams_time_their_work::gpu",
    "host_semantics::streams::page_locked_copies_are_waited_for_before_the_host_sees_them::gpu",
    "host_semantics::streams::queued_fills_write_every_pattern::gpu",
    "host_semantics::streams::slices_are_copied_and_filled_like_buffers::gpu",
    "kernel_handles::on_a_gpu_attributes_and_occupancy_come_from_the_driver",
    "peers_and_managed::copies_between_gpus",
];

/// Runs `tests` (ignored ones) of this binary in a child whose GPUs are the double's.
fn run_gpu_tests(double: &Double, tests: &[&str]) {
    let output = std::process::Command::new(std::env::current_exe().unwrap())
        .args(tests)
        .args(["--ignored", "--exact", "--test-threads=1"])
        .envs(double.vars.iter().map(|(k, v)| (k, v)))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success() && stdout.contains(&format!("{} passed", tests.len())),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

#[test]
fn the_gpu_tests_without_kernel_results_pass_on_the_doubles_nvidia_gpus() {
    let double = Double::new("gpu_tests_cuda");
    run_gpu_tests(&double, &GPU_TESTS_WITHOUT_KERNEL_RESULTS);
    double.record().assert_clean();
}

#[test]
fn the_gpu_tests_without_kernel_results_pass_on_the_doubles_amd_gpus() {
    // No NVIDIA device: the default GPU is an AMD one. The graph test's kernel has no AMD object.
    let double = Double::new("gpu_tests_hip").with("GPU_DOUBLE_CUDA_DEVICES", "");
    let tests: Vec<&str> = GPU_TESTS_WITHOUT_KERNEL_RESULTS.into_iter().filter(|t| !t.starts_with("graphs::")).collect();
    run_gpu_tests(&double, &tests);
    let record = double.record();
    record.assert_clean();
    record.assert_has(&["call hipMemcpyPeerAsync"]);
}
