//! Records a digest of gpu-build's own sources (`GPU_BUILD_SOURCE_DIGEST`): part of every cache
//! key, so objects compiled by one version of this code are never reused by another, while the
//! debug and release build scripts (different binaries of the same code) share them. Compiles
//! the C++ halves of bitcode linking (`src/targets/support/link.cpp`) and of the host target's
//! barrier fission, access checks and optimization pipeline (its pass library: every `.cpp` of
//! `src/targets/host/passes/`, read from the folder), what LLVM's C API lacks, against the LLVM
//! that llvm-sys links.

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

/// The host target's pass library: every `.cpp` of `HOST_PASSES`, sorted (the order does not
/// depend on the file system's), each and the folder watched, so a pass added there is compiled
/// without naming it here.
#[cfg(feature = "compiler")]
fn host_passes() -> Vec<PathBuf> {
    const HOST_PASSES: &str = "src/targets/host/passes";
    println!("cargo::rerun-if-changed={HOST_PASSES}");
    let entries = std::fs::read_dir(HOST_PASSES).unwrap_or_else(|error| {
        eprintln!("error: cannot read {HOST_PASSES}: {error}");
        std::process::exit(1);
    });
    let mut sources: Vec<PathBuf> = entries
        .flatten()
        .map(|entry| entry.path())
        .filter(|path| path.extension().is_some_and(|extension| extension == "cpp"))
        .collect();
    sources.sort();
    for source in &sources {
        println!("cargo::rerun-if-changed={}", source.display());
    }
    sources
}

/// `link.cpp` and the host's pass library ([`host_passes`]), with `llvm-config --cxxflags` of the
/// LLVM llvm-sys uses (`LLVM_SYS_221_PREFIX`, else PATH).
#[cfg(feature = "compiler")]
fn compile_llvm_shims() {
    println!("cargo::rerun-if-env-changed=LLVM_SYS_221_PREFIX");
    let llvm_config = std::env::var_os("LLVM_SYS_221_PREFIX")
        .map(|prefix| PathBuf::from(prefix).join("bin/llvm-config"))
        .unwrap_or_else(|| PathBuf::from("llvm-config-22"));
    let output = std::process::Command::new(&llvm_config)
        .arg("--cxxflags")
        .output();
    let flags = match output {
        Ok(output) if output.status.success() => {
            String::from_utf8_lossy(&output.stdout).into_owned()
        }
        _ => {
            eprintln!(
                "error: cannot run `{} --cxxflags`; install LLVM 22 (`apt install llvm-22-dev`) and \
                 set LLVM_SYS_221_PREFIX to it (e.g. /usr/lib/llvm-22)",
                llvm_config.display()
            );
            std::process::exit(1);
        }
    };
    // One translation unit that includes every source: LLVM's headers, most of each file's
    // compile, are parsed once (measured on 2 cores: 10.5 s against 48 s for the 15 files one
    // by one, on the critical path of a user's first build). The files share no file-scope
    // names, which this keeps true: a clash is a compile error here.
    let root = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_default());
    let sources =
        std::iter::once(PathBuf::from("src/targets/support/link.cpp")).chain(host_passes());
    let unit: String = sources
        .map(|source| format!("#include \"{}\"\n", root.join(source).display()))
        .collect();
    let out = PathBuf::from(std::env::var_os("OUT_DIR").unwrap_or_default());
    let unity = out.join("gpu_build_llvm_shims.cpp");
    if let Err(error) = std::fs::write(&unity, unit) {
        eprintln!("error: cannot write {}: {error}", unity.display());
        std::process::exit(1);
    }
    println!("cargo::rerun-if-changed=src/targets/support/link.cpp");
    let mut build = cc::Build::new();
    build
        .cpp(true)
        .file(&unity)
        .include(root.join("src/targets/host/passes"))
        .warnings(false);
    for flag in flags.split_whitespace() {
        build.flag(flag);
    }
    build.compile("gpu_build_llvm_shims");
}

fn main() {
    #[cfg(feature = "compiler")]
    compile_llvm_shims();
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
