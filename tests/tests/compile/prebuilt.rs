//! The prebuilt folder checked in process (the two-crate build without LLVM is
//! `tests/compile/prebuilt_crates.rs`): installing it gives the compiled outputs byte for byte; another
//! request, an edited kernel, a damaged file or a missing folder is an error that says what to do.

use crate::child::tree;
use crate::common::*;
use gpu_build::{Build, Vendor};
use std::path::Path;

fn build(crate_dir: &Path, out: &Path) -> Build {
    let mut build = build_in(out);
    build
        .base_dir(crate_dir)
        .kernel("kernels/vadd.mlir")
        .target(Vendor::Nvptx, &["sm_80"])
        .target(Vendor::Host, &[]);
    build
}

fn install_error(crate_dir: &Path, configure: impl FnOnce(&mut Build)) -> String {
    let out = tempfile::tempdir().unwrap();
    let mut build = build(crate_dir, out.path());
    build.use_prebuilt(true);
    configure(&mut build);
    let error = build
        .compile()
        .expect_err("the prebuilt objects must be refused");
    assert!(
        !out.path().join(gpu_manifest::MANIFEST_PATH).exists(),
        "a refused install left a manifest"
    );
    error.to_string()
}

#[test]
fn the_prebuilt_folder_installs_what_was_compiled_and_refuses_anything_stale() {
    let crate_dir = tempfile::tempdir().unwrap();
    let kernel = crate_dir.path().join("kernels/vadd.mlir");
    std::fs::create_dir_all(kernel.parent().unwrap()).unwrap();
    std::fs::copy(
        workspace().join("sample-project/kernels/vadd.mlir"),
        &kernel,
    )
    .unwrap();

    let missing = install_error(crate_dir.path(), |_| {});
    assert!(
        missing.contains("without its `compiler` feature") && missing.contains("prebuilt.json"),
        "{missing}"
    );

    let compiled = tempfile::tempdir().unwrap();
    let report = build(crate_dir.path(), compiled.path())
        .write_prebuilt(true)
        .compile()
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(!report.prebuilt);
    let folder = crate_dir.path().join(gpu_build::PREBUILT_DIR);
    assert!(folder.join("prebuilt.json").is_file());

    let installed = tempfile::tempdir().unwrap();
    let report = build(crate_dir.path(), installed.path())
        .use_prebuilt(true)
        .compile()
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(report.prebuilt && report.compiled == 0);
    let host_lib = "cargo::rustc-link-lib=static=gpu_host_kernels_";
    assert!(
        report
            .cargo_directives
            .iter()
            .any(|l| l.starts_with(host_lib)),
        "the host kernels' library is linked: {:?}",
        report.cargo_directives
    );
    // Byte for byte what the compiler wrote (scratch aside, which a build removes).
    let outputs = |dir: &Path| {
        tree(&dir.join("gpu-build"))
            .into_iter()
            .filter(|(path, _)| !path.starts_with("scratch"))
            .collect::<Vec<_>>()
    };
    assert_eq!(outputs(installed.path()), outputs(compiled.path()));

    // Another request.
    let other = install_error(crate_dir.path(), |b| {
        b.target(Vendor::Amdgpu, &["gfx90a"]);
    });
    assert!(other.contains("built for another request"), "{other}");

    // A damaged object.
    let record = std::fs::read_to_string(folder.join("prebuilt.json")).unwrap();
    let ptx = tree(&folder)
        .into_iter()
        .map(|(path, _)| path)
        .find(|path| path.extension().is_some_and(|e| e == "ptx"))
        .unwrap();
    let original = std::fs::read(folder.join(&ptx)).unwrap();
    std::fs::write(folder.join(&ptx), b"// edited by hand\n").unwrap();
    let damaged = install_error(crate_dir.path(), |_| {});
    assert!(damaged.contains("damaged or edited"), "{damaged}");
    std::fs::write(folder.join(&ptx), original).unwrap();
    assert_eq!(
        std::fs::read_to_string(folder.join("prebuilt.json")).unwrap(),
        record
    );

    // An edited kernel file.
    let text = std::fs::read_to_string(&kernel).unwrap();
    std::fs::write(&kernel, format!("// edited\n{text}")).unwrap();
    let edited = install_error(crate_dir.path(), |_| {});
    assert!(
        edited.contains("the kernel file kernels/vadd.mlir changed since they were built")
            && edited.contains("gpu-build prebuild"),
        "{edited}"
    );
}
