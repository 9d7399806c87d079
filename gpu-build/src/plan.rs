//! Planning: each kernel file through the front end, and the targets each of its gpu.modules is
//! built for (the caller's requests, the file's own target attributes, the chip overrides),
//! validated before anything is compiled.

use crate::cargo::CargoOutput;
use crate::error::{Error, ErrorKind, Result};
use crate::frontend::mlir::{self, Mlir};
use crate::frontend::source::SourceFile;
use crate::frontend::{llvm_ir, GpuModuleDesc, InputKind};
use crate::llvm_errors::Compiling;
use crate::lower::check_vendor_ops;
pub(crate) use crate::request::TargetRequest;
use crate::targets::interface::DumpRequest;
use crate::targets::interface::{Question, TargetSpec};
use crate::targets::{all, target};
use crate::timing::{Stage, Timings};
use gpu_manifest::Vendor;
use inkwell::context::Context as LlvmContext;
use std::path::{Path, PathBuf};

/// What every stage of one build reads: resolved once from the request and the environment.
pub(crate) struct BuildContext<'a> {
    pub opt_level: Option<u8>,
    /// Chips that replace every module's chips for a vendor (`GPU_BUILD_NVPTX_CHIPS`, ...).
    pub chip_overrides: &'a [(Vendor, Vec<String>)],
    /// Relative `link` paths are resolved against this (the crate's directory).
    pub base_dir: &'a Path,
    pub dump: DumpRequest,
    /// The crate being built (`CARGO_PKG_NAME`): host symbols and libraries are named after it.
    pub crate_name: &'a str,
    /// Where external tools may write temporary files (inside `OUT_DIR`).
    pub scratch: &'a Path,
    pub timings: &'a Timings,
    /// The host objects' target triple, when not cargo's `TARGET` (or LLVM's default).
    pub host_triple: Option<&'a str>,
    /// The CPU features host objects are compiled with when their target names none: the
    /// build machine's, where rustc compiles the crate with `-C target-cpu=native`
    /// (`compile::host_features`); none (the triple's baseline, as rustc's default) otherwise.
    pub host_features: Option<&'a str>,
    /// Host objects that check every memory access (`Build::checked`, `GPU_EMBED_CHECK=1`).
    pub checked: bool,
    /// Print a line per (module, target) done, on stderr.
    pub progress: bool,
}

/// The targets one gpu.module is built for: the caller's requests (chips named there replace the
/// file's, other parameters are kept), or the file's own when the caller asked for nothing; then
/// the chip overrides.
pub(crate) fn resolve_targets(
    file_targets: &[TargetSpec],
    requests: &[TargetRequest],
    options: &BuildContext,
) -> Vec<TargetSpec> {
    let mut specs: Vec<TargetSpec> = Vec::new();
    if requests.is_empty() {
        specs.extend(file_targets.iter().cloned());
    }
    for request in requests {
        let own: Vec<&TargetSpec> = file_targets
            .iter()
            .filter(|t| t.vendor == request.vendor)
            .collect();
        if request.chips.is_empty() {
            match (own.is_empty(), request.fallback.is_empty()) {
                (false, _) => specs.extend(own.into_iter().cloned()),
                (true, true) => specs.push(default_spec(request.vendor, options)),
                (true, false) => {
                    specs.extend(
                        request
                            .fallback
                            .iter()
                            .map(|chip| TargetSpec::new(request.vendor, chip.clone())),
                    );
                }
            }
        } else {
            let template = own
                .first()
                .map(|t| (*t).clone())
                .unwrap_or_else(|| default_spec(request.vendor, options));
            for chip in &request.chips {
                specs.push(TargetSpec {
                    chip: chip.clone(),
                    ..template.clone()
                });
            }
        }
    }
    for (vendor, chips) in options.chip_overrides {
        if let Some(template) = specs.iter().find(|s| s.vendor == *vendor).cloned() {
            specs.retain(|s| s.vendor != *vendor);
            specs.extend(chips.iter().map(|chip| TargetSpec {
                chip: chip.clone(),
                ..template.clone()
            }));
        }
    }
    if let Some(level) = options.opt_level {
        specs.iter_mut().for_each(|spec| spec.opt_level = level);
    }
    if let Some(features) = options.host_features {
        specs
            .iter_mut()
            .filter(|spec| {
                target(spec.vendor).description().chip_is_triple() && spec.features.is_empty()
            })
            .for_each(|spec| spec.features = features.to_string());
    }
    if options.checked {
        specs
            .iter_mut()
            .filter(|spec| target(spec.vendor).description().chip_is_triple())
            .for_each(|spec| spec.checked = true);
    }
    let mut unique: Vec<TargetSpec> = Vec::new();
    for spec in specs {
        if !unique.contains(&spec) {
            unique.push(spec);
        }
    }
    unique
}

/// A vendor's default target; one whose chip is a triple (the host) gets the build's host
/// triple when one was given.
fn default_spec(vendor: Vendor, options: &BuildContext) -> TargetSpec {
    match options.host_triple {
        Some(triple) if target(vendor).description().chip_is_triple() => {
            TargetSpec::new(vendor, triple)
        }
        _ => TargetSpec::default_for(vendor),
    }
}

/// One kernel file after the front end: its gpu.modules and the targets each is built for.
pub(crate) struct FilePlan {
    pub source: SourceFile,
    pub kind: InputKind,
    /// SHA-256 of the file's bytes (part of every cache key of its modules).
    pub digest: String,
    pub modules: Vec<ModulePlan>,
}

pub(crate) struct ModulePlan {
    /// Position among the file's gpu.modules, to find it again in a fresh parse.
    pub index: usize,
    pub desc: GpuModuleDesc,
    pub specs: Vec<TargetSpec>,
}

/// Runs the front end on one file and decides every module's targets.
pub(crate) fn plan_file(
    path: &Path,
    display: String,
    requests: &[TargetRequest],
    options: &BuildContext,
    cargo: &CargoOutput,
) -> Result<FilePlan> {
    cargo.read_file(path);
    let _compiling = Compiling::new(format!("{display}: reading the kernel file"));
    let kind = InputKind::of(path).ok_or_else(|| {
        Error::new(
            ErrorKind::InvalidInput,
            format!("{display}: unknown kind of kernel file; use `.mlir` (MLIR), `.ll` (LLVM IR) or `.bc` (LLVM bitcode)"),
        )
    })?;
    let source = SourceFile::read(path, display)?;
    let descs = options.timings.time(Stage::Parse, || match kind {
        InputKind::Mlir => describe_mlir(&source),
        InputKind::LlvmIr | InputKind::Bitcode => {
            describe_llvm_ir(&source, kind, requests).map(|desc| vec![desc])
        }
    })?;
    check_module_names(&descs)?;
    let modules = descs
        .into_iter()
        .enumerate()
        .map(|(index, desc)| {
            Ok(ModulePlan {
                index,
                specs: targets_for(&desc, requests, options, cargo)?,
                desc,
            })
        })
        .collect::<Result<_>>()?;
    Ok(FilePlan {
        digest: crate::util::sha256_hex(&source.bytes),
        source,
        kind,
        modules,
    })
}

fn describe_mlir(source: &SourceFile) -> Result<Vec<GpuModuleDesc>> {
    let mlir = Mlir::new();
    let module = mlir.parse(source)?;
    let descs = mlir::gpu_modules(&module)
        .into_iter()
        .map(|raw| mlir::describe(source, raw))
        .collect::<Result<Vec<_>>>()?;
    if descs.is_empty() {
        return Err(Error::new(
            ErrorKind::NothingToCompile,
            format!(
                "{}: error: no gpu.module in this file; put the kernels in one, e.g. \
                 `gpu.module @kernels {{ gpu.func @k(...) kernel {{ ... }} }}`",
                source.display
            ),
        ));
    }
    Ok(descs)
}

fn describe_llvm_ir(
    source: &SourceFile,
    kind: InputKind,
    requests: &[TargetRequest],
) -> Result<GpuModuleDesc> {
    let llvm = LlvmContext::create();
    let desc = llvm_ir::describe(source, &llvm_ir::parse(&llvm, source, kind)?)?;
    let vendor = desc.targets[0].vendor;
    if let Some(other) = requests.iter().find(|r| r.vendor != vendor) {
        return Err(Error::new(
            ErrorKind::Unsupported,
            format!(
                "{}: error: this LLVM IR is for {vendor} (triple `{}`) and cannot be compiled for {}; \
                 only MLIR input is lowered for several vendors",
                source.display, desc.targets[0].triple, other.vendor
            ),
        ));
    }
    Ok(desc)
}

/// The validated targets of one module, with link files checked and registered with cargo.
fn targets_for(
    desc: &GpuModuleDesc,
    requests: &[TargetRequest],
    options: &BuildContext,
    cargo: &CargoOutput,
) -> Result<Vec<TargetSpec>> {
    let specs = resolve_targets(&desc.targets, requests, options);
    let at = &desc.location;
    if specs.is_empty() {
        let examples: Vec<(Vendor, &str, &str)> = all()
            .filter_map(|t| {
                let description = t.description();
                Some((
                    description.vendor,
                    description.attribute_name?,
                    description.example_chip,
                ))
            })
            .collect();
        let attributes: Vec<String> = examples
            .iter()
            .map(|(_, attribute, chip)| format!("#{attribute}<chip = \"{chip}\">"))
            .collect();
        let build_rs = examples
            .first()
            .map(|(vendor, _, chip)| format!(" (`.target(Vendor::{vendor:?}, &[\"{chip}\"])`)"))
            .unwrap_or_default();
        return Err(Error::new(
            ErrorKind::InvalidTarget,
            format!(
                "{at}: error: gpu.module @{} has no targets; give it target attributes \
                 (`gpu.module @{} [{}]`) or ask for targets in build.rs{build_rs}",
                desc.name,
                desc.name,
                attributes.join(", ")
            ),
        ));
    }
    for spec in &specs {
        spec.validate()
            .map_err(|e| e.context(format!("{at}: error: gpu.module @{}", desc.name)))?;
        check_vendor_ops(desc, spec)?;
        for link in &spec.link {
            let path: PathBuf = options.base_dir.join(link);
            if !path.is_file() {
                return Err(Error::new(
                    ErrorKind::Io,
                    format!(
                        "{at}: error: gpu.module @{}: link file `{}` does not exist (looked at {}); \
                         `link` paths are relative to the crate's directory",
                        desc.name,
                        link.display(),
                        path.display()
                    ),
                ));
            }
        }
    }
    check_kernel_names(desc, &specs)?;
    desc.warnings
        .iter()
        .for_each(|warning| cargo.warn(warning.clone()));
    if desc.kernels.is_empty() {
        cargo.warn(format!(
            "{}: gpu.module @{} has no kernels (no `gpu.func ... kernel` and no `llvm.func` with \
             `gpu.kernel`), so nothing in it can be launched",
            desc.location, desc.name
        ));
    }
    Ok(specs)
}

/// One Rust module per gpu.module of a file: their names must differ.
fn check_module_names(descs: &[GpuModuleDesc]) -> Result<()> {
    for (index, desc) in descs.iter().enumerate() {
        let rust = gpu_manifest::call::module_name(&desc.name);
        if let Some(first) = descs[..index]
            .iter()
            .find(|d| gpu_manifest::call::module_name(&d.name) == rust)
        {
            return Err(Error::new(
                ErrorKind::InvalidInput,
                format!(
                    "{}: error: gpu.modules @{} and @{} would both become the Rust module `{rust}`; \
                     rename one of them",
                    desc.location, first.name, desc.name
                ),
            ));
        }
    }
    Ok(())
}

/// Kernel names every target and the launch stubs can use: names each target's backend can
/// emit (LLVM aborts the process on a symbol name PTX cannot hold), and distinct launch-function
/// names.
fn check_kernel_names(desc: &GpuModuleDesc, specs: &[TargetSpec]) -> Result<()> {
    for spec in specs {
        let target = target(spec.vendor);
        if let Some((kernel, rule)) = desc.kernels.iter().find_map(|k| {
            target
                .explain(Question::KernelName(&k.name))
                .map(|rule| (k, rule))
        }) {
            return Err(Error::new(
                ErrorKind::InvalidInput,
                format!(
                    "{}: error: kernel `{}` cannot be compiled for {} {}: {rule}; rename it, e.g. `@{}`",
                    kernel.location,
                    kernel.name,
                    spec.vendor,
                    spec.chip,
                    gpu_manifest::call::stub_name(&kernel.name)
                ),
            ));
        }
    }
    for (index, kernel) in desc.kernels.iter().enumerate() {
        let stub = gpu_manifest::call::stub_name(&kernel.name);
        if let Some(first) = desc.kernels[..index]
            .iter()
            .find(|k| gpu_manifest::call::stub_name(&k.name) == stub)
        {
            return Err(Error::new(
                ErrorKind::InvalidInput,
                format!(
                    "{}: error: kernels `{}` and `{}` of gpu.module @{} would both be launched \
                     by `{}::{stub}` (a Rust name has no `-` or `.`); rename one of them",
                    kernel.location,
                    first.name,
                    kernel.name,
                    desc.name,
                    gpu_manifest::call::module_name(&desc.name)
                ),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(vendor: Vendor, chip: &str, level: u8) -> TargetSpec {
        TargetSpec {
            opt_level: level,
            ..TargetSpec::new(vendor, chip)
        }
    }

    #[test]
    fn requests_replace_chips_but_keep_the_files_options() {
        let file = vec![
            spec(Vendor::Nvptx, "sm_80", 3),
            spec(Vendor::Amdgpu, "gfx90a", 1),
        ];
        let timings = Timings::default();
        let options = |opt_level, chip_overrides| BuildContext {
            host_features: None,
            checked: false,
            opt_level,
            chip_overrides,
            base_dir: Path::new("."),
            dump: DumpRequest::default(),
            crate_name: "test",
            scratch: Path::new("."),
            timings: &timings,
            host_triple: None,
            progress: false,
        };
        let ask = |requests: &[TargetRequest], opt_level| {
            resolve_targets(&file, requests, &options(opt_level, &[]))
        };
        let request = |vendor, chips: &[&str], fallback: &[&str]| TargetRequest {
            vendor,
            chips: chips.iter().map(|c| c.to_string()).collect(),
            fallback: fallback.iter().map(|c| c.to_string()).collect(),
        };
        assert_eq!(ask(&[], None), file);
        let only_nvptx = [request(Vendor::Nvptx, &["sm_90"], &[])];
        assert_eq!(
            ask(&only_nvptx, None),
            vec![spec(Vendor::Nvptx, "sm_90", 3)]
        );
        let bare_amdgpu = [request(Vendor::Amdgpu, &[], &["gfx942"])];
        assert_eq!(
            ask(&bare_amdgpu, Some(0)),
            vec![spec(Vendor::Amdgpu, "gfx90a", 0)]
        );
        let defaults = options(None, &[]);
        assert_eq!(
            resolve_targets(&[], &[request(Vendor::Amdgpu, &[], &[])], &defaults),
            vec![TargetSpec::default_for(Vendor::Amdgpu)]
        );
        assert_eq!(
            resolve_targets(&[], &bare_amdgpu, &defaults),
            vec![TargetSpec::new(Vendor::Amdgpu, "gfx942")]
        );
        let overrides = [(
            Vendor::Nvptx,
            vec!["sm_86".to_string(), "sm_89".to_string()],
        )];
        assert_eq!(
            resolve_targets(&file, &[], &options(None, &overrides)),
            vec![
                spec(Vendor::Amdgpu, "gfx90a", 1),
                spec(Vendor::Nvptx, "sm_86", 3),
                spec(Vendor::Nvptx, "sm_89", 3)
            ]
        );
        // The build machine's features reach host targets that name none, nothing else.
        let native = BuildContext {
            host_features: Some("+avx2,+fma"),
            checked: false,
            ..options(None, &[])
        };
        let own = TargetSpec {
            features: "+sse4.2".into(),
            ..spec(Vendor::Host, "x86_64-unknown-linux-gnu", 2)
        };
        let targets = [
            spec(Vendor::Host, "aarch64-unknown-linux-gnu", 2),
            own.clone(),
            spec(Vendor::Nvptx, "sm_80", 3),
        ];
        let resolved = resolve_targets(&targets, &[], &native);
        assert_eq!(resolved[0].features, "+avx2,+fma");
        assert_eq!(resolved[1], own);
        assert_eq!(resolved[2], spec(Vendor::Nvptx, "sm_80", 3));
    }
}
