//! This test binary's tests again, under valgrind's memcheck. Used by gpu-embed's host-device
//! tests and, through `#[path]`, by the other crates' host-device tests (the tests crate's
//! host semantics, the sample's kernels on the host).

use std::process::Command;

/// Set when the binary runs under memcheck (the memcheck test then does nothing, and probes
/// that otherwise run in a child process run in process, where memcheck watches them).
pub const UNDER_MEMCHECK: &str = "GPU_EMBED_UNDER_MEMCHECK";

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
