//! `gpu-build`: the compiler from the command line (feature `cli`).
//!
//! - `compile`: kernel files and targets in, objects and a manifest out — what `mlir-opt
//!   --gpu-module-to-binary` does, with gpu-build's diagnostics; the same bytes a build script
//!   writes.
//! - `inspect`: a manifest, an `OUT_DIR` or one object: modules, kernels with their launch
//!   functions, objects, and each kernel's resource usage as the object records it.
//! - `prebuild`: a crate's prebuilt folder, so it builds for users without LLVM.
//! - `cache`: the object cache's statistics per store, a check of its entries, emptying it.
//! - `run`: a whole MLIR program (host code and kernels) executed on a GPU or the host, as
//!   `mlir-runner` does, with gpu-build's compiler and gpu-embed's runtime.

mod cache;
mod inspect;
mod resources;
mod run;

use clap::{Parser, Subcommand};
use gpu_build::{Build, CacheSetting, Vendor};
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "gpu-build",
    version,
    about = "Compile MLIR / LLVM IR GPU kernels to PTX, cubin, hsaco and host objects, and inspect what was built"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

/// What `gpu-build compile` takes.
#[derive(clap::Args)]
struct CompileArgs {
    /// Kernel files: `.mlir`, `.ll` or `.bc`.
    #[arg(required = true)]
    files: Vec<PathBuf>,
    /// A target: `nvptx`, `nvptx:sm_80,sm_90`, `amdgpu:gfx90a`, `host`. Repeatable; none
    /// means each gpu.module's own target attributes.
    #[arg(short, long = "target", value_name = "VENDOR[:CHIPS]")]
    targets: Vec<String>,
    /// A target for one file on top of the `--target` ones: `kernels/vadd.mlir=vulkan`, as
    /// an `include_gpu_binary!` call names targets for its own file. Repeatable.
    #[arg(short = 'T', long = "file-target", value_name = "FILE=VENDOR[:CHIPS]")]
    file_targets: Vec<String>,
    /// The output directory (what `OUT_DIR` is to a build script).
    #[arg(short, long, value_name = "DIR")]
    out: PathBuf,
    /// Override every target's optimization level (0-3).
    #[arg(short = 'O', long = "opt-level", value_name = "N")]
    opt_level: Option<u8>,
    /// The crate the host objects are for (their symbols and library are named after it);
    /// use the crate's name to get exactly its build script's objects.
    #[arg(long, value_name = "NAME", default_value = "gpu-build")]
    crate_name: String,
    /// Relative kernel and `link` paths are relative to this (default: the current one).
    #[arg(long, value_name = "DIR")]
    base_dir: Option<PathBuf>,
    /// Do not use the object cache.
    #[arg(long)]
    no_cache: bool,
}

#[derive(Subcommand)]
enum Command {
    /// Compile kernel files into objects and a manifest (`<out>/gpu-build/manifest.json`).
    Compile(CompileArgs),
    /// Describe a manifest, an OUT_DIR or one object (.ptx, .cubin, .hsaco, .o).
    Inspect {
        /// `manifest.json`, a directory holding `gpu-build/manifest.json`, or an object file.
        path: PathBuf,
    },
    /// The object cache: statistics per store, a check of every entry, emptying it.
    Cache {
        #[command(subcommand)]
        action: cache::CacheAction,
        /// The cache directory (default: GPU_BUILD_CACHE_DIR, else the cargo target
        /// directory's `gpu-build-cache`).
        #[arg(long, global = true, value_name = "DIR")]
        dir: Option<PathBuf>,
    },
    /// Write a crate's prebuilt folder (`gpu-prebuilt/`) from its `include_gpu_binary!` calls.
    Prebuild {
        /// The crate's directory (holding Cargo.toml).
        #[arg(default_value = ".")]
        crate_dir: PathBuf,
    },
    /// Run an MLIR program with GPU kernels (as `mlir-runner --entry-point-result=void` does):
    /// its kernels compiled for the device, its host code JIT-compiled, `main` called.
    ///
    /// On a Vulkan device, memrefs in host memory (`memref.alloc`, `gpu.alloc host_shared`)
    /// passed to kernels are copied into device memory for each launch and back after it, as
    /// upstream's Vulkan runner does. Environment: GPU_EMBED_VULKAN_VALIDATION=1 runs Vulkan
    /// under the Khronos validation layer, and any message it reports fails the run;
    /// GPU_MGPU_LAUNCH_TIMES=1 prints each launch's times as upstream's Vulkan runtime does.
    Run {
        /// The program: `.mlir` with `gpu.launch` or `gpu.module` + `gpu.launch_func`.
        file: PathBuf,
        /// The device that runs the kernels.
        #[arg(long, value_enum, default_value = "default")]
        device: run::DeviceChoice,
        /// The function to call (no arguments, no results).
        #[arg(long, default_value = "main")]
        entry_point: String,
        /// More shared libraries the program calls into (the runner utilities are loaded).
        #[arg(long = "shared-libs", value_name = "LIB")]
        shared_libs: Vec<PathBuf>,
        /// Optimization level of the kernels and the host code (0-3).
        #[arg(short = 'O', long = "opt-level", value_name = "N", default_value_t = 2)]
        opt_level: u8,
        /// Write the lowered program (LLVM dialect, kernels embedded) to this file instead of
        /// running it: `mlir-runner` runs it with `libgpu_mgpu.so` as the runtime (not for
        /// Vulkan devices, whose runtime needs the kernels' binding tables too).
        #[arg(long, value_name = "FILE")]
        emit_mlir: Option<PathBuf>,
        /// Check every memory access of the kernels (host device only): an access outside the
        /// memory its pointer may reach (or its memref dimension), misaligned, or racing in
        /// workgroup memory is reported with its file:line:col, block and thread, not made, and
        /// fails the run. `--check=all`, or a list of `leaks`, `uninitialized` and `races`
        /// beside `default`, adds the checks `GPU_EMBED_CHECK` names the same way.
        #[arg(long, value_name = "CHECKS", num_args = 0..=1, require_equals = true,
              default_missing_value = "default")]
        check: Option<String>,
        /// With `--device all`: how far apart, relative to the larger, two numbers of the
        /// outputs may be and still agree.
        #[arg(long, value_name = "REL", default_value_t = 1e-5)]
        tolerance: f64,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Compile(args) => compile(&args),
        Command::Inspect { path } => inspect::inspect(&path).map(|text| print!("{text}")),
        Command::Prebuild { crate_dir } => prebuild(&crate_dir),
        Command::Cache { action, dir } => cache::cache(&action, dir),
        Command::Run {
            file,
            device,
            entry_point,
            shared_libs,
            opt_level,
            emit_mlir,
            check,
            tolerance,
        } => run::run(&run::RunRequest {
            file: &file,
            device,
            entry_point: &entry_point,
            shared_libs: &shared_libs,
            opt_level,
            emit_mlir: emit_mlir.as_deref(),
            checks: check.as_deref(),
            tolerance,
        }),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error}");
            ExitCode::FAILURE
        }
    }
}

/// `nvptx:sm_80,sm_90` → (Nvptx, [sm_80, sm_90]).
fn parse_target(text: &str) -> Result<(Vendor, Vec<String>), String> {
    let (vendor, chips) = text.split_once(':').unwrap_or((text, ""));
    // The names `include_gpu_binary!` takes, and nothing else: one spelling everywhere.
    let Some(vendor) = Vendor::from_name(vendor) else {
        let names = Vendor::ALL.map(Vendor::name);
        let (last, others) = names.split_last().unwrap_or((&"", &[]));
        let meant = Vendor::from_alias(vendor)
            .map(|meant| format!(" (did you mean `{meant}`?)"))
            .unwrap_or_default();
        return Err(format!(
            "unknown target vendor `{vendor}` in `--target {text}`{meant}; use {} \
             or {last} (with chips: `nvptx:sm_80,sm_90`)",
            others.join(", ")
        ));
    };
    let chips = chips
        .split(',')
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .map(String::from)
        .collect();
    Ok((vendor, chips))
}

fn compile(args: &CompileArgs) -> Result<(), String> {
    let CompileArgs {
        files,
        targets,
        file_targets,
        out,
        opt_level,
        crate_name,
        base_dir,
        no_cache,
    } = args;
    let mut build = Build::new();
    build
        .out_dir(out)
        .quiet(true)
        .crate_name(crate_name)
        .host_target(&host_target()?)
        .progress(std::io::stderr().is_terminal())
        .base_dir(base_dir.clone().unwrap_or_else(|| PathBuf::from(".")));
    if *no_cache {
        build.cache(CacheSetting::Off);
    }
    let targets: Vec<(Vendor, Vec<String>)> = targets
        .iter()
        .map(|target| parse_target(target))
        .collect::<Result<_, _>>()?;
    let mut own: Vec<(PathBuf, (Vendor, Vec<String>))> = Vec::new();
    for entry in file_targets {
        let (file, target) = entry.split_once('=').ok_or_else(|| {
            format!("--file-target `{entry}`: expected FILE=VENDOR[:CHIPS], e.g. kernels/vadd.mlir=vulkan")
        })?;
        let file = PathBuf::from(file);
        if !files.contains(&file) {
            return Err(format!(
                "--file-target `{entry}`: `{}` is not one of the files to compile",
                file.display()
            ));
        }
        own.push((file, parse_target(target)?));
    }
    for file in files {
        let extra: Vec<&(Vendor, Vec<String>)> = own
            .iter()
            .filter(|(f, _)| f == file)
            .map(|(_, t)| t)
            .collect();
        if extra.is_empty() {
            build.kernel(file);
            continue;
        }
        let chips: Vec<Vec<&str>> = targets
            .iter()
            .chain(extra.iter().copied())
            .map(|(_, chips)| chips.iter().map(String::as_str).collect())
            .collect();
        let requests: Vec<(Vendor, &[&str])> = targets
            .iter()
            .chain(extra.iter().copied())
            .zip(&chips)
            .map(|((vendor, _), chips)| (*vendor, chips.as_slice()))
            .collect();
        build.kernel_for(file, &requests);
    }
    for (vendor, chips) in &targets {
        let chips: Vec<&str> = chips.iter().map(String::as_str).collect();
        build.target(*vendor, &chips);
    }
    if let Some(level) = opt_level {
        build.opt_level(*level);
    }
    let report = build.compile().map_err(|e| e.to_string())?;
    for warning in &report.warnings {
        eprintln!("warning: {warning}");
    }
    eprintln!(
        "wrote {} objects of {} gpu.modules and {} ({} compiled, {} from the cache)",
        report.manifest.objects().count(),
        report.manifest.modules.len(),
        report.manifest_path.display(),
        report.compiled,
        report.cache_hits
    );
    Ok(())
}

fn prebuild(crate_dir: &Path) -> Result<(), String> {
    let manifest = crate_dir.join("Cargo.toml");
    let text = std::fs::read_to_string(&manifest)
        .map_err(|e| format!("cannot read {}: {e}", manifest.display()))?;
    let table: toml::Table = text
        .parse()
        .map_err(|e| format!("{}: {e}", manifest.display()))?;
    let name = table
        .get("package")
        .and_then(|p| p.get("name"))
        .and_then(|n| n.as_str())
        .ok_or_else(|| format!("{} has no [package] name", manifest.display()))?;
    let out = tempfile::tempdir().map_err(|e| format!("cannot create a scratch directory: {e}"))?;
    let mut build = Build::for_crate(crate_dir).map_err(|e| e.to_string())?;
    build
        .out_dir(out.path())
        .crate_name(name)
        .host_target(&host_target()?)
        .progress(std::io::stderr().is_terminal())
        .quiet(true)
        .write_prebuilt(true);
    let report = build.compile().map_err(|e| e.to_string())?;
    for warning in &report.warnings {
        eprintln!("warning: {warning}");
    }
    Ok(())
}

/// The triple cargo builds for natively: `$TARGET`, else the `host:` line of `rustc -vV`.
fn host_target() -> Result<String, String> {
    if let Some(target) = std::env::var_os("TARGET") {
        return Ok(target.to_string_lossy().into_owned());
    }
    let rustc = std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    let output = std::process::Command::new(&rustc)
        .arg("-vV")
        .output()
        .map_err(|e| format!("cannot run rustc -vV to learn the host triple: {e}; set TARGET"))?;
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .find_map(|line| line.strip_prefix("host: ").map(String::from))
        .ok_or_else(|| "rustc -vV printed no host triple; set TARGET".to_string())
}
