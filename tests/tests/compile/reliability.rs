//! What a build guarantees however it ends: killed at any point, the next build into the same
//! `OUT_DIR` gives exactly what a clean build gives; no manifest ever describes objects that are
//! missing or different; nothing is written outside `OUT_DIR`; two clean builds in different
//! directories give the same bytes.

use crate::child::{sample_project_kernels, tree, wait_until, ChildBuild, Job};
use crate::common::*;
use sha2::{Digest, Sha256};
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::time::{Duration, Instant};

const KILL_POINTS: u32 = 20;
const BUILD_LIMIT: Duration = Duration::from_secs(300);

/// A clean build of the sample kernels for every target, in a child process.
fn clean_build(out: &Path, outside: &Path) -> Duration {
    let base = workspace().join("sample-project");
    let outcome = ChildBuild::new(Job::Samples, &base, &sample_project_kernels(), out, outside)
        .run(BUILD_LIMIT);
    assert!(outcome.succeeded(), "the sample build failed: {outcome:?}");
    outcome.elapsed
}

/// A manifest, if there is one, describes exactly the files beside it.
fn assert_manifest_describes_the_files(out: &Path, when: &str) {
    let Ok(text) = std::fs::read_to_string(out.join(gpu_manifest::MANIFEST_PATH)) else {
        return;
    };
    let manifest = gpu_manifest::Manifest::from_json(&text)
        .unwrap_or_else(|e| panic!("{when}: the manifest does not parse: {e}"));
    for object in manifest.objects() {
        let bytes = std::fs::read(out.join(&object.path))
            .unwrap_or_else(|e| panic!("{when}: the manifest lists {}: {e}", object.path));
        assert_eq!(bytes.len() as u64, object.size, "{when}: {}", object.path);
        let sha: String = Sha256::digest(&bytes)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        assert_eq!(sha, object.sha256, "{when}: {}", object.path);
    }
}

fn assert_empty(dir: &Path) {
    let left: Vec<_> = tree(dir).into_iter().map(|(path, _)| path).collect();
    assert!(left.is_empty(), "files written outside OUT_DIR: {left:?}");
}

/// SIGKILL at 20 points spread over a build of the sample kernels, each followed by a build into
/// the same directory.
#[test]
fn a_build_killed_anywhere_is_repaired_by_the_next_one() {
    let outside = tempfile::tempdir().unwrap();
    let reference = tempfile::tempdir().unwrap();
    // How long a build takes, as observed: the kill points are spread over it, and it shrinks
    // whenever a build finishes sooner (other tests share the machine, so times vary).
    let mut build_time = clean_build(reference.path(), outside.path());
    // The outputs; beside them, the build's record of where they came from (this machine's
    // paths), which only decides whether the next build may reuse them.
    let outputs = |dir: &Path| tree(&dir.join("gpu-build"));
    let clean = outputs(reference.path());
    assert!(
        clean
            .iter()
            .any(|(path, _)| path.ends_with("manifest.json")),
        "{clean:?}"
    );

    let out = tempfile::tempdir().unwrap();
    let base = workspace().join("sample-project");
    let mut killed_mid_build = 0;
    for point in 1..=KILL_POINTS {
        let delay = build_time * point / (KILL_POINTS + 1);
        let when = format!("killed after {delay:?} (kill point {point})");
        // Without its record the previous build cannot be reused: this one compiles everything.
        let _ = std::fs::remove_file(out.path().join("gpu-build-record.json"));
        let mut child = ChildBuild::new(
            Job::Samples,
            &base,
            &sample_project_kernels(),
            out.path(),
            outside.path(),
        )
        .start();
        let started = Instant::now();
        let finished = wait_until(&mut child, started + delay);
        if finished.is_none() {
            child.kill().unwrap();
        }
        let status = child.wait().unwrap();
        if status.signal() == Some(libc::SIGKILL) {
            killed_mid_build += 1;
        }
        assert_manifest_describes_the_files(out.path(), &when);

        let elapsed = clean_build(out.path(), outside.path());
        if elapsed > Duration::from_millis(200) {
            // A full build, not a reuse of what the killed one finished: the next kill points
            // follow the latest one, since the machine's load (other tests) changes over the run.
            build_time = elapsed;
        }
        let rebuilt = outputs(out.path());
        let names = |files: &[(std::path::PathBuf, Vec<u8>)]| {
            files.iter().map(|(p, _)| p.clone()).collect::<Vec<_>>()
        };
        assert_eq!(
            names(&rebuilt),
            names(&clean),
            "{when}: the rebuild's files"
        );
        for ((path, bytes), (_, want)) in rebuilt.iter().zip(&clean) {
            assert!(
                bytes == want,
                "{when}: {} differs from a clean build",
                path.display()
            );
        }
        eprintln!("{when}: rebuilt in {elapsed:?}, identical to the clean build");
    }
    assert_empty(outside.path());
    // Kills after the build finished test nothing; most must land inside it.
    assert!(
        killed_mid_build >= KILL_POINTS / 2,
        "only {killed_mid_build} of {KILL_POINTS} kills landed before the build finished"
    );
}

/// Two clean builds of the same kernels from different directories give the same files, byte
/// for byte (the manifest holds paths relative to the crate and to OUT_DIR only).
#[test]
fn clean_builds_in_different_directories_are_byte_identical() {
    let outside = tempfile::tempdir().unwrap();
    let builds: Vec<_> = (0..2)
        .map(|_| {
            let base = tempfile::tempdir().unwrap();
            std::fs::create_dir(base.path().join("kernels")).unwrap();
            for kernel in sample_project_kernels() {
                let from = workspace().join("sample-project").join(&kernel);
                std::fs::copy(from, base.path().join(&kernel)).unwrap();
            }
            let out = base.path().join("target/out");
            let outcome = ChildBuild::new(
                Job::Samples,
                base.path(),
                &sample_project_kernels(),
                &out,
                outside.path(),
            )
            .run(BUILD_LIMIT);
            assert!(outcome.succeeded(), "{outcome:?}");
            let files = tree(&out.join("gpu-build"));
            (base, files)
        })
        .collect();
    let (first, second) = (&builds[0].1, &builds[1].1);
    assert!(first.len() > 10, "{} files", first.len());
    assert_eq!(
        first.iter().map(|(p, _)| p).collect::<Vec<_>>(),
        second.iter().map(|(p, _)| p).collect::<Vec<_>>()
    );
    for ((path, a), (_, b)) in first.iter().zip(second) {
        assert!(a == b, "{} differs between the two builds", path.display());
    }
    assert_empty(outside.path());
}

/// What a build killed while writing leaves (temporary files, scratch, objects of a module that is
/// gone since) does not survive the next build.
#[test]
fn the_next_build_removes_what_an_interrupted_one_left() {
    let kernel = "gpu.module @k [#nvvm.target<chip = \"sm_80\">] {\n  gpu.func @k() kernel {\n    gpu.return\n  }\n}\n";
    let (_, clean) = compile_ok("k.mlir", kernel, |_| {});
    let (_, dirty) = compile_ok("k.mlir", kernel, |_| {});
    let outputs = dirty.path().join("gpu-build");
    std::fs::write(outputs.join("k_mlir/k/.tmpXYZ123"), b"half an object").unwrap();
    std::fs::create_dir_all(outputs.join("scratch/ptxas-abc")).unwrap();
    std::fs::write(outputs.join("scratch/ptxas-abc/kernel.ptx"), b"").unwrap();
    std::fs::create_dir_all(outputs.join("gone_mlir/old")).unwrap();
    std::fs::write(outputs.join("gone_mlir/old/sm_80.ptx"), b"").unwrap();
    let mut build = build_in(dirty.path());
    build.kernel("k.mlir").compile().unwrap();
    assert_eq!(tree(&outputs), tree(&clean.path().join("gpu-build")));
}

/// A build into an `OUT_DIR` whose previous build came from the same files, settings and
/// environment keeps that build's outputs and compiles nothing (what a Rust-only edit costs);
/// any change to what the outputs came from, or to the outputs themselves, rebuilds.
#[test]
fn an_unchanged_build_reuses_its_outputs_and_any_change_rebuilds() {
    let dir = tempfile::tempdir().unwrap();
    let kernel = "gpu.module @k [#nvvm.target<chip = \"sm_80\">] {\n  gpu.func @k() kernel {\n    gpu.return\n  }\n}\n";
    std::fs::write(dir.path().join("k.mlir"), kernel).unwrap();
    let build = |chip: &str| {
        let mut build = build_in(dir.path());
        build
            .kernel("k.mlir")
            .target(gpu_build::Vendor::Nvptx, &[chip]);
        let started = std::time::Instant::now();
        let report = build.compile().unwrap_or_else(|e| panic!("{e}"));
        (report, started.elapsed())
    };
    let outputs = || tree(&dir.path().join("gpu-build"));

    let (first, cold) = build("sm_80");
    assert!(!first.reused);
    let clean = outputs();
    let (second, warm) = build("sm_80");
    assert!(second.reused, "nothing changed");
    assert_eq!(outputs(), clean);
    assert_eq!(second.manifest, first.manifest);
    assert_eq!(second.cargo_directives, first.cargo_directives);
    eprintln!("cold build {cold:?}, reused {warm:?}");

    // Another option, then back: each a full build.
    assert!(!build("sm_90").0.reused);
    assert!(!build("sm_80").0.reused);
    assert_eq!(outputs(), clean);
    // A changed kernel file (a comment is a change: it is what the outputs came from).
    std::fs::write(dir.path().join("k.mlir"), format!("// edited\n{kernel}")).unwrap();
    assert!(!build("sm_80").0.reused);
    assert!(build("sm_80").0.reused);
    // Rewritten with the same bytes (a newer time): compared by content, still the same.
    std::thread::sleep(std::time::Duration::from_millis(20));
    let text = std::fs::read(dir.path().join("k.mlir")).unwrap();
    std::fs::write(dir.path().join("k.mlir"), &text).unwrap();
    assert!(build("sm_80").0.reused, "the same bytes with a newer time");
    // An altered output, of another size and of the same size.
    let ptx = dir.path().join(&first.manifest.modules[0].objects[0].path);
    let rebuilt = std::fs::read(&ptx).unwrap();
    std::fs::write(&ptx, b"garbage").unwrap();
    assert!(!build("sm_80").0.reused);
    assert_eq!(std::fs::read(&ptx).unwrap(), rebuilt);
    let mut same_size = rebuilt.clone();
    same_size[0] ^= 0x20;
    std::thread::sleep(std::time::Duration::from_millis(20));
    std::fs::write(&ptx, &same_size).unwrap();
    assert!(
        !build("sm_80").0.reused,
        "an output with other bytes of the same size"
    );
    assert_eq!(std::fs::read(&ptx).unwrap(), rebuilt);
}

/// An environment variable the build read (here a chip override) is part of what it came from.
#[test]
fn a_changed_environment_variable_rebuilds() {
    let dir = tempfile::tempdir().unwrap();
    let kernel = "gpu.module @k [#nvvm.target<chip = \"sm_80\">] {\n  gpu.func @k() kernel {\n    gpu.return\n  }\n}\n";
    std::fs::write(dir.path().join("k.mlir"), kernel).unwrap();
    let outside = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let run = |chips: Option<&str>| {
        let mut child = ChildBuild::new(
            Job::FileTargets,
            dir.path(),
            &["k.mlir".to_string()],
            &out,
            outside.path(),
        );
        if let Some(chips) = chips {
            child = child.env("GPU_BUILD_NVPTX_CHIPS", chips);
        }
        let outcome = child.run(BUILD_LIMIT);
        assert!(outcome.succeeded(), "{outcome:?}");
        outcome
            .stderr
            .contains("gpu-build child: reused the previous outputs")
    };
    assert!(!run(None));
    assert!(run(None));
    assert!(!run(Some("sm_90")));
    assert!(run(Some("sm_90")));
    assert!(!run(None));
}

/// A toolkit piece that appears where the build looked for one (ptxas installed into CUDA_HOME)
/// makes the next build a full one.
#[test]
fn a_toolkit_installed_where_the_build_looked_rebuilds() {
    let dir = tempfile::tempdir().unwrap();
    let kernel = "gpu.module @k [#nvvm.target<chip = \"sm_80\">] {\n  gpu.func @k() kernel {\n    gpu.return\n  }\n}\n";
    std::fs::write(dir.path().join("k.mlir"), kernel).unwrap();
    let (outside, cuda) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let out = dir.path().join("out");
    let run = || {
        let outcome = ChildBuild::new(
            Job::FileTargets,
            dir.path(),
            &["k.mlir".to_string()],
            &out,
            outside.path(),
        )
        .env("CUDA_HOME", &cuda.path().display().to_string())
        .run(BUILD_LIMIT);
        assert!(outcome.succeeded(), "{outcome:?}");
        outcome
            .stderr
            .contains("gpu-build child: reused the previous outputs")
    };
    assert!(!run());
    assert!(run());
    std::fs::create_dir(cuda.path().join("bin")).unwrap();
    std::os::unix::fs::symlink(ptxas(), cuda.path().join("bin/ptxas")).unwrap();
    assert!(!run(), "ptxas appeared in CUDA_HOME/bin");
    assert!(run());
}

/// A killed build's ptxas or ld.lld can outlive it and keep writing into its scratch space while
/// the next build starts: that build still succeeds (the old outputs are moved aside first).
#[test]
fn a_tool_still_writing_into_the_previous_scratch_space_does_not_fail_the_next_build() {
    let dir = tempfile::tempdir().unwrap();
    let kernel = "gpu.module @k [#nvvm.target<chip = \"sm_80\">] {\n  gpu.func @k() kernel {\n    gpu.return\n  }\n}\n";
    std::fs::write(dir.path().join("k.mlir"), kernel).unwrap();
    let straggler = dir.path().join("gpu-build/scratch/ptxas-straggler");
    std::fs::create_dir_all(&straggler).unwrap();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writer = {
        let (stop, straggler) = (stop.clone(), straggler.clone());
        std::thread::spawn(move || {
            let mut index = 0u64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                // Like the orphaned tool: keeps creating files where it was told to.
                let _ = std::fs::create_dir_all(&straggler);
                let _ = std::fs::write(straggler.join(format!("out{index}")), b"x");
                index += 1;
            }
        })
    };
    std::thread::sleep(Duration::from_millis(50));
    for _ in 0..5 {
        let mut build = build_in(dir.path());
        build
            .kernel("k.mlir")
            .target(gpu_build::Vendor::Nvptx, &["sm_80"]);
        let result = build.compile();
        assert!(result.is_ok(), "{:?}", result.err());
        // The record would let the next build reuse the outputs; each must start anew.
        std::fs::remove_file(dir.path().join("gpu-build-record.json")).unwrap();
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    writer.join().unwrap();
}
