//! What the build script tells cargo: every file and environment variable the build read (so it
//! reruns exactly when one changes) and warnings. Collected during the build, printed at the end.

use std::collections::BTreeSet;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

/// Shared with the compiler thread, hence the mutexes; never contended.
#[derive(Debug, Default)]
pub(crate) struct CargoOutput {
    files: Mutex<BTreeSet<PathBuf>>,
    env: Mutex<BTreeSet<String>>,
    warnings: Mutex<Vec<String>>,
    /// `rustc-link-search` / `rustc-link-lib` lines (the host kernels' static library).
    links: Mutex<Vec<String>>,
    /// Every place a toolkit piece was looked for, and whether something was there.
    probes: Mutex<BTreeSet<(PathBuf, bool)>>,
    /// Lines about this run only (`GPU_BUILD_VERBOSE`), shown as warnings but not recorded for
    /// replay by a later build that reuses the outputs.
    notes: Mutex<Vec<String>>,
}

thread_local! {
    /// The warnings of the task running on this thread, while one is captured.
    static CAPTURED: std::cell::RefCell<Option<Vec<String>>> = const { std::cell::RefCell::new(None) };
}

impl CargoOutput {
    /// Reads an environment variable and remembers that the build depends on it.
    pub fn env(&self, name: &str) -> Option<OsString> {
        self.env.lock_now().insert(name.to_string());
        std::env::var_os(name).filter(|value| !value.is_empty())
    }

    /// Remembers where a toolkit piece was looked for (a later build that finds a different
    /// toolkit there is not the same build).
    pub fn probed(&self, tried: &[PathBuf]) {
        let mut probes = self.probes.lock_now();
        probes.extend(tried.iter().map(|path| (path.clone(), path.exists())));
    }

    /// Reads a secret (a signing key, a password): neither recorded for the next build's
    /// up-to-date check, whose record keeps each variable's value, nor named to cargo, whose
    /// fingerprint keeps it too. Changing one changes no output.
    #[cfg_attr(not(feature = "remote-cache"), allow(dead_code))]
    pub fn secret_env(&self, name: &str) -> Option<OsString> {
        std::env::var_os(name).filter(|value| !value.is_empty())
    }

    /// Remembers that the build read `path`.
    pub fn read_file(&self, path: &Path) {
        self.files.lock_now().insert(path.to_path_buf());
    }

    pub fn warn(&self, message: impl Into<String>) {
        let message = message.into();
        CAPTURED.with_borrow_mut(|captured| {
            if let Some(captured) = captured {
                captured.push(message.clone());
            }
        });
        let mut warnings = self.warnings.lock_now();
        if !warnings.contains(&message) {
            warnings.push(message);
        }
    }

    /// Runs `work` and returns, besides its result, the warnings it gave on this thread (which
    /// are also given as usual): what a cache entry replays.
    pub fn capture_warnings<R>(&self, work: impl FnOnce() -> R) -> (R, Vec<String>) {
        let outer = CAPTURED.replace(Some(Vec::new()));
        let result = work();
        let captured = CAPTURED.replace(outer).unwrap_or_default();
        (result, captured)
    }

    /// A line about this run only (not replayed when a later build reuses the outputs).
    pub fn note(&self, message: impl Into<String>) {
        self.notes.lock_now().push(message.into());
    }

    /// Links the static library `lib<name>.a` in `dir` into the crate.
    pub fn link_static(&self, dir: &Path, name: &str) {
        let mut links = self.links.lock_now();
        links.push(format!("cargo::rustc-link-search=native={}", dir.display()));
        links.push(format!("cargo::rustc-link-lib=static={name}"));
    }

    /// Everything recorded, to replay in a later build that reuses this one's outputs.
    pub fn recorded(&self) -> Recorded {
        Recorded {
            files: self.files.lock_now().iter().cloned().collect(),
            env: self.env.lock_now().iter().cloned().collect(),
            links: self.links.lock_now().clone(),
            warnings: self.warnings(),
            probes: self.probes.lock_now().iter().cloned().collect(),
        }
    }

    /// Replays what an earlier build recorded.
    pub fn replay(&self, recorded: &Recorded) {
        self.files.lock_now().extend(recorded.files.iter().cloned());
        self.env.lock_now().extend(recorded.env.iter().cloned());
        self.links.lock_now().extend(recorded.links.iter().cloned());
        self.probes
            .lock_now()
            .extend(recorded.probes.iter().cloned());
        for warning in &recorded.warnings {
            self.warn(warning.clone());
        }
    }

    pub fn warnings(&self) -> Vec<String> {
        self.warnings.lock_now().clone()
    }

    /// The `cargo::` lines for everything collected.
    pub fn directives(&self) -> Vec<String> {
        let mut lines = Vec::new();
        for file in self.files.lock_now().iter() {
            lines.push(format!("cargo::rerun-if-changed={}", file.display()));
        }
        for name in self.env.lock_now().iter() {
            lines.push(format!("cargo::rerun-if-env-changed={name}"));
        }
        lines.extend(self.links.lock_now().iter().cloned());
        let notes = self.notes.lock_now();
        for warning in self.warnings.lock_now().iter().chain(notes.iter()) {
            // One directive per line: a multi-line warning becomes several.
            for line in warning.lines() {
                lines.push(format!("cargo::warning={line}"));
            }
        }
        lines
    }
}

/// What one build told cargo.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) struct Recorded {
    pub files: Vec<PathBuf>,
    pub env: Vec<String>,
    pub links: Vec<String>,
    pub warnings: Vec<String>,
    /// Toolkit locations looked at, and whether something was there.
    pub probes: Vec<(PathBuf, bool)>,
}

trait LockNow<T> {
    fn lock_now(&self) -> MutexGuard<'_, T>;
}

impl<T> LockNow<T> for Mutex<T> {
    /// A poisoned lock only means another thread panicked while pushing; the data is still whole.
    fn lock_now(&self) -> MutexGuard<'_, T> {
        self.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}
