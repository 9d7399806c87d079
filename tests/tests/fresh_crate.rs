//! A fresh user crate with only `gpu_build::build()` in build.rs and one `include_gpu_binary!`
//! builds on a machine without a GPU, and runs: it prints what it embedded.

mod common;

use common::workspace;

#[test]
fn a_fresh_crate_builds_and_lists_its_embedded_objects() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    std::fs::create_dir_all(root.join("src")).unwrap();
    std::fs::create_dir_all(root.join("kernels")).unwrap();
    std::fs::write(
        root.join("Cargo.toml"),
        format!(
            "[package]\nname = \"fresh\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n\
             [dependencies]\ngpu-embed = {{ path = {:?} }}\n\n[build-dependencies]\ngpu-build = {{ path = {:?} }}\n\n[workspace]\n",
            workspace().join("gpu-embed").display().to_string(),
            workspace().join("gpu-build").display().to_string()
        ),
    )
    .unwrap();
    std::fs::copy(workspace().join("Cargo.lock"), root.join("Cargo.lock")).unwrap();
    std::fs::copy(
        workspace().join("sample-project/kernels/vadd.mlir"),
        root.join("kernels/vadd.mlir"),
    )
    .unwrap();
    std::fs::write(root.join("build.rs"), "fn main() { gpu_build::build(); }\n").unwrap();
    std::fs::write(
        root.join("src/main.rs"),
        r#"gpu_embed::include_gpu_binary!("kernels/vadd.mlir", targets = [nvptx, amdgpu]);

fn main() {
    for object in vadd::BINARY.objects() {
        println!("{} {} {} {}", object.vendor(), object.chip(), object.format(), object.bytes().len());
    }
    match gpu_embed::Device::default_gpu() {
        Ok(device) => println!("device: {}", device.name()),
        Err(error) => println!("no GPU: {error}"),
    }
}
"#,
    )
    .unwrap();
    let output = common::fixture_cargo(root)
        .args(["run", "--offline", "--quiet"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{}\n{stdout}",
        String::from_utf8_lossy(&output.stderr)
    );
    // The file's own targets: sm_80 (PTX and cubin) and gfx90a (hsaco).
    let lines: Vec<&str> = stdout.lines().collect();
    assert!(lines[0].starts_with("nvptx sm_80 isa "), "{stdout}");
    assert!(lines[1].starts_with("nvptx sm_80 bin "), "{stdout}");
    assert!(lines[2].starts_with("amdgpu gfx90a bin "), "{stdout}");
    // A GPU, or the reason there is none: no driver, or (with Debian's HIP runtime that
    // scripts/setup.sh installs) one that loads and finds no device.
    assert!(
        lines[3].starts_with("device: ")
            || lines[3].starts_with("no GPU: no GPU driver found")
            || lines[3].starts_with("no GPU: no GPU: libamdhip64.so"),
        "{stdout}"
    );
}
