//! Helpers shared by the workspace tests.
#![allow(dead_code)]

use gpu_build::{Build, Report, Vendor};
use std::path::{Path, PathBuf};
use std::process::Command;

/// Tests run again in a child of this binary: alone, with an environment of their own.
#[path = "../../../gpu-embed/tests/embed/common/rerun.rs"]
pub mod rerun;

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
/// them: a crate outside the workspace, a package `cargo publish` verifies.
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
    let manifest: toml::Table = manifest.parse().unwrap();
    let mut found = Vec::new();
    if let Some(profiles) = manifest.get("profile") {
        flatten("profile", profiles, &mut found);
    }
    found
}

/// `cargo` for a build nested in the test run (a fixture crate, a package being verified): in the
/// test run's own target directory, which cargo does not lock while tests run, with the
/// workspace's profiles. Where LLVM 22 is comes from cargo's own configuration, as for any user
/// of gpu-build (`scripts/setup.sh` records it there): the variables are removed from the nested
/// build's environment, so a fixture that builds proves a user's crate would. Nested builds of the
/// same dependency graph share their units with each other and with the test run (the GPU
/// bundle's, `cargo doc`'s build scripts), and no nested build keeps a target directory of its
/// own. A fixture crate's graph is not the workspace's, though: cargo unifies features over the
/// whole graph, so `regex` or `syn` built for the workspace differ from a fixture's, and with
/// them everything above them, gpu-build's LLVM and MLIR bindings included (measured: each
/// distinct graph compiles them once more).
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
