//! `gpu-build run --check`: checked host objects find kernel bugs at their source line. Each
//! seeded bug of `tests/programs/bugs/` is reported exactly as its `// EXPECT:` line says (the
//! kind, the bytes, `file:line:col`, the block, the thread, the argument and where the address
//! lies, fragments separated by `…`), as many times as `// EXPECT-COUNT:` says (default 1),
//! and nothing else; the run fails. Correct programs, ours (the bugs' twins in
//! `tests/programs/twins/` among them) and upstream's, run checked with no report and their
//! output unchanged.

use crate::run::{corpus, run_and_check_args, run_with_args, UPSTREAM_ON_THE_HOST};
use std::path::{Path, PathBuf};

/// The seeded bugs.
fn bugs() -> Vec<PathBuf> {
    programs_in("bugs")
}

/// The programs of `tests/programs/<folder>`.
fn programs_in(folder: &str) -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/programs")
        .join(folder);
    let mut programs: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|e| e == "mlir"))
        .collect();
    programs.sort();
    programs
}

/// The reports of a checked run: its stderr lines from the checker.
fn reports(stderr: &str) -> Vec<&str> {
    stderr
        .lines()
        .filter_map(|line| line.strip_prefix("gpu-embed check: "))
        .collect()
}

/// Whether `line` holds `fragments` in order.
fn holds_in_order(line: &str, fragments: &[&str]) -> bool {
    let mut rest = line;
    fragments.iter().all(|fragment| match rest.find(fragment) {
        Some(at) => {
            rest = &rest[at + fragment.len()..];
            true
        }
        None => false,
    })
}

/// `--check`, with the checks a program's `// CHECKS:` line names beside the default ones.
fn check_argument(source: &str) -> String {
    match source
        .lines()
        .find_map(|line| line.strip_prefix("// CHECKS: "))
    {
        Some(checks) => format!("--check={}", checks.trim()),
        None => "--check".to_string(),
    }
}

/// Checks one seeded bug's run; `Err` says what differed.
fn found_as_expected(program: &Path) -> Result<(), String> {
    let source = std::fs::read_to_string(program).unwrap();
    let file = program.display().to_string();
    let expected: Vec<String> = source
        .lines()
        .filter_map(|line| line.strip_prefix("// EXPECT: "))
        .map(|line| line.replace("{FILE}", &file))
        .collect();
    let count: usize = source
        .lines()
        .find_map(|line| line.strip_prefix("// EXPECT-COUNT: "))
        .map_or(expected.len(), |n| n.trim().parse().unwrap());
    assert!(!expected.is_empty(), "{file}: no // EXPECT: line");
    let output = run_with_args(program, &[&check_argument(&source)], &[]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    if output.status.code() != Some(1) {
        return Err(format!("{file}: exit status {}:\n{stderr}", output.status));
    }
    let found = reports(&stderr);
    if found.len() != count {
        return Err(format!(
            "{file}: {} reports, expected {count}:\n{stderr}",
            found.len()
        ));
    }
    for (expectation, report) in expected.iter().zip(&found) {
        let fragments: Vec<&str> = expectation.split(" … ").collect();
        if !holds_in_order(report, &fragments) {
            return Err(format!(
                "{file}: the report\n  {report}\nis not\n  {expectation}"
            ));
        }
    }
    let summary = format!(
        "error: the checked run found {count} error{}",
        if count == 1 { "" } else { "s" }
    );
    if !stderr.contains(&summary) {
        return Err(format!("{file}: no `{summary}`:\n{stderr}"));
    }
    Ok(())
}

#[test]
fn every_seeded_bug_is_found_at_its_line_with_its_block_and_thread() {
    let programs = bugs();
    assert!(programs.len() >= 4, "{programs:?}");
    let failures: Vec<String> = programs
        .iter()
        .filter_map(|program| found_as_expected(program).err())
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn a_report_that_differs_from_the_expectation_fails_the_comparison() {
    // The comparison itself can fail: the off-by-one store's report at another line does not
    // hold its expectation.
    let program =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/programs/bugs/off_by_one_store.mlir");
    let source = std::fs::read_to_string(&program).unwrap();
    let moved = source.replace("{FILE}:12:7", "{FILE}:13:7");
    assert_ne!(moved, source, "the seeded change applies");
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("off_by_one_store.mlir");
    std::fs::write(&copy, moved).unwrap();
    let why = found_as_expected(&copy).expect_err("a report at the wrong line passed");
    assert!(why.contains("is not"), "{why}");
}

#[test]
fn unchecked_the_seeded_bugs_run_silently() {
    // What the checked run adds: the same off-by-one store on the host device, unchecked, exits
    // 0 and says nothing.
    let program =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/programs/bugs/off_by_one_store.mlir");
    let output = run_with_args(&program, &["--device", "host"], &[]);
    assert!(output.status.success(), "{output:?}");
    assert!(output.stderr.is_empty(), "{output:?}");
}

#[test]
fn correct_programs_run_checked_with_no_report() {
    let corpus = corpus();
    let ours = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/programs");
    let mut programs: Vec<PathBuf> = UPSTREAM_ON_THE_HOST
        .iter()
        // Real bugs of upstream's (below).
        .filter(|program| !["CUDA/alloc-host-shared.mlir", "CUDA/async.mlir"].contains(program))
        .map(|program| corpus.join(program))
        .collect();
    programs
        .extend(["streams.mlir", "shared_memory.mlir", "host_memory.mlir"].map(|p| ours.join(p)));
    // The correct twins of the seeded bugs.
    let twins = programs_in("twins");
    assert!(twins.len() >= 2, "{twins:?}");
    programs.extend(twins);
    let failures: Vec<String> = programs
        .iter()
        .filter_map(|program| run_and_check_args(program, &["--check=all"], &[]).err())
        .collect();
    assert!(
        failures.is_empty(),
        "{} of {} failed checked:\n{}",
        failures.len(),
        programs.len(),
        failures.join("\n\n")
    );
}

#[test]
fn upstreams_alloc_host_shared_test_reads_and_writes_past_its_buffer() {
    // MLIR 22's CUDA/alloc-host-shared.mlir allocates `memref<1xi32>` and uses element 1 (line
    // 17 on the host, lines 19 and 21 in its kernel): the checked run reports the kernel's two
    // accesses, by thread (0, 0, 0) of block (0, 0, 0).
    let program = corpus().join("CUDA/alloc-host-shared.mlir");
    let output = run_with_args(&program, &["--check"], &[]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    let found = reports(&stderr);
    let file = program.display().to_string();
    assert_eq!(found.len(), 2, "{stderr}");
    for (report, (kind, line)) in found.iter().zip([("load", "19:12"), ("store", "21:7")]) {
        let access = format!(
            "out-of-bounds {kind} of 4 bytes at {file}:{line}, block (0, 0, 0), thread (0, 0, 0)"
        );
        let place = "is 0 bytes past the end of argument 0 (4 bytes at";
        assert!(holds_in_order(report, &[&access, place]), "{report}");
    }
}

#[test]
fn upstreams_async_test_leaks_its_three_buffers() {
    // MLIR 22's CUDA/async.mlir allocates three buffers with `gpu.alloc async` (lines 33, 42,
    // 49) and frees none: the leak check reports each at its op; the default checks find nothing.
    let program = corpus().join("CUDA/async.mlir");
    let output = run_with_args(&program, &["--check"], &[]);
    assert!(output.status.success(), "{output:?}");
    let output = run_with_args(&program, &["--check=leaks"], &[]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    let found = reports(&stderr);
    assert_eq!(found.len(), 3, "{stderr}");
    let file = program.display().to_string();
    for (report, line) in found.iter().zip([33, 42, 49]) {
        let leak = [
            "leak: 8 bytes of device memory at",
            &format!("allocated at {file}:{line}:11"),
        ];
        assert!(holds_in_order(report, &leak), "{report}");
    }
}
