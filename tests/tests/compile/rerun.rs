//! Rebuilds happen exactly when needed: a user crate is built with cargo, and its build script
//! reruns when (and only when) a kernel file, a linked bitcode file or a toolkit variable changes.

use crate::common::packages::packages;
use crate::common::workspace;
use std::path::Path;
use std::process::Command;

const KERNEL: &str = r#"gpu.module @k [#nvvm.target<chip = "sm_80", link = ["lib/helper.bc"]>] {
  llvm.func @helper(f32) -> f32
  llvm.func @k(%p: !llvm.ptr) attributes {gpu.kernel} {
    %x = llvm.load %p : !llvm.ptr -> f32
    %y = llvm.call @helper(%x) : (f32) -> f32
    llvm.store %y, %p : f32, !llvm.ptr
    llvm.return
  }
}
"#;

fn write_fixture(dir: &Path) {
    let packages = packages();
    std::fs::create_dir_all(dir.join("src")).unwrap();
    std::fs::create_dir_all(dir.join("kernels")).unwrap();
    std::fs::create_dir_all(dir.join("lib")).unwrap();
    std::fs::write(
        dir.join("Cargo.toml"),
        format!(
            // The dependencies of a user crate (gpu-embed too, though this one launches nothing):
            // the other fixture crates' dependency graph, so their builds share its units.
            "[package]\nname = \"rerun-fixture\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n\
             {}{}\n[workspace]\n",
            packages.dependencies(""),
            packages.patch()
        ),
    )
    .unwrap();
    // The workspace's lock file pins the same dependency versions, so nothing is downloaded.
    std::fs::copy(workspace().join("Cargo.lock"), dir.join("Cargo.lock")).unwrap();
    std::fs::write(
        dir.join("build.rs"),
        "fn main() { gpu_build::Build::new().kernel(\"kernels/k.mlir\").compile_or_exit(); }\n",
    )
    .unwrap();
    std::fs::write(dir.join("src/main.rs"), "fn main() {}\n").unwrap();
    std::fs::write(dir.join("kernels/k.mlir"), KERNEL).unwrap();
    std::fs::write(
        dir.join("lib/helper.ll"),
        "target triple = \"nvptx64-nvidia-cuda\"\ndefine float @helper(float %x) {\n  ret float %x\n}\n",
    )
    .unwrap();
    assemble_helper(dir);
}

fn assemble_helper(dir: &Path) {
    let status = Command::new("llvm-as-22")
        .arg(dir.join("lib/helper.ll"))
        .arg("-o")
        .arg(dir.join("lib/helper.bc"))
        .status()
        .unwrap();
    assert!(status.success());
}

/// Builds the fixture; returns whether its build script ran.
fn build(dir: &Path, cuda_home: Option<&str>) -> bool {
    let mut command = crate::common::nested_cargo(dir);
    command
        .args(["build", "-v", "--offline"])
        .env_remove("CUDA_HOME");
    if let Some(cuda_home) = cuda_home {
        command.env("CUDA_HOME", cuda_home);
    }
    let output = command.output().unwrap();
    let log = String::from_utf8_lossy(&output.stderr).to_string();
    assert!(output.status.success(), "fixture build failed:\n{log}");
    log.lines().any(|line| {
        line.contains("Running")
            && line.contains("rerun-fixture-")
            && line.contains("build-script-build")
    })
}

/// Rewrites a file with a newer modification time (cargo compares mtimes).
fn touch(path: &Path) {
    std::thread::sleep(std::time::Duration::from_millis(1100));
    let bytes = std::fs::read(path).unwrap();
    std::fs::write(path, bytes).unwrap();
}

#[test]
fn the_build_script_reruns_exactly_when_an_input_changes() {
    let dir = tempfile::tempdir().unwrap();
    write_fixture(dir.path());
    assert!(
        build(dir.path(), None),
        "the first build runs the build script"
    );
    assert!(
        !build(dir.path(), None),
        "nothing changed: the build script must not rerun"
    );

    touch(&dir.path().join("kernels/k.mlir"));
    assert!(
        build(dir.path(), None),
        "a changed kernel file reruns the build script"
    );
    assert!(!build(dir.path(), None));

    touch(&dir.path().join("lib/helper.bc"));
    assert!(
        build(dir.path(), None),
        "a changed linked bitcode file reruns the build script"
    );
    assert!(!build(dir.path(), None));

    assert!(
        build(dir.path(), Some("/opt/another-cuda")),
        "a changed toolkit variable reruns the build script"
    );
    assert!(!build(dir.path(), Some("/opt/another-cuda")));

    touch(&dir.path().join("src/main.rs"));
    assert!(
        !build(dir.path(), Some("/opt/another-cuda")),
        "an unrelated source file does not rerun it"
    );
}
