//! Test helpers: probes that run in a child process (so a crash of the code under test fails
//! the probe, not the whole test binary), and this binary's tests re-run under valgrind's
//! memcheck (`memcheck.rs`).

#![allow(dead_code)] // each test binary uses some of these

use std::process::Command;

mod memcheck;
pub use memcheck::{memcheck_this_binary, UNDER_MEMCHECK};

/// Set in a child process to the one test it runs.
const CHILD: &str = "GPU_EMBED_TEST_CHILD";

/// Whether the calling test `name` should run its body here: in the child process it starts
/// (or in process under memcheck). In the parent, runs the child and fails when the child
/// failed, crashed or was killed.
pub fn run_in_child(name: &str) -> bool {
    if std::env::var_os(UNDER_MEMCHECK).is_some()
        || std::env::var(CHILD).is_ok_and(|child| child == name)
    {
        return true;
    }
    let output = Command::new(std::env::current_exe().unwrap())
        .args([name, "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD, name)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success() && stdout.contains("1 passed"),
        "probe `{name}` failed in its child process ({}):\n{stdout}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    false
}
