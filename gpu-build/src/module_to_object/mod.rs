//! ModuleToObject: LLVM IR of one `gpu.module` for one target in, objects out. The shared steps
//! live here in upstream's order (target machine → triple and data layout → pre-link fixes → link
//! user bitcode and device libraries → post-link checks → optimize at O → ISA → binary); the
//! vendor modules supply the hooks.

mod amdgpu;
pub(crate) mod host;
pub(crate) mod link;
mod nvptx;

use crate::cargo::CargoOutput;
use crate::error::{Error, ErrorKind, Result};
use crate::target::{TargetSpec, Vendor};
use crate::toolkit::cuda::Cuda;
use crate::toolkit::rocm::Rocm;
use gpu_manifest::Format;
use inkwell::context::Context;
use inkwell::module::Module;
use inkwell::passes::PassBuilderOptions;
use inkwell::targets::{
    CodeModel, FileType, InitializationConfig, RelocMode, Target, TargetMachine, TargetTriple,
};
use inkwell::OptimizationLevel;
use std::path::Path;
use std::sync::Once;
use std::sync::OnceLock;

/// One output file of a compilation.
#[derive(Debug, Clone)]
pub(crate) struct Artifact {
    pub format: Format,
    /// File extension: `ptx`, `cubin`, `hsaco`.
    pub extension: &'static str,
    pub bytes: Vec<u8>,
}

/// Which intermediate results `GPU_BUILD_DUMP` asks for (`GPU_BUILD_DUMP=llvm,isa`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct DumpRequest {
    pub llvm: bool,
    pub isa: bool,
}

/// Intermediate text kept for `GPU_BUILD_DUMP`; only what was asked for is produced.
#[derive(Debug, Clone, Default)]
pub(crate) struct Dumps {
    /// LLVM IR after linking, before optimization.
    pub linked: Option<String>,
    pub optimized: Option<String>,
    pub isa: Option<String>,
}

/// What one compilation needs besides the module and its target.
pub(crate) struct ObjectSettings<'a> {
    /// Relative `link` paths are resolved against this.
    pub link_base: &'a Path,
    /// Prefix of the host entry points' symbols.
    pub host_symbol_prefix: &'a str,
    pub dump: DumpRequest,
}

#[derive(Debug, Clone)]
pub(crate) struct Compiled {
    pub artifacts: Vec<Artifact>,
    pub dumps: Dumps,
    /// For the host target: how the runtime calls the kernels.
    pub host: Option<gpu_manifest::HostEntries>,
}

/// The external toolkits, looked up the first time a target needs them (by any worker thread).
pub(crate) struct Toolkits<'a> {
    cargo: &'a CargoOutput,
    cuda: OnceLock<Cuda>,
    rocm: OnceLock<Rocm>,
}

impl<'a> Toolkits<'a> {
    pub fn new(cargo: &'a CargoOutput) -> Self {
        Toolkits {
            cargo,
            cuda: OnceLock::new(),
            rocm: OnceLock::new(),
        }
    }

    pub fn cuda(&self) -> &Cuda {
        self.cuda.get_or_init(|| Cuda::find(self.cargo))
    }

    pub fn rocm(&self) -> &Rocm {
        self.rocm.get_or_init(|| Rocm::find(self.cargo))
    }
}

/// Everything a vendor hook may need.
pub(crate) struct Job<'a, 'll> {
    pub spec: &'a TargetSpec,
    pub processor: &'a str,
    pub llvm: &'ll Context,
    pub toolkits: &'a Toolkits<'a>,
    pub cargo: &'a CargoOutput,
}

pub(crate) fn initialize_llvm() {
    static INIT: Once = Once::new();
    INIT.call_once(|| {
        let config = InitializationConfig::default();
        Target::initialize_nvptx(&config);
        Target::initialize_amd_gpu(&config);
        // The host target: the CPUs Rust's tier-1 Linux targets run on.
        Target::initialize_x86(&config);
        Target::initialize_aarch64(&config);
    });
}

/// LLVM's optimization level for `O`; upstream also generates code at that level.
fn opt_level(level: u8) -> OptimizationLevel {
    match level {
        0 => OptimizationLevel::None,
        1 => OptimizationLevel::Less,
        2 => OptimizationLevel::Default,
        _ => OptimizationLevel::Aggressive,
    }
}

pub(crate) fn target_machine(spec: &TargetSpec) -> Result<(TargetMachine, String)> {
    initialize_llvm();
    let (processor, features) = spec.processor_and_features()?;
    let triple = TargetTriple::create(&spec.triple);
    let target = Target::from_triple(&triple).map_err(|e| {
        Error::new(
            ErrorKind::InvalidTarget,
            format!("unknown target triple `{}`: {e}", spec.triple),
        )
    })?;
    let machine = target
        .create_target_machine(
            &triple,
            &processor,
            &features,
            opt_level(spec.opt_level),
            // Host objects may end up in a shared library; GPU code has no use for PIC.
            if spec.vendor == Vendor::Host {
                RelocMode::PIC
            } else {
                RelocMode::Default
            },
            CodeModel::Default,
        )
        .ok_or_else(|| {
            Error::new(
                ErrorKind::InvalidTarget,
                format!(
                    "LLVM cannot create a target machine for {} {processor} `{features}`",
                    spec.triple
                ),
            )
        })?;
    Ok((machine, processor))
}

/// Runs every step for one module and one target.
pub(crate) fn module_to_object<'ll>(
    module: Module<'ll>,
    llvm: &'ll Context,
    spec: &TargetSpec,
    settings: &ObjectSettings,
    toolkits: &Toolkits,
    cargo: &CargoOutput,
) -> Result<Compiled> {
    let host_symbol_prefix = settings.host_symbol_prefix;
    let (machine, processor) = target_machine(spec)?;
    module.set_triple(&machine.get_triple());
    module.set_data_layout(&machine.get_target_data().get_data_layout());
    let job = Job {
        spec,
        processor: &processor,
        llvm,
        toolkits,
        cargo,
    };

    let mut host = None;
    let mut allowed_undefined = Vec::new();
    match spec.vendor {
        Vendor::Nvptx => nvptx::pre_link(&job, &module),
        Vendor::Amdgpu => amdgpu::pre_link(&job, &module)?,
        Vendor::Host => {
            let retargeted = host::retarget(&job, &module, host_symbol_prefix)?;
            allowed_undefined = retargeted.libm_calls;
            host = Some(gpu_manifest::HostEntries {
                symbol_prefix: host_symbol_prefix.to_string(),
                uses_barrier: retargeted.uses_barrier,
            });
        }
    }

    let mut searched = vec!["the kernel file".to_string()];
    for path in &spec.link {
        let path = settings.link_base.join(path);
        let library = link::load_bitcode(llvm, &path, "link file", cargo)?;
        link::link_only_needed(&module, library, &path.display().to_string())?;
        searched.push(path.display().to_string());
    }
    let device_libraries = match spec.vendor {
        Vendor::Nvptx => nvptx::link_device_libraries(&job, &module)?,
        Vendor::Amdgpu => amdgpu::link_device_libraries(&job, &module)?,
        Vendor::Host => vec!["the C math library".to_string()],
    };
    searched.extend(device_libraries);
    link::drop_unused(&module, &machine)?;
    if spec.vendor == Vendor::Nvptx {
        nvptx::post_link(&job, &module);
    }

    let print = |wanted: bool| wanted.then(|| module.print_to_string().to_string());
    let mut dumps = Dumps {
        linked: print(settings.dump.llvm),
        ..Dumps::default()
    };
    optimize(&module, &machine, spec.opt_level)?;
    dumps.optimized = print(settings.dump.llvm);
    // After optimization: libdevice's `__nvvm_reflect` calls are folded away by then.
    link::check_resolved(
        &module,
        spec.vendor,
        &allowed_undefined,
        &searched.join(", "),
    )?;

    let artifacts = match spec.vendor {
        // PTX is both the ISA and the object the driver loads.
        Vendor::Nvptx => {
            let ptx = emit(&machine, &module, FileType::Assembly)?;
            if settings.dump.isa {
                dumps.isa = Some(String::from_utf8_lossy(&ptx).into_owned());
            }
            nvptx::isa_to_objects(&job, ptx)?
        }
        vendor => {
            // Code generation may rewrite the IR it runs on: the assembly dump gets a copy.
            if settings.dump.isa {
                let isa = emit(&machine, &module.clone(), FileType::Assembly)?;
                dumps.isa = Some(String::from_utf8_lossy(&isa).into_owned());
            }
            let object = emit(&machine, &module, FileType::Object)?;
            match vendor {
                Vendor::Amdgpu => amdgpu::object_to_hsaco(&job, object)?,
                _ => vec![Artifact {
                    format: Format::Bin,
                    extension: "o",
                    bytes: object,
                }],
            }
        }
    };
    Ok(Compiled {
        artifacts,
        dumps,
        host,
    })
}

/// LLVM's default module pipeline at `O`, configured as upstream's `makeOptimizingTransformer`.
fn optimize(module: &Module, machine: &TargetMachine, level: u8) -> Result<()> {
    let options = PassBuilderOptions::create();
    options.set_loop_unrolling(true);
    options.set_loop_interleaving(true);
    options.set_loop_vectorization(true);
    options.set_loop_slp_vectorization(true);
    module
        .run_passes(&format!("default<O{level}>"), machine, options)
        .map_err(|e| Error::new(ErrorKind::Codegen, format!("LLVM optimization failed: {e}")))?;
    module.verify().map_err(|e| {
        Error::new(
            ErrorKind::Codegen,
            format!("LLVM IR is invalid after optimization: {e}"),
        )
    })
}

pub(crate) fn emit(machine: &TargetMachine, module: &Module, kind: FileType) -> Result<Vec<u8>> {
    machine
        .write_to_memory_buffer(module, kind)
        .map(|buffer| buffer.as_slice().to_vec())
        .map_err(|e| {
            Error::new(
                ErrorKind::Codegen,
                format!("LLVM code generation failed: {e}"),
            )
        })
}
