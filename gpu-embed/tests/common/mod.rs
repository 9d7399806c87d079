//! Test helpers: probes that run in a child process (so a crash of the code under test fails
//! the probe, not the whole test binary), and this binary's tests re-run under valgrind's
//! memcheck.

#![allow(dead_code)] // each test binary uses some of these

use std::process::Command;

/// Set in a child process to the one test it runs.
const CHILD: &str = "GPU_EMBED_TEST_CHILD";
/// Set when the binary runs under memcheck: probes run in process (memcheck watches them).
const UNDER_MEMCHECK: &str = "GPU_EMBED_UNDER_MEMCHECK";

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

/// Runs every other test of this binary under valgrind's memcheck and fails on any memory
/// error (invalid reads and writes, use after free, uninitialised values reaching a decision).
/// Leaks are not errors: the runtime keeps devices and drivers for the life of the process.
pub fn memcheck_this_binary() {
    if std::env::var_os(UNDER_MEMCHECK).is_some() {
        return;
    }
    let valgrind = Command::new("valgrind").arg("--version").output();
    assert!(
        valgrind.is_ok_and(|v| v.status.success()),
        "valgrind is needed for the memcheck tests: scripts/setup.sh installs it (Debian's \
         `valgrind`)"
    );
    let output = Command::new("valgrind")
        .args([
            "--tool=memcheck",
            "--error-exitcode=97",
            "--leak-check=no",
            "--track-origins=yes",
            "--quiet",
        ])
        .arg(std::env::current_exe().unwrap())
        .args(["--skip", "memcheck", "--test-threads=1"])
        .env(UNDER_MEMCHECK, "1")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "memcheck ({}):\n{stdout}\n{stderr}",
        output.status
    );
    println!("{stdout}");
}
