//! The guide's getting-started crate, assembled from the chapter itself
//! (`docs/guide/01-getting-started.md`: every code block whose first line is `// file: PATH` or
//! `# file: PATH`), builds on a machine without a GPU and runs its kernel on the host, as a new
//! user following the chapter would see it. A block broken on purpose fails the build, so the
//! chapter cannot drift from what compiles.

use crate::common::packages::packages;
use crate::common::{fenced_blocks, workspace};
use std::path::Path;

/// The chapter's files: (path, contents), in the chapter's order.
pub(crate) fn chapter_files(chapter: &str) -> Vec<(String, String)> {
    fenced_blocks(chapter)
        .into_iter()
        .filter_map(|block| {
            let first = block.body.first()?;
            let name = first
                .strip_prefix("// file: ")
                .or_else(|| first.strip_prefix("# file: "))?;
            Some((name.to_string(), block.body[1..].join("\n") + "\n"))
        })
        .collect()
}

/// Writes the crate into `root`, with the registry dependencies pointed at the packaged library
/// crates (`common::packages`) and the workspace's lock file, so that it builds offline with the
/// dependency versions every fixture crate shares.
fn write_crate(root: &Path, files: &[(String, String)]) {
    let packages = packages();
    for (name, contents) in files {
        let contents = if name == "Cargo.toml" {
            contents
                .replace(
                    "gpu-embed = \"0.1\"",
                    &format!(
                        "gpu-embed = {{ path = {:?} }}",
                        packages.library("gpu-embed").display().to_string()
                    ),
                )
                .replace(
                    "gpu-build = \"0.1\"",
                    &format!(
                        "gpu-build = {{ path = {:?} }}",
                        packages.library("gpu-build").display().to_string()
                    ),
                )
                + &packages.patch()
                + "\n[workspace]\n"
        } else {
            contents.clone()
        };
        let path = root.join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, contents).unwrap();
    }
    std::fs::copy(workspace().join("Cargo.lock"), root.join("Cargo.lock")).unwrap();
}

/// `cargo build` of the crate at `root` with `env` set, which must fail: its stderr.
fn failing_build(root: &Path, env: &[(&str, &str)], what: &str) -> String {
    let output = crate::common::nested_cargo(root)
        .envs(env.iter().copied())
        .args(["build", "--offline", "--quiet"])
        .output()
        .unwrap();
    assert!(!output.status.success(), "{what} built");
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[test]
fn the_getting_started_crate_builds_and_runs_its_kernel_on_the_host() {
    let chapter =
        std::fs::read_to_string(workspace().join("docs/guide/01-getting-started.md")).unwrap();
    let files = chapter_files(&chapter);
    let names: Vec<&str> = files.iter().map(|(name, _)| name.as_str()).collect();
    assert_eq!(
        names,
        ["Cargo.toml", "kernels/vadd.mlir", "build.rs", "src/main.rs"],
        "the chapter's files"
    );
    assert!(
        files[0].1.contains("gpu-embed = \"0.1\"") && files[0].1.contains("gpu-build = \"0.1\""),
        "the chapter's Cargo.toml depends on both crates by version: {}",
        files[0].1
    );
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write_crate(root, &files);
    let output = crate::common::nested_cargo(root)
        .args(["run", "--offline", "--quiet"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{}\n{stdout}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(stdout.contains("1000 elements added on "), "{stdout}");
    // What the chapter says was embedded: the default chips of both GPU vendors and the host.
    for object in [
        "embedded: nvptx sm_75 cubin",
        "embedded: nvptx sm_90 PTX",
        "embedded: amdgpu gfx90a hsaco",
        "embedded: amdgpu gfx1100 hsaco",
        "embedded: host ",
    ] {
        assert!(stdout.contains(object), "{object}: {stdout}");
    }

    // A chapter whose example no longer compiles fails here: an argument of the wrong type.
    let main = root.join("src/main.rs");
    let good = std::fs::read_to_string(&main).unwrap();
    let broken = good.replace("&a, &b, &c, n)", "&a, &b, &c, 1.5f32)");
    assert_ne!(broken, good, "the seeded break applies");
    std::fs::write(&main, broken).unwrap();
    let stderr = failing_build(root, &[], "the broken example");
    assert!(
        stderr.contains("src/main.rs") && stderr.contains("mismatched types"),
        "{stderr}"
    );

    // MLIR 22's parser crashes (SIGSEGV) on a dense array of `index` elements, the natural typo
    // for a block size: the build script stops first, at the typo, naming the fix.
    std::fs::write(&main, &good).unwrap();
    let kernel = root.join("kernels/vadd.mlir");
    let good_kernel = std::fs::read_to_string(&kernel).unwrap();
    let typo = good_kernel.replace(
        ") kernel {",
        ") kernel attributes {known_block_size = array<index: 256, 1, 1>} {",
    );
    assert_ne!(typo, good_kernel, "the typo applies");
    std::fs::write(&kernel, &typo).unwrap();
    let stderr = failing_build(root, &[], "the typo");
    let line = typo
        .lines()
        .position(|l| l.contains("array<index"))
        .unwrap()
        + 1;
    let column = typo
        .lines()
        .nth(line - 1)
        .unwrap()
        .find("array<index")
        .unwrap()
        + 7;
    assert!(
        stderr.contains(&format!(
            "kernels/vadd.mlir:{line}:{column}: error: a dense array attribute cannot hold \
             `index` elements (MLIR 22 crashes on it); write array<i32: …> or array<i64: …>"
        )) && !stderr.contains("crashed"),
        "{stderr}"
    );

    // LLVM 22 here has shared libraries, which llvm-sys links: a build told to link MLIR
    // statically (a second LLVM in every binary) stops in gpu-build's build script, naming the
    // fix, before anything is linked. A failed build script records nothing, so the next build
    // with cargo's configuration reuses the last good one.
    std::fs::write(&kernel, &good_kernel).unwrap();
    let stderr = failing_build(
        root,
        &[("MLIR_SYS_LINK_SHARED", "0")],
        "a crate mixing static MLIR with shared LLVM",
    );
    assert!(
        stderr.contains("has a shared libLLVM, which llvm-sys links, but mlir-sys would link MLIR's static libraries")
            && stderr.contains("set MLIR_SYS_LINK_SHARED = \"1\" in the [env] table of ~/.cargo/config.toml"),
        "{stderr}"
    );

    // gpu-embed without its `vulkan` feature (the chapter's crate): Vulkan objects, which no
    // device could run, are a compile error at the target that asked for them, naming the fix.
    let vulkan = good.replace(
        "targets = [nvptx, amdgpu, host]",
        "targets = [nvptx, amdgpu, host, vulkan]",
    );
    assert_ne!(vulkan, good, "the Vulkan target is added");
    std::fs::write(&main, vulkan).unwrap();
    let stderr = failing_build(
        root,
        &[],
        "a crate with Vulkan objects and no Vulkan driver",
    );
    assert!(
        stderr.contains(
            "gpu.module @vadd has Vulkan objects, which only gpu-embed's `vulkan` feature"
        ) && stderr.contains("features = [\"vulkan\"]")
            && stderr.contains("src/main.rs:3:"),
        "{stderr}"
    );
}

#[test]
fn the_finding_bugs_crate_is_silent_unchecked_and_reports_its_bug_checked() {
    let chapter =
        std::fs::read_to_string(workspace().join("docs/guide/11-finding-kernel-bugs.md")).unwrap();
    let files = chapter_files(&chapter);
    let names: Vec<&str> = files.iter().map(|(name, _)| name.as_str()).collect();
    assert_eq!(
        names,
        [
            "Cargo.toml",
            "kernels/shift.mlir",
            "build.rs",
            "src/main.rs"
        ],
        "the chapter's files"
    );
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write_crate(root, &files);
    let run = |check: &str| {
        crate::common::nested_cargo(root)
            .args(["run", "--offline", "--quiet"])
            .env("GPU_EMBED_CHECK", check)
            .output()
            .unwrap()
    };
    // Unchecked: the read past the view goes unnoticed, as the chapter shows.
    let output = run("0");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}\n{stdout}");
    assert!(
        stdout.contains("shifted: [9.0, 10.0, 11.0, 12.0, 13.0, 14.0, 15.0, 16.0]"),
        "{stdout}"
    );
    assert!(!stderr.contains("gpu-embed check"), "{stderr}");
    // Checked (the same crate, nothing changed but the environment): the report at the
    // kernel's line, by thread 7, and the launch's error.
    let output = run("1");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}\n{stdout}");
    let report = "kernel `shift_left`: out-of-bounds load of 4 bytes at kernels/shift.mlir:8:12, \
                  block (0, 0, 0), thread (7, 0, 0): address ";
    let place = "is 0 bytes past the end of argument `view` (32 bytes at ";
    let reported: Vec<&str> = stderr
        .lines()
        .filter(|line| line.starts_with("gpu-embed check: "))
        .collect();
    assert_eq!(reported.len(), 1, "{stderr}");
    assert!(
        reported[0].contains(report) && reported[0].contains(place),
        "{stderr}"
    );
    assert!(
        stdout.contains("the launch failed: launching kernel `shift_left`")
            && stdout.contains(report),
        "{stdout}"
    );
    // The fault lost nothing: the next launch on the same buffers runs, checked, clean.
    assert!(
        stdout.contains("with a view of 9: [9.0, 10.0, 11.0, 12.0, 13.0, 14.0, 15.0, 16.0]"),
        "{stdout}"
    );
}
