//! The review's probes of gpu-embed's safe API, as a user would write them from the docs: a
//! fresh crate (`tests/probes/safe_api.rs`) built in release, where a size overflow wraps
//! instead of panicking, and run under valgrind's memcheck. Every probe ends in a correct
//! result or an `Err`: no crash, no panic, no access to memory the program no longer owns.

use crate::common::workspace;
use std::process::Command;

#[test]
fn safe_code_cannot_corrupt_memory_in_a_release_build() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    std::fs::create_dir_all(root.join("src")).unwrap();
    std::fs::write(
        root.join("Cargo.toml"),
        format!(
            "[package]\nname = \"safe-api-probes\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n\
             [dependencies]\ngpu-embed = {{ path = {:?} }}\nbytemuck = \"1\"\n\n[workspace]\n",
            workspace().join("gpu-embed").display().to_string()
        ),
    )
    .unwrap();
    std::fs::copy(workspace().join("Cargo.lock"), root.join("Cargo.lock")).unwrap();
    std::fs::copy(
        workspace().join("tests/probes/safe_api.rs"),
        root.join("src/main.rs"),
    )
    .unwrap();
    let build = crate::common::nested_cargo(root)
        .args(["build", "--release", "--offline", "--quiet"])
        .output()
        .unwrap();
    assert!(
        build.status.success(),
        "{}",
        String::from_utf8_lossy(&build.stderr)
    );
    let binary = crate::common::target_dir().join("release/safe-api-probes");
    let run = Command::new("valgrind")
        .args(["--error-exitcode=97", "--leak-check=no", "--quiet"])
        .arg(&binary)
        .output()
        .expect("valgrind (scripts/setup.sh installs Debian's `valgrind`)");
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert!(
        run.status.success(),
        "the probes crashed or memcheck found errors ({}):\n{stdout}\n{}",
        run.status,
        String::from_utf8_lossy(&run.stderr)
    );
    let outcome = |probe: &str| {
        stdout
            .lines()
            .find_map(|line| line.strip_prefix(&format!("{probe}: ")))
            .unwrap_or_else(|| panic!("no outcome for `{probe}`:\n{stdout}"))
            .to_string()
    };
    assert_eq!(outcome("leaked registration"), "ok ()");
    for probe in [
        "alloc usize::MAX bytes",
        "alloc usize::MAX - 255 bytes",
        "pinned usize::MAX bytes",
    ] {
        assert!(outcome(probe).starts_with("error OutOfMemory"), "{stdout}");
    }
    for line in stdout
        .lines()
        .filter(|l| l.starts_with("pinned 512-aligned type: "))
    {
        assert!(
            line.ends_with("ok 3") || line.contains("error InvalidArgument"),
            "{line}"
        );
    }
    assert_eq!(outcome("fill zero-sized elements"), "ok ()");
    assert_eq!(outcome("stream fill zero-sized elements"), "ok ()");
    assert!(outcome("empty view past the end").starts_with("error InvalidArgument"));
    assert!(outcome("overlapping device copy").starts_with("error InvalidArgument"));
    assert_eq!(outcome("leaked page-locked buffer"), "ok ()");
    assert_eq!(outcome("read after leak"), "ok 15");
}
