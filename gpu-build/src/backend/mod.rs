//! One backend per vendor: everything vendor-specific about turning a gpu.module into objects,
//! in the shape of MLIR's `TargetAttrInterface` / `SerializeGPUModuleBase`: target defaults, the
//! lowering pipeline and kernel attribute, the pre-link, device-library and post-link steps, what
//! may stay undefined, emission and file extensions, and what identifies the toolkit. The shared
//! pipeline (`lower`, `module_to_object`, `compile`, `output`) asks [`backend`] and never
//! matches on the vendor; adding a vendor (SPIR-V, XeVM) is one file here and one arm below.

mod amdgpu;
mod host;
mod host_assert;
mod host_fission;
mod host_mma;
mod host_optimize;
mod host_printf;
mod host_subgroup;
mod nvptx;

use crate::error::Result;
use crate::module_to_object::{Artifact, Dumps, Job};
use crate::target_spec::Vendor;
use crate::toolkit::Toolkits;
use inkwell::module::Module;
use inkwell::targets::{RelocMode, TargetMachine};

/// What the pre-link step tells the rest of ModuleToObject.
#[derive(Default)]
pub(crate) struct PreLinked {
    /// Symbols that may stay undefined (a later link provides them).
    pub allowed_undefined: Vec<String>,
    /// For the host target: how the runtime calls the kernels.
    pub host: Option<gpu_manifest::HostEntries>,
}

pub(crate) trait Backend: Sync {
    /// The LLVM target triple for `chip` (the host's chip is its triple).
    fn triple(&self, chip: &str) -> String;
    /// The chip a target without one gets.
    fn default_chip(&self) -> String;
    /// Target features a target without any gets.
    fn default_features(&self) -> &'static str {
        ""
    }
    /// The code object ABI a target without one gets (AMDGPU only).
    fn default_abi(&self) -> &'static str {
        ""
    }

    /// Why a kernel cannot have this name on this vendor, if it cannot.
    fn kernel_name_rule(&self, _name: &str) -> Option<&'static str> {
        None
    }

    /// The MLIR passes that lower the gpu dialect (and the vendor's own dialect) to this
    /// vendor's (the rest of the pipeline is shared, in `lower`).
    fn lowering_pass(&self, processor: &str) -> String;

    /// Passes for the vendor's own high-level dialect, run first: before loops are lowered, so
    /// that its types carried around loops are converted with the loops.
    fn vendor_dialect_pass(&self) -> Option<&'static str> {
        None
    }
    /// The unit attribute that makes an `llvm.func` a kernel in the LLVM IR translation.
    fn kernel_attribute(&self) -> &'static str;

    /// The relocation model of its objects.
    fn reloc_mode(&self) -> RelocMode {
        RelocMode::Default
    }
    /// Steps on the module before user bitcode and device libraries are linked.
    fn pre_link<'ll>(&self, job: &Job<'_, 'll>, module: &Module<'ll>) -> Result<PreLinked>;
    /// Links the device libraries the module calls; returns what was searched, for messages.
    fn link_device_libraries<'ll>(
        &self,
        job: &Job<'_, 'll>,
        module: &Module<'ll>,
    ) -> Result<Vec<String>>;
    /// Steps after linking, before optimization.
    fn post_link<'ll>(&self, _job: &Job<'_, 'll>, _module: &Module<'ll>) -> Result<()> {
        Ok(())
    }
    /// LLVM's default pipeline at `level`, configured as upstream's `makeOptimizingTransformer`.
    fn optimize(&self, module: &Module, machine: &TargetMachine, level: u8) -> Result<()> {
        crate::module_to_object::optimize(module, machine, level)
    }
    /// Symbols the vendor's driver provides at load time.
    fn driver_symbols(&self) -> &'static [&'static str] {
        &[]
    }
    /// Whether this is a GPU, whose code cannot call software routines for wide floating point.
    fn is_gpu(&self) -> bool {
        true
    }
    /// Whether code generation expands conversions between floats and integers wider than 64
    /// bits inline (else LLVM would call a routine no GPU library has).
    fn converts_wide_integers(&self) -> bool {
        true
    }
    /// The objects of the optimized module, with the ISA dump when asked for.
    fn emit(
        &self,
        job: &Job,
        machine: &TargetMachine,
        module: &Module,
        dumps: &mut Dumps,
        dump_isa: bool,
    ) -> Result<Vec<Artifact>>;
    /// The file extension of the ISA dump.
    fn isa_dump_extension(&self) -> &'static str {
        "s"
    }

    /// Everything about the vendor's toolkit that can change an object (for cache keys).
    fn toolkit_identity(&self, toolkits: &Toolkits) -> String;
    /// Whether objects depend on the crate being built (host symbols are named after it), so a
    /// cache entry cannot be shared between crates.
    fn names_symbols_after_the_crate(&self) -> bool {
        false
    }
}

/// The backend of `vendor`.
pub(crate) fn backend(vendor: Vendor) -> &'static dyn Backend {
    match vendor {
        Vendor::Nvptx => &nvptx::Nvptx,
        Vendor::Amdgpu => &amdgpu::Amdgpu,
        Vendor::Host => &host::Host,
    }
}

/// The assembly dump (when asked for) and the object file, as AMDGPU and the host emit them.
/// Code generation may rewrite the IR it runs on: the assembly dump gets a copy.
pub(crate) fn emit_object(
    job: &Job,
    machine: &TargetMachine,
    module: &Module,
    dumps: &mut Dumps,
    dump_isa: bool,
) -> Result<Vec<u8>> {
    use crate::module_to_object::emit_checked;
    use inkwell::targets::FileType;
    if dump_isa {
        let isa = emit_checked(job, machine, &module.clone(), FileType::Assembly)?;
        dumps.isa = Some(String::from_utf8_lossy(&isa).into_owned());
    }
    emit_checked(job, machine, module, FileType::Object)
}

/// `ld.lld -shared <object> -o <library>` in a scratch directory under `scratch`: an hsaco from
/// an AMDGPU object, a loadable host module from a host object. `what` names the object in
/// messages.
pub(crate) fn shared_library(
    ld_lld: &std::path::Path,
    object: &[u8],
    scratch: &std::path::Path,
    what: &str,
) -> Result<Vec<u8>> {
    use crate::error::{Error, ErrorKind};
    let io = |e: std::io::Error| Error::new(ErrorKind::Io, format!("preparing ld.lld input: {e}"));
    let dir = tempfile::Builder::new()
        .prefix("ld.lld-")
        .tempdir_in(scratch)
        .map_err(io)?;
    let input = dir.path().join("kernel.o");
    let output = dir.path().join("kernel.so");
    std::fs::write(&input, object).map_err(io)?;
    let result = std::process::Command::new(ld_lld)
        .arg("-shared")
        .arg(&input)
        .arg("-o")
        .arg(&output)
        .output()
        .map_err(|e| {
            Error::new(
                ErrorKind::ToolFailed,
                format!("cannot run {}: {e}", ld_lld.display()),
            )
        })?;
    if !result.status.success() {
        return Err(Error::new(
            ErrorKind::ToolFailed,
            format!(
                "{} failed linking {what} ({}):\n{}",
                ld_lld.display(),
                result.status,
                String::from_utf8_lossy(&result.stderr).trim()
            ),
        ));
    }
    std::fs::read(&output)
        .map_err(|e| Error::new(ErrorKind::Io, format!("reading ld.lld output: {e}")))
}
