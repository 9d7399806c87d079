//! A run against the CUDA and HIP driver double (`driver-double/`, CONTRIBUTING.md "Without a
//! GPU"): the variables that make a process load it and where its record goes, and the record
//! read back. Shared through `#[path]` by the crates whose tests use the double.

#![allow(dead_code)] // each test binary uses some of these

use std::path::PathBuf;

/// The double, built by cargo next to this test binary (a dev-dependency's cdylib goes to
/// `target/<profile>/deps/`).
pub fn library() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let path = exe.parent().unwrap().join("libgpu_driver_double.so");
    assert!(
        path.exists(),
        "{} is missing: cargo builds it as a dev-dependency of the crate under test",
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

    /// The variables a process runs against the double with.
    pub fn vars(&self) -> Vec<(&str, &str)> {
        self.vars
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect()
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
    /// A record of `lines` (some lines of another), named `name` in messages.
    pub fn from_lines(lines: Vec<String>, name: &str) -> Record {
        Record {
            lines,
            path: PathBuf::from(name),
        }
    }

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
