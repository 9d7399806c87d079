//! This test binary's tests again, in a child process: under valgrind's memcheck, or alone with
//! an environment of their own. Every crate keeps its integration tests in one binary (modules
//! of `tests/<name>/main.rs`), so a test that must own its process (it sets environment
//! variables, or changes a process-wide setting) runs in a child of that binary, and memcheck
//! re-runs one module, not the whole binary. Shared through `#[path]` by every crate's tests.

#![allow(dead_code)] // each test binary uses some of these

use std::process::Command;

/// Set when the binary runs under memcheck (the memcheck test then does nothing, and probes
/// that otherwise run in a child process run in process, where memcheck watches them).
pub const UNDER_MEMCHECK: &str = "GPU_EMBED_UNDER_MEMCHECK";

/// Set in a child started by [`in_own_process`] to the one test it runs.
const OWN_PROCESS: &str = "GPU_TESTS_OWN_PROCESS";

/// The harness's name of the test `name` in the module `module_path` (`module_path!()` there):
/// the module path without the binary's crate name, then the function.
pub fn test_name(module_path: &str, name: &str) -> String {
    match module_path.split_once("::") {
        Some((_crate, path)) => format!("{path}::{name}"),
        None => name.to_string(),
    }
}

/// The harness's filter for every test of the module `module_path` (`module_path!()` there).
pub fn module_filter(module_path: &str) -> String {
    test_name(module_path, "")
}

/// Whether the calling test `name` of `module_path` should run its body here: true in the child
/// process it starts with `vars` set, where it runs alone, and under memcheck (which runs one
/// module's tests one at a time, and watches only its own process). In the harness's process,
/// runs that child and fails when the child failed, crashed or was killed. For tests that read
/// the process's environment (setting it in a process whose other tests run at the same time
/// would race with them) or change or depend on a process-wide setting.
pub fn in_own_process(module_path: &str, name: &str, vars: &[(&str, &str)]) -> bool {
    let Some(output) = own_process_output(module_path, name, vars) else {
        return true;
    };
    let test = test_name(module_path, name);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success() && stdout.contains("1 passed"),
        "`{test}` failed in its own process ({}):\n{stdout}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    false
}

/// [`in_own_process`] for a test that also looks at what its child printed: `None` where the
/// body should run (in the child, and under memcheck), else the child's output, whatever its
/// status.
pub fn own_process_output(
    module_path: &str,
    name: &str,
    vars: &[(&str, &str)],
) -> Option<std::process::Output> {
    let test = test_name(module_path, name);
    if std::env::var_os(UNDER_MEMCHECK).is_some()
        || std::env::var(OWN_PROCESS).is_ok_and(|running| running == test)
    {
        return None;
    }
    Some(
        Command::new(std::env::current_exe().unwrap())
            .args([test.as_str(), "--exact", "--nocapture", "--test-threads=1"])
            .envs(vars.iter().copied())
            .env(OWN_PROCESS, &test)
            .output()
            .unwrap(),
    )
}

/// Runs every other test of the module `module_path` (`module_path!()` of the calling memcheck
/// test) under valgrind's memcheck and fails on any memory error (invalid reads and writes, use
/// after free, uninitialised values reaching a decision). Leaks are not errors: the runtime
/// keeps devices and drivers for the life of the process.
pub fn memcheck_module(module_path: &str) {
    memcheck_module_with(module_path, &[], None);
}

/// [`memcheck_module`] with `vars` set in the process valgrind runs (a vendor library's own
/// settings) and a suppressions file for errors in code that is not ours (each explained in
/// the file: see the callers). The run tracks no origins of uninitialised values, which halves
/// its time (the sample's host module: 44 s with, 24 s without) and finds the same errors; a
/// run that finds one is repeated with origins tracked, and that run's report is the failure's.
pub fn memcheck_module_with(
    module_path: &str,
    vars: &[(&str, &str)],
    suppressions: Option<&std::path::Path>,
) {
    if std::env::var_os(UNDER_MEMCHECK).is_some() {
        return;
    }
    let valgrind = Command::new("valgrind").arg("--version").output();
    assert!(
        valgrind.is_ok_and(|v| v.status.success()),
        "valgrind is needed for the memcheck tests: scripts/setup.sh installs it (Debian's \
         `valgrind`)"
    );
    let run = |track_origins: bool| {
        Command::new("valgrind")
            .args([
                "--tool=memcheck",
                &format!("--error-exitcode={MEMORY_ERRORS}"),
                "--leak-check=no",
                &format!(
                    "--track-origins={}",
                    if track_origins { "yes" } else { "no" }
                ),
                "--quiet",
            ])
            .args(suppressions.map(|file| format!("--suppressions={}", file.display())))
            .arg(std::env::current_exe().unwrap())
            .args([
                &module_filter(module_path),
                "--skip",
                "memcheck",
                "--test-threads=1",
            ])
            .env(UNDER_MEMCHECK, "1")
            .envs(vars.iter().copied())
            .output()
            .unwrap()
    };
    let mut output = run(false);
    if output.status.code() == Some(MEMORY_ERRORS) {
        output = run(true);
    }
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "memcheck ({}):\n{stdout}\n{stderr}",
        output.status
    );
    println!("{stdout}");
}

/// valgrind's exit status when memcheck found an error (what `--error-exitcode` sets).
const MEMORY_ERRORS: i32 = 97;
