//! The build-script API: an explicit builder in the style of `cc::Build`.

use crate::cache_setting::{CacheSetting, RemoteSetting};
use crate::cargo::CargoOutput;
use crate::error::{Error, ErrorKind, Result};
use crate::report::{Paths, Report};
use crate::request::BuildRequest;
use crate::request::TargetRequest;
use gpu_manifest::Vendor;
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
///
/// Without the `compiler` feature, [`Build::compile`] compiles nothing: it installs the objects
/// the crate ships in its prebuilt folder ([`PREBUILT_DIR`](crate::PREBUILT_DIR)) after checking they were built from
/// the kernel files as they are now and for the same request.
#[derive(Debug, Clone, Default)]
pub struct Build {
    /// Kernel files, each with its own targets (from `include_gpu_binary!`) or `None` for the
    /// builder's.
    pub(crate) kernels: Vec<(PathBuf, Option<Vec<TargetRequest>>)>,
    pub(crate) requests: Vec<TargetRequest>,
    pub(crate) opt_level: Option<u8>,
    out_dir: Option<PathBuf>,
    base_dir: Option<PathBuf>,
    pub(crate) cache: CacheSetting,
    pub(crate) remote_cache: RemoteSetting,
    prebuilt_dir: Option<PathBuf>,
    write_prebuilt: bool,
    use_prebuilt: bool,
    crate_name: Option<String>,
    pub(crate) host_triple: Option<String>,
    pub(crate) checked: Option<bool>,
    pub(crate) progress: bool,
    quiet: bool,
}

impl Build {
    /// A build with no kernel files and no targets yet.
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

    /// Adds a kernel file built for its own targets instead of the build's (each `(vendor, chips)`
    /// as in [`Build::target`]): what one `include_gpu_binary!` call asks for.
    pub fn kernel_for(
        &mut self,
        path: impl AsRef<Path>,
        targets: &[(Vendor, &[&str])],
    ) -> &mut Build {
        let requests = targets
            .iter()
            .map(|(vendor, chips)| request(*vendor, chips))
            .collect();
        self.kernel_with_targets(path.as_ref().to_path_buf(), requests)
    }

    /// Builds for `vendor`. Named chips replace the file's own chips for that vendor (its other
    /// target parameters are kept); no chips means the file's own targets for that vendor, else
    /// the vendor's default chips ([`Vendor::default_chips`]: the same rule as a bare vendor in
    /// `include_gpu_binary!`). Without any `target` call, each gpu.module's own target attributes
    /// are used.
    pub fn target(&mut self, vendor: Vendor, chips: &[&str]) -> &mut Build {
        self.requests.push(request(vendor, chips));
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

    /// A shared store under the local object cache, which the builds of a team or a CI fleet
    /// fill and read: `redis://host:port[/db]`, `s3://bucket/prefix`, `webdav://host/path` (or
    /// `webdavs://`, `https://`), `file:///shared/path`. Overrides `GPU_BUILD_CACHE_URL`.
    /// Credentials come from the store's usual environment variables (see the crate docs).
    #[cfg(feature = "remote-cache")]
    pub fn remote_cache(&mut self, address: impl Into<String>) -> &mut Build {
        self.remote_cache.url = Some(address.into());
        self
    }

    /// Whether the shared store is only read, never written (builds of untrusted code, such as
    /// pull requests from forks). Overrides `GPU_BUILD_CACHE_READ_ONLY`.
    #[cfg(feature = "remote-cache")]
    pub fn remote_cache_read_only(&mut self, read_only: bool) -> &mut Build {
        self.remote_cache.read_only = Some(read_only);
        self
    }

    /// The public keys (`gpu-build-cache-public-key:…`, as `gpu-build cache keygen` prints
    /// them) of the writers whose entries the build takes from the shared store: with any, an
    /// entry that none of them signed is not used (it is compiled here), and a build without a
    /// signing key stores nothing there. Overrides `GPU_BUILD_CACHE_TRUSTED_KEYS`.
    #[cfg(feature = "remote-cache")]
    pub fn remote_cache_trusted_keys(&mut self, keys: &[&str]) -> &mut Build {
        self.remote_cache.trusted_keys = keys.iter().map(|key| key.to_string()).collect();
        self
    }

    /// The file holding the secret key the build signs its entries with (never the key itself
    /// in build code). Overrides `GPU_BUILD_CACHE_SIGNING_KEY` and
    /// `GPU_BUILD_CACHE_SIGNING_KEY_FILE`.
    #[cfg(feature = "remote-cache")]
    pub fn remote_cache_signing_key_file(&mut self, path: impl AsRef<Path>) -> &mut Build {
        self.remote_cache.signing_key_file = Some(path.as_ref().to_path_buf());
        self
    }

    /// Which object cache to use; by default `GPU_BUILD_CACHE_DIR`, else the cargo target
    /// directory's `gpu-build-cache` (see the crate docs), unless `GPU_BUILD_CACHE=off`.
    pub fn cache(&mut self, setting: CacheSetting) -> &mut Build {
        self.cache = setting;
        self
    }

    /// The folder of prebuilt objects: where a build without the compiler takes them from and
    /// where [`Build::write_prebuilt`] puts them. Defaults to `gpu-prebuilt` in the base
    /// directory.
    pub fn prebuilt_dir(&mut self, dir: impl AsRef<Path>) -> &mut Build {
        self.prebuilt_dir = Some(dir.as_ref().to_path_buf());
        self
    }

    /// After compiling, also write (or refresh) the prebuilt folder, so the crate can be
    /// published for users without LLVM; `GPU_BUILD_PREBUILD=1` in the environment does the same.
    pub fn write_prebuilt(&mut self, write: bool) -> &mut Build {
        self.write_prebuilt = write;
        self
    }

    /// Install the prebuilt objects even though the compiler is available: what a build
    /// without the `compiler` feature does (to test a crate's prebuilt folder).
    pub fn use_prebuilt(&mut self, use_prebuilt: bool) -> &mut Build {
        self.use_prebuilt = use_prebuilt;
        self
    }

    /// The crate the host objects are for (their symbols and library are named after it);
    /// defaults to `$CARGO_PKG_NAME`.
    pub fn crate_name(&mut self, name: &str) -> &mut Build {
        self.crate_name = Some(name.to_string());
        self
    }

    /// The target triple of host objects; defaults to cargo's `$TARGET` (LLVM's default triple
    /// outside a build script).
    pub fn host_target(&mut self, triple: &str) -> &mut Build {
        self.host_triple = Some(triple.to_string());
        self
    }

    /// Host objects that check every memory access of their kernels against the memory it may
    /// reach, and report an access outside it (at its line, with the block and thread) as a
    /// kernel fault instead of making it: the checked run for finding kernel bugs. Defaults to
    /// `GPU_EMBED_CHECK=1` in the build's environment (so `GPU_EMBED_CHECK=1 cargo test`
    /// rebuilds the kernels checked and runs them so, nothing else changed). Other targets'
    /// objects are the same either way.
    pub fn checked(&mut self, checked: bool) -> &mut Build {
        self.checked = Some(checked);
        self
    }

    /// The former name of [`checked`](Build::checked), kept so that build scripts written
    /// for it still build.
    #[deprecated(note = "renamed `checked`: `check` names validation elsewhere")]
    pub fn check(&mut self, check: bool) -> &mut Build {
        self.checked(check)
    }

    /// Print a line per (gpu.module, target) compiled, on stderr (for tools on a terminal).
    pub fn progress(&mut self, progress: bool) -> &mut Build {
        self.progress = progress;
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

    /// Compiles every kernel file for every target (or, without the compiler, installs the
    /// prebuilt objects); writes objects and the manifest.
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
        let paths = self.paths()?;
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
        #[cfg(feature = "compiler")]
        if !self.use_prebuilt {
            let report = crate::compile::compile_build(&self.inputs(), &paths, cargo)?;
            let asked = cargo.env("GPU_BUILD_PREBUILD").is_some_and(|v| v != "0");
            if self.write_prebuilt || asked {
                crate::prebuilt::write(&self.request(), &paths, cargo)?;
            }
            return Ok(report);
        }
        // Without the compiler, every build installs the prebuilt objects.
        crate::prebuilt::install(&self.request(), &paths, cargo)
    }

    fn paths(&self) -> Result<Paths> {
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
        Ok(Paths {
            prebuilt_dir: self
                .prebuilt_dir
                .clone()
                .unwrap_or_else(|| base_dir.join(crate::request::PREBUILT_DIR)),
            out_dir,
            base_dir,
            crate_name: match &self.crate_name {
                Some(name) => name.clone(),
                None => std::env::var("CARGO_PKG_NAME").unwrap_or_default(),
            },
        })
    }

    /// What this build asks for, independent of where it runs: what prebuilt objects must
    /// answer.
    pub(crate) fn request(&self) -> BuildRequest {
        BuildRequest {
            kernels: self
                .kernels
                .iter()
                .map(|(path, requests)| {
                    (path.to_string_lossy().replace('\\', "/"), requests.clone())
                })
                .collect(),
            requests: self.requests.clone(),
            opt_level: self.opt_level,
        }
    }

    /// The build as the compiler reads it: resolved once, immutable.
    #[cfg(feature = "compiler")]
    fn inputs(&self) -> crate::request::BuildInputs {
        crate::request::BuildInputs {
            kernels: self.kernels.clone(),
            requests: self.requests.clone(),
            opt_level: self.opt_level,
            host_triple: self.host_triple.clone(),
            checked: self.checked,
            cache: self.cache.clone(),
            remote_cache: self.remote_cache.clone(),
            progress: self.progress,
        }
    }
}

/// `vendor` with `chips`, or its default chips where the file names none of its own.
fn request(vendor: Vendor, chips: &[&str]) -> TargetRequest {
    TargetRequest {
        vendor,
        chips: chips.iter().map(|c| c.to_string()).collect(),
        fallback: vendor
            .default_chips()
            .iter()
            .map(|c| c.to_string())
            .collect(),
    }
}
