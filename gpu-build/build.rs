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

/// The `llvm-config` of the LLVM llvm-sys uses (`LLVM_SYS_221_PREFIX`, else PATH's
/// `llvm-config-22`).
#[cfg(feature = "compiler")]
fn llvm_config() -> PathBuf {
    println!("cargo::rerun-if-env-changed=LLVM_SYS_221_PREFIX");
    std::env::var_os("LLVM_SYS_221_PREFIX")
        .map(|prefix| PathBuf::from(prefix).join("bin/llvm-config"))
        .unwrap_or_else(|| PathBuf::from("llvm-config-22"))
}

/// What `llvm-config ARGUMENTS` prints, or `None` where it fails.
#[cfg(feature = "compiler")]
fn ask_llvm_config(llvm_config: &Path, arguments: &[&str]) -> Option<String> {
    let output = std::process::Command::new(llvm_config)
        .args(arguments)
        .stderr(std::process::Stdio::null())
        .output()
        .ok()?;
    output
        .status
        .success()
        .then(|| String::from_utf8_lossy(&output.stdout).trim().to_owned())
}

/// What `llvm-config ARGUMENTS` prints; where it fails, the build fails naming the fix.
#[cfg(feature = "compiler")]
fn require_llvm_config(llvm_config: &Path, arguments: &[&str]) -> String {
    ask_llvm_config(llvm_config, arguments).unwrap_or_else(|| {
        fail(&format!(
            "cannot run `{} {}`; install LLVM 22 (`apt install llvm-22-dev`) and set \
             LLVM_SYS_221_PREFIX to it (e.g. /usr/lib/llvm-22)",
            llvm_config.display(),
            arguments.join(" ")
        ))
    })
}

#[cfg(feature = "compiler")]
fn fail(message: &str) -> ! {
    eprintln!("error: {message}");
    std::process::exit(1);
}

/// LLVM as a shared library in every binary gpu-build is part of (a build script, the command,
/// the tests), MLIR linked in from its archives: such a binary is ~100 MB where static LLVM and
/// MLIR made it ~300 MB, and the bindings' rlibs no longer carry copies of LLVM's and MLIR's
/// archives (~800 MB of a first build's `target/`). llvm-sys takes `libLLVM` where there is one
/// (inkwell's `llvm22-1-prefer-dynamic`); mlir-sys links `-lMLIR -lMLIR-C` instead of bundling
/// MLIR's archives when `MLIR_SYS_LINK_SHARED=1`, which scripts/setup.sh records in cargo's
/// configuration. Both or neither: mlir-sys's static mode brings LLVM's archives too, and two
/// LLVMs in one process register their command-line options twice and abort, so a mix is
/// refused here with the fix.
///
/// `libMLIR.so` and `libMLIR-C.so` in this script's link folder (searched before LLVM's) are
/// linker scripts naming MLIR's archives, C API included (LLVM's installations ship no shared C
/// API; Debian's `libMLIR.so` exports 14 of its functions): what a binary uses of MLIR is linked
/// in, over the one shared LLVM. Measured against `libMLIR.so`: each process starts 10-17 ms
/// sooner (the loader resolves none of its symbols), the per-file compile benchmark went from
/// 0.55-0.6x to 0.45-0.5x mlir-opt-22's time; and a binary needs no library outside the loader's
/// path (Debian's `libLLVM.so.22.1` is in it; `libMLIR.so.22.1` is not, and cargo does not put
/// a build-dependency's link folders on the loader's path for every build script it runs). For
/// an LLVM whose libLLVM is elsewhere, the link folder holds a link to it, which cargo adds to
/// the loader's path where it does, and gpu-build's own binaries carry LLVM's library folder as
/// their run path.
#[cfg(feature = "compiler")]
fn link_llvm_shared(llvm_config: &Path, libdir: &Path) {
    println!("cargo::rerun-if-env-changed=MLIR_SYS_LINK_SHARED");
    let mlir_shared = std::env::var("MLIR_SYS_LINK_SHARED").is_ok_and(|value| value == "1");
    let llvm_shared = ask_llvm_config(llvm_config, &["--link-shared", "--libnames"]).is_some();
    let record = "in the [env] table of ~/.cargo/config.toml (scripts/setup.sh records it there)";
    match (llvm_shared, mlir_shared) {
        (false, false) => return,
        (true, false) => fail(&format!(
            "LLVM 22 in {} has a shared libLLVM, which llvm-sys links, but mlir-sys would link \
             MLIR's static libraries and with them a second LLVM; set MLIR_SYS_LINK_SHARED = \
             \"1\" {record}",
            libdir.display()
        )),
        (false, true) => fail(&format!(
            "MLIR_SYS_LINK_SHARED=1 links MLIR over a shared libLLVM, but LLVM 22 in {} has \
             none for llvm-sys to link; remove MLIR_SYS_LINK_SHARED to link both statically, or \
             install LLVM 22's shared library (`apt install libllvm22`)",
            libdir.display()
        )),
        (true, true) => {}
    }
    // The library folder's files by name.
    let names: Vec<String> = match std::fs::read_dir(libdir) {
        Ok(entries) => entries
            .flatten()
            .filter_map(|entry| entry.file_name().into_string().ok())
            .collect(),
        Err(error) => fail(&format!("cannot read {}: {error}", libdir.display())),
    };
    let mut archives: Vec<String> = names
        .iter()
        .filter(|name| name.starts_with("libMLIR") && name.ends_with(".a"))
        .map(|name| libdir.join(name).display().to_string())
        .collect();
    archives.sort();
    if !archives
        .iter()
        .any(|archive| archive.contains("libMLIRCAPIIR.a"))
    {
        fail(&format!(
            "MLIR_SYS_LINK_SHARED=1, but {} lacks MLIR's archives (libMLIR*.a, with the C API's \
             libMLIRCAPI*.a); install them (`apt install libmlir-22-dev`)",
            libdir.display()
        ));
    }
    let out = PathBuf::from(std::env::var_os("OUT_DIR").unwrap_or_default()).join("llvm-shared");
    let _ = std::fs::remove_dir_all(&out);
    if let Err(error) = std::fs::create_dir_all(&out) {
        fail(&format!("cannot create {}: {error}", out.display()));
    }
    let script = format!(
        "/* MLIR and its C API from their archives, over the shared libLLVM (gpu-build's build.rs). */\n\
         GROUP ( {} )\n",
        archives.join(" ")
    );
    for name in ["libMLIR.so", "libMLIR-C.so"] {
        if let Err(error) = std::fs::write(out.join(name), &script) {
            fail(&format!(
                "cannot write {}: {error}",
                out.join(name).display()
            ));
        }
    }
    for name in names.iter().filter(|name| name.starts_with("libLLVM.so.")) {
        let library = libdir.join(name);
        if let Err(error) = std::os::unix::fs::symlink(&library, out.join(name)) {
            fail(&format!(
                "cannot link {} into {}: {error}",
                library.display(),
                out.display()
            ));
        }
    }
    println!("cargo::rustc-link-search=native={}", out.display());
    println!("cargo::rustc-link-arg=-Wl,-rpath,{}", libdir.display());
}

/// `link.cpp` and the host's pass library ([`host_passes`]), with `llvm-config --cxxflags` of the
/// LLVM llvm-sys uses.
#[cfg(feature = "compiler")]
fn compile_llvm_shims(llvm_config: &Path, libdir: &Path) {
    let flags = require_llvm_config(llvm_config, &["--cxxflags"]);
    // One translation unit that includes every source: LLVM's headers, most of each file's
    // compile, are parsed once (measured on 2 cores: 10.5 s against 48 s for the 15 files one
    // by one, on the critical path of a user's first build). The files share no file-scope
    // names, which this keeps true: a clash is a compile error here.
    let root = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_default());
    let lld = lld_libraries(llvm_config, libdir);
    let sources = std::iter::once(PathBuf::from("src/targets/support/link.cpp"))
        .chain(lld.then(|| PathBuf::from(LLD_SHIM)))
        .chain(host_passes());
    let unit: String = sources
        .map(|source| format!("#include \"{}\"\n", root.join(source).display()))
        .collect();
    let out = PathBuf::from(std::env::var_os("OUT_DIR").unwrap_or_default());
    let unity = out.join("gpu_build_llvm_shims.cpp");
    if let Err(error) = std::fs::write(&unity, unit) {
        fail(&format!("cannot write {}: {error}", unity.display()));
    }
    println!("cargo::rerun-if-changed=src/targets/support/link.cpp");
    let mut build = cc::Build::new();
    // LLVM's own clang++ where installed with it (Debian's clang-22): 6.5 s against GCC's 10.8 s
    // for this unit on 2 cores, on the critical path of a first build; its C++ ABI is GCC's.
    // `CXX` still wins, as everywhere with `cc`.
    println!("cargo::rerun-if-env-changed=CXX");
    if std::env::var_os("CXX").is_none() {
        if let Some(bindir) = ask_llvm_config(llvm_config, &["--bindir"]) {
            let clang = Path::new(&bindir).join("clang++");
            if clang.exists() {
                build.compiler(clang).flag("-Wno-deprecated-declarations");
            }
        }
    }
    build
        .cpp(true)
        .file(&unity)
        .include(root.join("src/targets/host/passes"))
        .warnings(false);
    for flag in flags.split_whitespace() {
        build.flag(flag);
    }
    build.compile("gpu_build_llvm_shims");
    // After the shims, which call into them.
    if lld {
        println!("cargo::rustc-link-search=native={}", libdir.display());
        println!("cargo::rustc-link-lib=static=lldELF");
        println!("cargo::rustc-link-lib=static=lldCommon");
        // lld compresses sections itself (liblld-22-dev depends on both libraries' -dev).
        println!("cargo::rustc-link-lib=z");
        println!("cargo::rustc-link-lib=zstd");
        println!("cargo::rustc-cfg=gpu_build_lld");
    }
}

/// The in-process linker's half (src/shared_library/).
#[cfg(feature = "compiler")]
const LLD_SHIM: &str = "src/shared_library/lld.cpp";

/// Whether LLVM 22 has lld's ELF linker libraries and headers in `libdir` and beside it (Debian's
/// `liblld-22-dev`), which link hsaco and host modules in the process (src/shared_library/);
/// without them the `ld.lld` program does.
#[cfg(feature = "compiler")]
fn lld_libraries(llvm_config: &Path, libdir: &Path) -> bool {
    println!("cargo::rerun-if-changed={LLD_SHIM}");
    let Some(includedir) = ask_llvm_config(llvm_config, &["--includedir"]) else {
        return false;
    };
    ["liblldELF.a", "liblldCommon.a"]
        .iter()
        .all(|library| libdir.join(library).exists())
        && Path::new(&includedir).join("lld/Common/Driver.h").exists()
}

fn main() {
    println!("cargo::rustc-check-cfg=cfg(gpu_build_lld)");
    #[cfg(feature = "compiler")]
    {
        let llvm_config = llvm_config();
        let libdir = require_llvm_config(&llvm_config, &["--libdir"]);
        link_llvm_shared(&llvm_config, Path::new(&libdir));
        compile_llvm_shims(&llvm_config, Path::new(&libdir));
    }
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
