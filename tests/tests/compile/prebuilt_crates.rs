//! Shipping kernels to users without LLVM: a kernel library crate writes its prebuilt folder once
//! (with the compiler, `GPU_BUILD_PREBUILD=1 cargo build`), then depends on gpu-build with
//! `default-features = false`; an application using it builds with no LLVM or MLIR crate in its
//! dependency tree and launches the kernels on the host. Editing the kernel file without
//! refreshing the folder is an error that says how to refresh it.

use crate::common::packages::packages;
use crate::common::workspace;
use std::path::Path;

const LIBRARY: &str = r#"gpu_embed::include_gpu_binary!("kernels/vadd.mlir", targets = [host]);

/// `a + b`, element by element, by the vadd kernel on the host.
pub fn add(a: &[f32], b: &[f32]) -> gpu_embed::Result<Vec<f32>> {
    let device = gpu_embed::Device::host();
    let n = a.len();
    let da = gpu_embed::DeviceBuffer::from_slice(&device, a)?;
    let db = gpu_embed::DeviceBuffer::from_slice(&device, b)?;
    let dc = gpu_embed::DeviceBuffer::<f32>::alloc(&device, n)?;
    let config = gpu_embed::LaunchConfig::for_elements(n, 64);
    // SAFETY: the kernel writes c[i] for i < n, and every buffer holds n elements.
    unsafe { vadd::vadd(&device, &config, &da, &db, &dc, n)? };
    dc.to_vec()
}
"#;

const APP: &str = r#"fn main() {
    let a: Vec<f32> = (0..1000).map(|i| i as f32).collect();
    let b: Vec<f32> = (0..1000).map(|i| (2 * i) as f32 + 0.5).collect();
    let c = kernlib::add(&a, &b).expect("the host runs the kernel");
    assert!(c.iter().enumerate().all(|(i, x)| *x == (3 * i) as f32 + 0.5));
    println!("sum {}", c.iter().sum::<f32>());
}
"#;

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// kernlib's manifest, with gpu-build's compiler or without; `root`: kernlib is the crate built
/// (not a dependency of the application), so the packages' `[patch]` table is its to give.
fn library_manifest(compiler: bool, root: bool) -> String {
    let packages = packages();
    format!(
        "[package]\nname = \"kernlib\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n{}{}",
        packages.dependencies(if compiler {
            ""
        } else {
            ", default-features = false"
        }),
        if root {
            packages.patch() + "\n[workspace]\n"
        } else {
            String::new()
        }
    )
}

fn cargo(dir: &Path, args: &[&str]) -> (bool, String) {
    let output = crate::common::nested_cargo(dir)
        .args(args)
        .env_remove("GPU_BUILD_PREBUILD")
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    (output.status.success(), text)
}

#[test]
fn an_application_uses_prebuilt_kernels_without_llvm() {
    let dir = tempfile::tempdir().unwrap();
    let (library, app) = (dir.path().join("kernlib"), dir.path().join("app"));
    write(
        &library.join("kernels/vadd.mlir"),
        &std::fs::read_to_string(workspace().join("sample-project/kernels/vadd.mlir")).unwrap(),
    );
    write(
        &library.join("build.rs"),
        "fn main() { gpu_build::build(); }\n",
    );
    write(&library.join("src/lib.rs"), LIBRARY);
    write(&library.join("Cargo.toml"), &library_manifest(true, true));
    std::fs::copy(workspace().join("Cargo.lock"), library.join("Cargo.lock")).unwrap();

    // The kernel author, with the compiler: writes the prebuilt folder.
    let output = crate::common::nested_cargo(&library)
        .args(["build", "--offline"])
        .env("GPU_BUILD_PREBUILD", "1")
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(library.join("gpu-prebuilt/prebuilt.json").is_file());
    assert!(library
        .join("gpu-prebuilt/gpu-build/host/libgpu_host_kernels_kernlib.a")
        .is_file());

    // Published without the compiler; an application uses it.
    write(&library.join("Cargo.toml"), &library_manifest(false, false));
    write(
        &app.join("Cargo.toml"),
        &format!(
            "[package]\nname = \"app\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n\
             [dependencies]\nkernlib = {{ path = \"../kernlib\" }}\n{}\n[workspace]\n",
            packages().patch()
        ),
    );
    write(&app.join("src/main.rs"), APP);
    std::fs::copy(workspace().join("Cargo.lock"), app.join("Cargo.lock")).unwrap();

    let (ok, tree) = cargo(&app, &["tree", "--offline", "-e", "normal,build"]);
    assert!(ok, "{tree}");
    assert!(tree.contains("gpu-build v"), "{tree}");
    for compiler_crate in ["llvm-sys", "mlir-sys", "inkwell", "melior"] {
        assert!(
            !tree.contains(compiler_crate),
            "{compiler_crate} is in the application's tree:\n{tree}"
        );
    }

    let (ok, output) = cargo(&app, &["run", "--offline", "--quiet"]);
    assert!(ok, "{output}");
    assert!(output.contains("sum 1499000"), "{output}");

    // The kernel edited, the folder not refreshed: a clear error, no old code.
    let kernel = library.join("kernels/vadd.mlir");
    let text = std::fs::read_to_string(&kernel).unwrap();
    std::fs::write(&kernel, text.replace("arith.addf", "arith.subf")).unwrap();
    let (ok, output) = cargo(&app, &["build", "--offline"]);
    assert!(
        !ok,
        "a stale prebuilt object must fail the build:\n{output}"
    );
    assert!(
        output.contains("the kernel file kernels/vadd.mlir changed since they were built")
            && output.contains("GPU_BUILD_PREBUILD=1 cargo build"),
        "{output}"
    );
}
