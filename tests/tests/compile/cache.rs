//! The object cache: a hit gives exactly the outputs of a cold build; anything that can change an
//! object (target options, device libraries, toolkit versions, environment variables) misses;
//! damaged entries are rebuilt; builds sharing a cache at the same time both succeed; the default
//! location is shared by every profile of a cargo target directory.

use crate::child::{sample_project_kernels, tree, ChildBuild, Job};
use crate::common::*;
use gpu_build::{CacheSetting, Report, Vendor};
use std::path::{Path, PathBuf};
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(300);

/// The sample kernels for every target, into `out`, with `cache`.
fn sample_build(out: &Path, cache: CacheSetting) -> Report {
    let mut build = build_in(out);
    build
        .base_dir(workspace().join("sample-project"))
        .target(Vendor::Nvptx, &["sm_80", "sm_90"])
        .target(Vendor::Amdgpu, &["gfx90a", "gfx1100"])
        .target(Vendor::Host, &[])
        .cache(cache);
    for kernel in sample_project_kernels() {
        build.kernel(kernel);
    }
    build.compile().unwrap_or_else(|e| panic!("{e}"))
}

/// The cache's entries (`v1/`; its statistics beside them are not entries).
fn entries(cache: &Path) -> Vec<PathBuf> {
    let entries = cache.join("v1");
    tree(&entries)
        .into_iter()
        .map(|(path, _)| entries.join(path))
        .collect()
}

#[test]
fn a_hit_gives_the_same_bytes_as_a_cold_build() {
    let cache = tempfile::tempdir().unwrap();
    let at = || CacheSetting::At(cache.path().to_path_buf());
    let (cold, warm, uncached) = (
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
    );
    let first = sample_build(cold.path(), at());
    let pairs = first.compiled;
    assert!(
        pairs >= 5 * 5,
        "every sample module for five targets: {pairs}"
    );
    assert_eq!(first.cache_hits, 0);
    assert_eq!(entries(cache.path()).len(), pairs);

    let second = sample_build(warm.path(), at());
    assert_eq!((second.compiled, second.cache_hits), (0, pairs));
    assert_eq!(second.manifest, first.manifest);
    assert_eq!(second.warnings, first.warnings);
    assert_eq!(
        tree(&warm.path().join("gpu-build")),
        tree(&cold.path().join("gpu-build")),
        "a cache hit writes exactly what the compiler wrote"
    );
    assert_eq!(
        std::fs::read(warm.path().join(gpu_manifest::MANIFEST_PATH)).unwrap(),
        std::fs::read(cold.path().join(gpu_manifest::MANIFEST_PATH)).unwrap()
    );

    // And what a build without any cache writes.
    let third = sample_build(uncached.path(), CacheSetting::Off);
    assert_eq!((third.compiled, third.cache_hits), (pairs, 0));
    assert_eq!(
        tree(&uncached.path().join("gpu-build")),
        tree(&cold.path().join("gpu-build"))
    );
}

#[test]
fn damaged_entries_are_detected_and_rebuilt() {
    let cache = tempfile::tempdir().unwrap();
    let at = || CacheSetting::At(cache.path().to_path_buf());
    let (cold, again) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let first = sample_build(cold.path(), at());
    let stored = entries(cache.path());
    // Truncated, one byte changed, emptied: in turn over the entries.
    for (index, path) in stored.iter().enumerate() {
        let mut bytes = std::fs::read(path).unwrap();
        match index % 3 {
            0 => bytes.truncate(bytes.len() / 2),
            1 => {
                let middle = bytes.len() / 2;
                bytes[middle] ^= 0x01;
            }
            _ => bytes.clear(),
        }
        std::fs::write(path, bytes).unwrap();
    }
    let second = sample_build(again.path(), at());
    assert_eq!(
        (second.compiled, second.cache_hits),
        (first.compiled, 0),
        "every damaged entry is a miss"
    );
    assert_eq!(
        tree(&again.path().join("gpu-build")),
        tree(&cold.path().join("gpu-build"))
    );
    // Rewritten whole: the next build takes everything from the cache.
    let third = sample_build(tempfile::tempdir().unwrap().path(), at());
    assert_eq!((third.compiled, third.cache_hits), (0, first.compiled));
}

const MATH_KERNEL: &str = r#"gpu.module @k [#nvvm.target<chip = "sm_80">] {
  gpu.func @k(%p: memref<4xf32>) kernel {
    %c0 = arith.constant 0 : index
    %x = memref.load %p[%c0] : memref<4xf32>
    %y = math.exp %x : f32
    memref.store %y, %p[%c0] : memref<4xf32>
    gpu.return
  }
}
"#;

/// Builds `k.mlir` in a child process with `GPU_BUILD_CACHE_DIR` and `CUDA_HOME` set (and more
/// variables), into a fresh `OUT_DIR`; returns (compiled, cache hits).
fn child_build(dir: &Path, cache: &Path, cuda: &Path, env: &[(&str, &str)]) -> (usize, usize) {
    let (outside, out) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let mut child = ChildBuild::new(
        Job::FileTargets,
        dir,
        &["k.mlir".to_string()],
        out.path(),
        outside.path(),
    )
    .env("GPU_BUILD_CACHE_DIR", &cache.display().to_string())
    .env("CUDA_HOME", &cuda.display().to_string());
    for (name, value) in env {
        child = child.env(name, value);
    }
    let outcome = child.run(LIMIT);
    assert!(outcome.succeeded(), "{outcome:?}");
    let line = outcome
        .stderr
        .lines()
        .find_map(|l| l.strip_prefix("gpu-build child: compiled "))
        .unwrap_or_else(|| panic!("no report line: {}", outcome.stderr));
    let (compiled, hits) = line.split_once(", cache hits ").unwrap();
    (compiled.parse().unwrap(), hits.parse().unwrap())
}

/// A CUDA toolkit of our own: libdevice copied from the real one, and a ptxas that runs the real
/// one but reports `version` as its version.
fn fake_cuda(root: &Path, version: &str) {
    let real = ptxas();
    std::fs::create_dir_all(root.join("bin")).unwrap();
    std::fs::create_dir_all(root.join("nvvm/libdevice")).unwrap();
    let libdevice = real
        .parent()
        .unwrap()
        .parent()
        .unwrap()
        .join("nvvm/libdevice/libdevice.10.bc");
    std::fs::copy(&libdevice, root.join("nvvm/libdevice/libdevice.10.bc")).unwrap();
    let script = root.join("bin/ptxas");
    let text = format!(
        "#!/bin/sh\nif [ \"$1\" = --version ]; then echo 'ptxas {version}'; exit 0; fi\nexec {} \"$@\"\n",
        real.display()
    );
    // Written beside and renamed: a script being replaced while it runs must stay whole.
    std::fs::write(root.join("bin/ptxas.new"), text).unwrap();
    std::fs::set_permissions(
        root.join("bin/ptxas.new"),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    std::fs::rename(root.join("bin/ptxas.new"), script).unwrap();
}

#[test]
fn whatever_can_change_an_object_misses() {
    let (dir, cache, cuda) = (
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
    );
    std::fs::write(dir.path().join("k.mlir"), MATH_KERNEL).unwrap();
    fake_cuda(cuda.path(), "1");
    let build = |env: &[(&str, &str)]| child_build(dir.path(), cache.path(), cuda.path(), env);

    assert_eq!(build(&[]), (1, 0), "cold");
    assert_eq!(build(&[]), (0, 1), "nothing changed");

    // A target option (here through the chip override variable), and back.
    assert_eq!(build(&[("GPU_BUILD_NVPTX_CHIPS", "sm_90")]), (1, 0));
    assert_eq!(build(&[("GPU_BUILD_NVPTX_CHIPS", "sm_90")]), (0, 1));
    assert_eq!(build(&[]), (0, 1));
    // An environment variable that changes the outputs (an extra dump file).
    assert_eq!(build(&[("GPU_BUILD_DUMP", "llvm")]), (1, 0));
    assert_eq!(build(&[("GPU_BUILD_DUMP", "llvm")]), (0, 1));

    // The toolkit's version.
    fake_cuda(cuda.path(), "2");
    assert_eq!(build(&[]), (1, 0), "ptxas reports another version");
    assert_eq!(build(&[]), (0, 1));

    // The device library's bytes (the same library written again by LLVM 22's tools).
    let libdevice = cuda.path().join("nvvm/libdevice/libdevice.10.bc");
    let before = std::fs::read(&libdevice).unwrap();
    let text = cuda.path().join("libdevice.ll");
    for (tool, input, output) in [
        ("llvm-dis-22", &libdevice, &text),
        ("llvm-as-22", &text, &libdevice),
    ] {
        let status = std::process::Command::new(tool)
            .arg(input)
            .arg("-o")
            .arg(output)
            .status()
            .unwrap();
        assert!(status.success(), "{tool}");
    }
    assert_ne!(std::fs::read(&libdevice).unwrap(), before);
    assert_eq!(build(&[]), (1, 0), "libdevice changed");
    assert_eq!(build(&[]), (0, 1));

    // The kernel file.
    std::fs::write(
        dir.path().join("k.mlir"),
        format!("// edited\n{MATH_KERNEL}"),
    )
    .unwrap();
    assert_eq!(build(&[]), (1, 0), "the kernel file changed");

    // Off.
    assert_eq!(build(&[("GPU_BUILD_CACHE", "off")]), (1, 0));
}

#[test]
fn two_builds_sharing_a_cache_at_once_both_succeed() {
    let cache = tempfile::tempdir().unwrap();
    let base = workspace().join("sample-project");
    let kernels = sample_project_kernels();
    let outs: Vec<_> = (0..2).map(|_| tempfile::tempdir().unwrap()).collect();
    let outside = tempfile::tempdir().unwrap();
    let children: Vec<_> = outs
        .iter()
        .map(|out| {
            ChildBuild::new(Job::Samples, &base, &kernels, out.path(), outside.path())
                .env("GPU_BUILD_CACHE_DIR", &cache.path().display().to_string())
                .start()
        })
        .collect();
    for child in children {
        let output = child.wait_with_output().unwrap();
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    assert_eq!(
        tree(&outs[0].path().join("gpu-build")),
        tree(&outs[1].path().join("gpu-build"))
    );
    // What they stored is whole: a third build takes everything from it.
    let third = tempfile::tempdir().unwrap();
    let outcome = ChildBuild::new(Job::Samples, &base, &kernels, third.path(), outside.path())
        .env("GPU_BUILD_CACHE_DIR", &cache.path().display().to_string())
        .run(LIMIT);
    assert!(
        outcome
            .stderr
            .contains("gpu-build child: compiled 0, cache hits"),
        "{outcome:?}"
    );
    assert_eq!(
        tree(&third.path().join("gpu-build")),
        tree(&outs[0].path().join("gpu-build"))
    );
}

/// By default the cache sits in cargo's target directory, found from `OUT_DIR`: a release build
/// after a debug build (another `OUT_DIR` under the same target directory) compiles nothing.
#[test]
fn profiles_of_one_target_directory_share_the_default_cache() {
    let target = tempfile::tempdir().unwrap();
    std::fs::write(
        target.path().join("CACHEDIR.TAG"),
        "Signature: 8a477f597d28d172789f06886806bc55\n",
    )
    .unwrap();
    let debug = target.path().join("debug/build/app-0123456789abcdef/out");
    let release = target.path().join("release/build/app-fedcba9876543210/out");
    let kernel = workspace().join("sample-project/kernels/vadd.mlir");
    let build = |out: &Path| {
        std::fs::create_dir_all(out).unwrap();
        let mut build = build_in(out);
        build.kernel(&kernel).target(Vendor::Nvptx, &["sm_80"]);
        build.compile().unwrap_or_else(|e| panic!("{e}"))
    };
    if std::env::var_os("GPU_BUILD_CACHE_DIR").is_some()
        || std::env::var_os("GPU_BUILD_CACHE").is_some()
    {
        eprintln!(
            "skipped: GPU_BUILD_CACHE_DIR or GPU_BUILD_CACHE is set, so the default is not in use"
        );
        return;
    }
    let first = build(&debug);
    assert!(first.compiled > 0 && first.cache_hits == 0);
    assert!(target.path().join("gpu-build-cache").is_dir());
    let second = build(&release);
    assert_eq!((second.compiled, second.cache_hits), (0, first.compiled));
    assert_eq!(
        tree(&release.join("gpu-build")),
        tree(&debug.join("gpu-build"))
    );
}
