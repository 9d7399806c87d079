//! Helpers shared by the workspace tests.
#![allow(dead_code)]

use gpu_build::{Build, Report, Vendor};
use std::path::{Path, PathBuf};
use std::process::Command;

/// Tests run again in a child of this binary: alone, with an environment of their own.
#[path = "../../../gpu-embed/tests/embed/common/rerun.rs"]
pub mod rerun;

/// The library crates as packaged, which the crates built outside the workspace depend on.
pub mod packages;

pub fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

pub fn sample_kernels() -> Vec<PathBuf> {
    ["vadd", "saxpy", "reduce", "math"]
        .iter()
        .map(|name| workspace().join(format!("sample-project/kernels/{name}.mlir")))
        .collect()
}

/// A builder writing into a fresh temporary directory, printing nothing for cargo.
pub fn build_in(out: &Path) -> Build {
    let mut build = Build::new();
    build.out_dir(out).base_dir(out).quiet(true);
    build
}

/// Compiles `text` (written to `name` in a fresh directory) and returns the error message.
pub fn compile_error(
    name: &str,
    text: &[u8],
    configure: impl FnOnce(&mut Build),
) -> gpu_build::Error {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join(name), text).unwrap();
    let mut build = build_in(dir.path());
    build.kernel(name);
    configure(&mut build);
    let error = build.compile().expect_err("the build must fail");
    assert!(
        !dir.path().join(gpu_manifest::MANIFEST_PATH).exists(),
        "a failed build left a manifest behind"
    );
    error
}

/// Compiles `text` and returns the report and the directory holding the outputs.
pub fn compile_ok(
    name: &str,
    text: &str,
    configure: impl FnOnce(&mut Build),
) -> (Report, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join(name), text).unwrap();
    let mut build = build_in(dir.path());
    build.kernel(name);
    configure(&mut build);
    match build.compile() {
        Ok(report) => (report, dir),
        Err(error) => panic!("build failed:\n{error}"),
    }
}

/// ptxas from the PyPI wheel or a toolkit (what `scripts/setup.sh` installs).
pub fn ptxas() -> PathBuf {
    let output = Command::new("python3")
        .args([
            "-c",
            "import nvidia.cuda_nvcc as m; print(list(m.__path__)[0])",
        ])
        .output()
        .expect("python3 runs");
    let dir = String::from_utf8_lossy(&output.stdout).trim().to_string();
    let path = PathBuf::from(dir).join("bin/ptxas");
    assert!(
        path.is_file(),
        "ptxas not found at {}; run scripts/setup.sh",
        path.display()
    );
    path
}

pub fn objects_of(report: &Report, vendor: Vendor) -> Vec<(gpu_manifest::Object, Vec<u8>)> {
    report
        .manifest
        .objects()
        .filter(|o| o.vendor == vendor)
        .map(|o| {
            (
                o.clone(),
                std::fs::read(report.out_dir.join(&o.path)).unwrap(),
            )
        })
        .collect()
}

/// PTX without comment lines, for comparing compilers' output.
pub fn strip_ptx_comments(ptx: &str) -> String {
    ptx.lines()
        .filter(|line| !line.trim_start().starts_with("//"))
        .map(str::trim_end)
        .filter(|line| !line.is_empty())
        .collect::<Vec<_>>()
        .join("\n")
}

/// The test run's target directory: this binary is `<target>/<profile>/deps/<name>-<hash>`.
pub fn target_dir() -> PathBuf {
    let binary = std::env::current_exe().unwrap();
    binary.ancestors().nth(3).unwrap().to_path_buf()
}

/// The workspace's `[profile]` settings as `--config` arguments, for builds that would not see
/// them: a crate outside the workspace, a package `cargo publish` verifies. Settings for one of
/// the workspace's own packages are left out: such a build compiles those packages from another
/// path, never sharing the test run's units, and gpu-embed at `opt-level = 3` cost ~10 s of CPU
/// per build for kernels of a thousand elements.
pub fn workspace_profiles() -> Vec<String> {
    fn flatten(prefix: &str, value: &toml::Value, found: &mut Vec<String>) {
        match value {
            toml::Value::Table(table) => {
                for (key, value) in table {
                    flatten(&format!("{prefix}.{key}"), value, found);
                }
            }
            value => found.extend(["--config".to_string(), format!("{prefix}={value}")]),
        }
    }
    let manifest = std::fs::read_to_string(workspace().join("Cargo.toml")).unwrap();
    let mut manifest: toml::Table = manifest.parse().unwrap();
    let members = workspace_packages(&manifest);
    let mut found = Vec::new();
    if let Some(toml::Value::Table(profiles)) = manifest.get_mut("profile") {
        for (_, profile) in profiles.iter_mut() {
            if let Some(toml::Value::Table(packages)) = profile.get_mut("package") {
                packages.retain(|name, _| !members.iter().any(|member| member == name));
            }
        }
        flatten("profile", &toml::Value::Table(profiles.clone()), &mut found);
    }
    found
}

/// The package names of the workspace's members (`[workspace] members` of `manifest`).
fn workspace_packages(manifest: &toml::Table) -> Vec<String> {
    manifest["workspace"]["members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|member| {
            let path = workspace()
                .join(member.as_str().unwrap())
                .join("Cargo.toml");
            let member: toml::Table = std::fs::read_to_string(path).unwrap().parse().unwrap();
            member["package"]["name"].as_str().unwrap().to_string()
        })
        .collect()
}

/// `cargo` for a build nested in the test run (a fixture crate, a package being verified): in the
/// test run's own target directory, which cargo does not lock while tests run, with the
/// workspace's profiles. Where LLVM 22 is comes from cargo's own configuration, as for any user
/// of gpu-build (`scripts/setup.sh` records it there): the variables are removed from the nested
/// build's environment, so a fixture that builds proves a user's crate would. A nested build
/// reuses the test run's units of every registry crate whose features it resolves the same
/// (build scripts and proc macros are built as the code is: see the workspace's Cargo.toml),
/// the LLVM and MLIR bindings included; the workspace's own packages it compiles once more
/// (cargo hashes a path package by where it is: see `packages`).
pub fn nested_cargo(dir: &Path) -> Command {
    let mut command = Command::new(env!("CARGO"));
    command
        .current_dir(dir)
        .env("CARGO_TARGET_DIR", target_dir())
        .env_remove("LLVM_SYS_221_PREFIX")
        .env_remove("MLIR_SYS_220_PREFIX")
        .env_remove("TABLEGEN_220_PREFIX")
        .env_remove("MLIR_SYS_LINK_SHARED")
        .args(workspace_profiles());
    command
}

/// A fenced code block of a Markdown text.
pub struct Fence {
    /// What follows the opening fence: `mlir`, `rust,no_run`, or nothing.
    pub info: String,
    /// The line (1-based) of the opening fence.
    pub line: usize,
    /// Its lines, without the fences.
    pub body: Vec<String>,
}

/// Every fenced code block of `text`, in order (a fence is a line starting with three
/// backticks; blocks do not nest).
pub fn fenced_blocks(text: &str) -> Vec<Fence> {
    let mut found = Vec::new();
    let mut lines = text.lines().enumerate();
    while let Some((number, line)) = lines.next() {
        if let Some(info) = line.strip_prefix("```") {
            let body = lines
                .by_ref()
                .map(|(_, l)| l)
                .take_while(|l| !l.starts_with("```"))
                .map(String::from)
                .collect();
            found.push(Fence {
                info: info.to_string(),
                line: number + 1,
                body,
            });
        }
    }
    found
}
