//! The build-script API: an explicit builder in the style of `cc::Build`.

use crate::cache::{Cache, CacheSetting};
use crate::cargo::CargoOutput;
use crate::compile::compile_all;
use crate::error::{Error, ErrorKind, Result};
use crate::module_to_object::DumpRequest;
use crate::output::{manifest_path, start_build, write_manifest, write_outputs};
use crate::parallel::run_all;
use crate::plan::{plan_file, Options, TargetRequest};
use crate::target_spec::Vendor;
use crate::timing::{Stage, StageTimes, Timings};
use crate::toolkit::Toolkits;
use crate::up_to_date;
use gpu_manifest::Manifest;
use std::path::{Path, PathBuf};

/// Compiles GPU kernel files into device objects and a manifest in `OUT_DIR`.
///
/// ```no_run
/// // build.rs
/// gpu_build::Build::new()
///     .kernel("kernels/vadd.mlir")
///     .target(gpu_build::Vendor::Nvptx, &["sm_80", "sm_90"])
///     .target(gpu_build::Vendor::Amdgpu, &["gfx90a"])
///     .compile_or_exit();
/// ```
#[derive(Debug, Clone, Default)]
pub struct Build {
    /// Kernel files, each with its own targets (from `include_gpu_binary!`) or `None` for the
    /// builder's.
    kernels: Vec<(PathBuf, Option<Vec<TargetRequest>>)>,
    requests: Vec<TargetRequest>,
    opt_level: Option<u8>,
    out_dir: Option<PathBuf>,
    base_dir: Option<PathBuf>,
    cache: CacheSetting,
    quiet: bool,
}

/// What a successful [`Build::compile`] produced.
#[derive(Debug, Clone)]
pub struct Report {
    pub manifest: Manifest,
    pub manifest_path: PathBuf,
    pub out_dir: PathBuf,
    /// Whether nothing the previous build into this `OUT_DIR` came from had changed, so its
    /// outputs were kept and nothing was compiled.
    pub reused: bool,
    /// (gpu.module, target) pairs compiled by this build.
    pub compiled: usize,
    /// (gpu.module, target) pairs taken from the object cache instead.
    pub cache_hits: usize,
    /// Where the time went, per stage, summed over threads.
    pub timings: StageTimes,
    /// Warnings also printed as `cargo::warning` lines.
    pub warnings: Vec<String>,
    /// `cargo::` lines for this build (rerun-if-changed, rerun-if-env-changed, warnings).
    pub cargo_directives: Vec<String>,
}

impl Build {
    pub fn new() -> Build {
        Build::default()
    }

    /// Adds a kernel file (`.mlir`, `.ll` or `.bc`), relative to the crate's directory.
    pub fn kernel(&mut self, path: impl AsRef<Path>) -> &mut Build {
        self.kernels.push((path.as_ref().to_path_buf(), None));
        self
    }

    /// Adds a kernel file with its own targets (what `include_gpu_binary!` asks for).
    pub(crate) fn kernel_with_targets(
        &mut self,
        path: PathBuf,
        requests: Vec<TargetRequest>,
    ) -> &mut Build {
        self.kernels.push((path, Some(requests)));
        self
    }

    /// Builds for `vendor`. Named chips replace the file's own chips for that vendor (its other
    /// target parameters are kept); no chips means the file's own targets for that vendor, or the
    /// default chip. Without any `target` call, each gpu.module's own target attributes are used.
    pub fn target(&mut self, vendor: Vendor, chips: &[&str]) -> &mut Build {
        self.requests.push(TargetRequest {
            vendor,
            chips: chips.iter().map(|c| c.to_string()).collect(),
            fallback: Vec::new(),
        });
        self
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.kernels.is_empty()
    }

    /// Overrides every target's optimization level (0..=3).
    pub fn opt_level(&mut self, level: u8) -> &mut Build {
        self.opt_level = Some(level);
        self
    }

    /// Where outputs go; defaults to `$OUT_DIR`. gpu-build owns `<dir>/gpu-build` and empties it
    /// at the start of every build.
    pub fn out_dir(&mut self, dir: impl AsRef<Path>) -> &mut Build {
        self.out_dir = Some(dir.as_ref().to_path_buf());
        self
    }

    /// What relative kernel and `link` paths are relative to; defaults to `$CARGO_MANIFEST_DIR`.
    pub fn base_dir(&mut self, dir: impl AsRef<Path>) -> &mut Build {
        self.base_dir = Some(dir.as_ref().to_path_buf());
        self
    }

    /// Which object cache to use; by default `GPU_BUILD_CACHE_DIR`, else the cargo target
    /// directory's `gpu-build-cache` (see the crate docs), unless `GPU_BUILD_CACHE=off`.
    pub fn cache(&mut self, setting: CacheSetting) -> &mut Build {
        self.cache = setting;
        self
    }

    /// Do not print `cargo::` lines (for tools and tests that call the builder outside cargo).
    pub fn quiet(&mut self, quiet: bool) -> &mut Build {
        self.quiet = quiet;
        self
    }

    /// Compiles everything, or prints the error the way cargo shows build-script failures and
    /// exits with status 1 (no panic, no backtrace).
    pub fn compile_or_exit(&self) -> Report {
        match self.compile() {
            Ok(report) => report,
            Err(error) => {
                eprintln!("error: {error}");
                std::process::exit(1);
            }
        }
    }

    /// Compiles every kernel file for every target; writes objects and the manifest.
    pub fn compile(&self) -> Result<Report> {
        let cargo = CargoOutput::default();
        let result = self.compile_with(&cargo);
        if !self.quiet {
            // Printed on failure too: the kernel files must rerun the build when fixed.
            for line in cargo.directives() {
                println!("{line}");
            }
        }
        result.map(|mut report| {
            report.warnings = cargo.warnings();
            report.cargo_directives = cargo.directives();
            report
        })
    }

    /// The report, without what `cargo` collected.
    fn compile_with(&self, cargo: &CargoOutput) -> Result<Report> {
        let out_dir = match &self.out_dir {
            Some(dir) => dir.clone(),
            None => PathBuf::from(std::env::var_os("OUT_DIR").ok_or_else(|| {
                Error::new(ErrorKind::Io, "OUT_DIR is not set; run gpu-build from a build script, or call `.out_dir(...)`")
            })?),
        };
        let base_dir = match &self.base_dir {
            Some(dir) => dir.clone(),
            None => std::env::var_os("CARGO_MANIFEST_DIR")
                .map(PathBuf::from)
                .unwrap_or_default(),
        };
        let crate_name = std::env::var("CARGO_PKG_NAME").unwrap_or_default();
        // Everything about this build that is not a file or an environment variable it reads.
        let settings = format!(
            "gpu-build {} {self:?} crate={crate_name} base={} target={}",
            env!("CARGO_PKG_VERSION"),
            base_dir.display(),
            crate::target_spec::host_triple()
        );
        let timings = Timings::default();
        let report = |manifest, reused, compiled, cache_hits, timings: &Timings| Report {
            manifest,
            manifest_path: manifest_path(&out_dir),
            out_dir: out_dir.clone(),
            reused,
            compiled,
            cache_hits,
            timings: timings.snapshot(),
            warnings: Vec::new(),
            cargo_directives: Vec::new(),
        };
        if let Some(manifest) = up_to_date::reuse(&out_dir, &settings, cargo) {
            return Ok(report(manifest, true, 0, 0, &timings));
        }
        let scratch = start_build(&out_dir)?;
        if self.kernels.is_empty() {
            return Err(Error::new(
                ErrorKind::NothingToCompile,
                "no kernel files given; add them with `.kernel(\"kernels/k.mlir\")`",
            ));
        }
        if let Some(level) = self.opt_level.filter(|level| *level > 3) {
            return Err(Error::new(
                ErrorKind::InvalidTarget,
                format!("optimization level {level} is out of range; use 0, 1, 2 or 3"),
            ));
        }
        let chip_overrides = chip_overrides(cargo);
        let options = Options {
            opt_level: self.opt_level,
            chip_overrides: &chip_overrides,
            base_dir: &base_dir,
            dump: dump_request(cargo)?,
            crate_name: &crate_name,
            scratch: scratch.path(),
            timings: &timings,
        };
        let cache = Cache::open(&self.cache, &out_dir, cargo)?;

        let plans = run_all(&self.kernels, |(path, requests)| {
            let requests = requests.as_deref().unwrap_or(&self.requests);
            plan_file(
                &base_dir.join(path),
                path.display().to_string(),
                requests,
                &options,
                cargo,
            )
        })?;
        let toolkits = Toolkits::new(cargo);
        let compilation = compile_all(&plans, &options, &toolkits, cache.as_ref(), cargo)?;

        let manifest = timings.time(Stage::Output, || {
            let manifest = write_outputs(&out_dir, compilation.modules, &crate_name, cargo)?;
            write_manifest(&out_dir, &manifest)?;
            Ok::<_, Error>(manifest)
        })?;
        drop(scratch);
        up_to_date::record(&out_dir, &settings, cargo)?;
        Ok(report(
            manifest,
            false,
            compilation.compiled,
            compilation.cache_hits,
            &timings,
        ))
    }
}

/// `GPU_BUILD_NVPTX_CHIPS=sm_80,sm_90` / `GPU_BUILD_AMDGPU_CHIPS=...`: chips that replace every
/// module's chips for that vendor (for CI and packagers).
fn chip_overrides(cargo: &CargoOutput) -> Vec<(Vendor, Vec<String>)> {
    [
        (Vendor::Nvptx, "GPU_BUILD_NVPTX_CHIPS"),
        (Vendor::Amdgpu, "GPU_BUILD_AMDGPU_CHIPS"),
    ]
    .into_iter()
    .filter_map(|(vendor, name)| {
        let value = cargo.env(name)?;
        let chips: Vec<String> = value
            .to_string_lossy()
            .split(',')
            .map(str::trim)
            .filter(|c| !c.is_empty())
            .map(String::from)
            .collect();
        (!chips.is_empty()).then_some((vendor, chips))
    })
    .collect()
}

fn dump_request(cargo: &CargoOutput) -> Result<DumpRequest> {
    let mut request = DumpRequest::default();
    let Some(value) = cargo.env("GPU_BUILD_DUMP") else {
        return Ok(request);
    };
    for item in value
        .to_string_lossy()
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
    {
        match item {
            "llvm" => request.llvm = true,
            "isa" => request.isa = true,
            "all" => request = DumpRequest { llvm: true, isa: true },
            other => {
                return Err(Error::new(
                    ErrorKind::InvalidInput,
                    format!("GPU_BUILD_DUMP: unknown item `{other}`; use a comma-separated list of `llvm`, `isa` or `all`"),
                ))
            }
        }
    }
    Ok(request)
}
