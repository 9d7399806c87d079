//! Records a digest of gpu-build's own sources (`GPU_BUILD_SOURCE_DIGEST`): part of every cache
//! key, so objects compiled by one version of this code are never reused by another, while the
//! debug and release build scripts (different binaries of the same code) share them.

use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};

fn files(dir: &Path, found: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            files(&path, found);
        } else {
            found.push(path);
        }
    }
}

fn main() {
    let root = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_default());
    let mut found = vec![root.join("Cargo.toml"), root.join("build.rs")];
    files(&root.join("src"), &mut found);
    found.sort();
    let mut hasher = Sha256::new();
    for path in &found {
        let relative = path.strip_prefix(&root).unwrap_or(path);
        hasher.update(relative.to_string_lossy().as_bytes());
        hasher.update([0]);
        hasher.update(std::fs::read(path).unwrap_or_default());
        hasher.update([0]);
    }
    let digest: String = hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    println!("cargo::rustc-env=GPU_BUILD_SOURCE_DIGEST={digest}");
    println!("cargo::rerun-if-changed=src");
    println!("cargo::rerun-if-changed=build.rs");
    println!("cargo::rerun-if-changed=Cargo.toml");
}
