//! The interface between the pipeline and the targets, at the bottom of both: the [`Target`]
//! trait (MLIR's `TargetAttrInterface`: a target's [`Description`] as data, its chips, what only
//! its code can explain, what its objects ask of a driver and what identifies its toolkit), the
//! backends' traits ([`LlvmTarget`], upstream's `SerializeGPUModuleBase`: the module's
//! preparation and lowering pass, then ModuleToObject over the shared steps of [`ObjectSteps`]
//! (`support/object_steps.rs`); [`MlirSerializer`]) and
//! the plain data they exchange. Ten methods in all: everything a target only states (flags,
//! kernel attribute, relocation model, driver symbols, ...) is data in its description. Each
//! target implements it in its own folder; the registry (`targets/mod.rs`) is the one place that
//! lists them; the pipeline asks the registry and never names a target.

use crate::cargo::CargoOutput;
use crate::error::Result;
use crate::llvm_errors::Diagnostics;
use crate::timing::Timings;
use crate::toolkit::Toolkits;
use gpu_manifest::{Format, Kernel, LoadRequirement, ObjectAbi, RefusedKernel, Vendor};
use inkwell::context::Context;
use inkwell::module::Module;
use inkwell::targets::{InitializationConfig, RelocMode, TargetMachine};
use melior::ir::operation::OperationRefMut;
use melior::ir::OperationRef;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// A validated chip: the processor name LLVM takes and the target features its suffixes imply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Chip {
    pub processor: String,
    /// `+xnack,-sramecc` from `gfx90a:xnack+:sramecc-`; empty where a chip has no suffixes.
    pub features: String,
}

impl Chip {
    /// A chip without feature suffixes: the processor as named.
    pub fn plain(processor: &str) -> Chip {
        Chip {
            processor: processor.to_string(),
            features: String::new(),
        }
    }
}

/// The triple the crate is being built for: cargo's `TARGET` in a build script, else the machine's
/// own (what LLVM was configured for).
pub fn build_triple() -> String {
    std::env::var("TARGET").unwrap_or_else(|_| {
        inkwell::targets::TargetMachine::get_default_triple()
            .as_str()
            .to_string_lossy()
            .into_owned()
    })
}

/// Everything needed to compile one `gpu.module` for one chip: one target attribute
/// (`#nvvm.target`, `#rocdl.target`, ...) with its parameters resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TargetSpec {
    /// The target (`nvptx`, `amdgpu`, `host`, `vulkan`, `opencl`: every [`Vendor`]).
    pub vendor: Vendor,
    /// As the user wrote it, feature suffixes included (`gfx90a:xnack-`).
    pub chip: String,
    /// Optimization level (0-3), for LLVM and ptxas.
    pub opt_level: u8,
    /// The LLVM target triple.
    pub triple: String,
    /// LLVM target features (`+ptx80`, `+wavefrontsize64`).
    pub features: String,
    /// The vendor's options (`fast`, `ftz`, `daz`, ...).
    pub flags: Flags,
    /// Bitcode files linked into the module before optimization.
    pub link: Vec<PathBuf>,
    /// ROCDL code object version (`400`, `500`, `600`); empty for every other target.
    pub abi: String,
    /// Host objects only: every memory access checked (`GPU_EMBED_CHECK=1`, `targets/host/check`).
    pub checked: bool,
}

/// The `flags` dictionary of a target attribute: `fast`, which every target takes, and the
/// target's own flags as written and checked when the attribute was read. Each target reads its
/// own into its own options type (`targets/<name>/flags.rs`); this type names no target's flag.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Flags {
    /// Fast math; what it permits is the target's (NVPTX: fast-math function attributes,
    /// approximate division and sqrt; AMDGPU: `finite_only` + `unsafe_math` + `daz`, no correctly
    /// rounded sqrt).
    pub fast: bool,
    /// The target's own flags by name, each with its string values (none for a unit flag).
    pub target: BTreeMap<String, Vec<String>>,
}

impl Flags {
    /// Whether the target flag `name` was given.
    pub fn has(&self, name: &str) -> bool {
        self.target.contains_key(name)
    }

    /// The values of the target flag `name` (empty when it was not given).
    pub fn values(&self, name: &str) -> &[String] {
        self.target.get(name).map_or(&[], Vec::as_slice)
    }
}

/// One output file of a compilation.
#[derive(Debug, Clone)]
pub(crate) struct Artifact {
    pub format: Format,
    /// File extension: `ptx`, `cubin`, `hsaco`.
    pub extension: String,
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
    /// What the global symbols an object defines in the program start with, unique to the
    /// crate, file and module (for targets whose objects link into the crate: the host's entry
    /// points).
    pub symbol_prefix: &'a str,
    pub dump: DumpRequest,
    /// Where external tools may write temporary files (inside `OUT_DIR`).
    pub scratch: &'a Path,
    pub timings: &'a Timings,
    /// The kernel file as messages name it.
    pub source: &'a str,
    /// The module's kernels, each lowered parameter matched to its source argument.
    pub kernels: &'a [Kernel],
}

/// What compiling one module for one target made: its objects, the dumps asked for, and the
/// ABI its driver reads.
#[derive(Debug, Clone)]
pub(crate) struct Compiled {
    pub artifacts: Vec<Artifact>,
    pub dumps: Dumps,
    /// How the runtime runs the objects' kernels, as the target wrote it for its driver: the
    /// pipeline, cache and outputs carry it into the manifest without looking inside.
    pub abi: ObjectAbi,
    /// The module's kernels the objects leave out, and why (`lower.rs`: a target that builds
    /// kernels alone).
    pub refused: Vec<RefusedKernel>,
}

/// Everything a vendor hook may need.
#[derive(Clone, Copy)]
pub(crate) struct Job<'a, 'll> {
    pub spec: &'a TargetSpec,
    pub processor: &'a str,
    pub llvm: &'ll Context,
    /// Collects LLVM's error diagnostics.
    pub diagnostics: &'a Diagnostics<'ll>,
    /// Where external tools may write temporary files (inside `OUT_DIR`).
    pub scratch: &'a Path,
    pub toolkits: &'a Toolkits<'a>,
    pub cargo: &'a CargoOutput,
    pub timings: &'a Timings,
    /// What the global symbols an object defines in the program start with, unique to the
    /// crate, file and module (for targets whose objects link into the crate: the host's entry
    /// points).
    pub symbol_prefix: &'a str,
    /// The kernel file as messages name it.
    pub source: &'a str,
    /// The module's kernels, each lowered parameter matched to its source argument (which
    /// parameters form a memref's descriptor).
    pub kernels: &'a [Kernel],
}

/// One module on its way to objects for one target, with ModuleToObject's shared steps (their
/// code is `support/object_steps.rs`) for the target's [`LlvmTarget::to_object`] to call
/// between its own.
pub(crate) struct ObjectSteps<'a, 'll> {
    pub job: Job<'a, 'll>,
    pub machine: &'a TargetMachine,
    /// The module, its triple and data layout set.
    pub module: &'a Module<'ll>,
    /// What the target states about itself.
    pub backend: &'static LlvmBackend,
    /// Relative `link` paths are resolved against this.
    pub link_base: &'a Path,
    pub dump: DumpRequest,
    /// The dumps made so far.
    pub dumps: Dumps,
    /// When linking began, for the timings.
    pub started: std::time::Instant,
}

/// What a target is, as plain data: its names, defaults and the words its messages use. Each
/// target has one `static`; the pipeline reads it and never names a target.
#[derive(Debug)]
pub(crate) struct Description {
    /// Which target this is.
    pub vendor: Vendor,
    /// The MLIR attribute that names this target on a `gpu.module` (`nvvm.target`), if any.
    pub attribute_name: Option<&'static str>,
    /// The code object ABIs the attribute's `abi` may name; empty: it takes no `abi`.
    pub abis: &'static [&'static str],
    /// The code object ABI a target without one gets (empty where `abis` is).
    pub default_abi: &'static str,
    /// The attribute's `flags` this target takes besides `fast` (which every target takes).
    pub flags: &'static [Flag],
    /// A chip to show in examples and messages (`sm_80`).
    pub example_chip: &'static str,
    /// The chip a target without one gets; `None`: the build's own triple (the host, whose
    /// chip is its triple).
    pub default_chip: Option<&'static str>,
    /// The LLVM target triple, whatever the chip; `None`: the chip is the triple (the host),
    /// which a build's own host triple replaces when one is given.
    pub triple: Option<&'static str>,
    /// What the target's triples start with (`nvptx`, `amdgcn`): a target description with
    /// another triple is refused, an LLVM IR file with such a triple is this target's. `None`:
    /// any triple.
    pub triple_prefix: Option<&'static str>,
    /// Target features a target without any gets.
    pub default_features: &'static str,
    /// The MLIR dialects whose ops only this target compiles.
    pub dialects: &'static [&'static str],
    /// The environment variable whose chips replace every module's chips for this target.
    pub chip_override_variable: Option<&'static str>,
    /// Who makes the hardware, for messages (`NVIDIA`, `AMD`).
    pub maker: &'static str,
    /// The name of MLIR's lowering to this target, for messages (`NVVM`, `ROCDL`).
    pub lowering_name: &'static str,
    /// Whether objects depend on the crate being built (host symbols are named after it), so a
    /// cache entry cannot be shared between crates.
    pub names_symbols_after_the_crate: bool,
    /// Whether a module whose kernels fail together is tried kernel by kernel, the kernels the
    /// target refuses left out with a warning and the others built (so that one kernel a
    /// device cannot run does not fail a crate that targets every device).
    pub builds_kernels_alone: bool,
    /// How the target makes its objects.
    pub backend: Backend,
}

impl Description {
    /// `vendor`'s description, made by `backend`, with every optional part empty, for its
    /// target to fill in.
    pub const fn new(vendor: Vendor, backend: Backend) -> Description {
        Description {
            vendor,
            attribute_name: None,
            abis: &[],
            default_abi: "",
            flags: &[],
            example_chip: "",
            default_chip: None,
            triple: None,
            triple_prefix: None,
            default_features: "",
            dialects: &[],
            chip_override_variable: None,
            maker: "",
            lowering_name: "",
            names_symbols_after_the_crate: false,
            builds_kernels_alone: false,
            backend,
        }
    }

    /// Every flag the target takes, for messages: `fast, ftz, ...`.
    pub fn known_flags(&self) -> String {
        std::iter::once("fast")
            .chain(self.flags.iter().map(|flag| flag.name))
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// The target's LLVM back end, for a target that compiles through LLVM.
    pub fn llvm(&self) -> Option<&'static LlvmBackend> {
        match self.backend {
            Backend::Llvm(llvm) => Some(llvm),
            Backend::Mlir(_) => None,
        }
    }

    /// The target's serializer, for a target serialized from MLIR itself.
    pub fn mlir_serializer(&self) -> Option<&'static dyn MlirSerializer> {
        match self.backend {
            Backend::Mlir(serializer) => Some(serializer),
            Backend::Llvm(_) => None,
        }
    }

    /// Whether the target's chip is a target triple (the host's).
    pub fn chip_is_triple(&self) -> bool {
        self.triple.is_none()
    }

    /// The LLVM target triple for `chip`.
    pub fn triple_for(&self, chip: &str) -> String {
        self.triple.unwrap_or(chip).to_string()
    }

    /// The chip a target without one gets.
    pub fn default_chip(&self) -> String {
        self.default_chip.map_or_else(build_triple, str::to_string)
    }
}

/// One of a target's own `flags` (`ftz`, `daz`) and the value it takes.
#[derive(Debug)]
pub(crate) struct Flag {
    pub name: &'static str,
    pub value: FlagValue,
}

impl Flag {
    /// A flag that is on when present.
    pub const fn unit(name: &'static str) -> Flag {
        Flag {
            name,
            value: FlagValue::Unit,
        }
    }

    /// A flag whose value is a tool's command-line arguments.
    pub const fn arguments(name: &'static str) -> Flag {
        Flag {
            name,
            value: FlagValue::Arguments,
        }
    }
}

/// What a flag's value may be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FlagValue {
    /// None: the flag is on when present, whatever its value (`ftz`, `ftz = true`).
    Unit,
    /// Command-line arguments for a tool: one string split at whitespace, or an array of
    /// strings (`ptxas-cmd-options`).
    Arguments,
}

/// Something the other targets take that a target may refuse, to be explained in its own words.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Question<'a> {
    /// An op of the target-neutral dialects the other targets compile: why this target cannot.
    NeutralOp(&'a str),
    /// An op MLIR 22 left unlowered for this target: why, where the target knows better than the
    /// shared explanation.
    NotLowered(&'a str),
    /// A kernel name: why this target cannot give a kernel this name.
    KernelName(&'a str),
}

/// How a target makes its objects.
#[derive(Clone, Copy)]
pub(crate) enum Backend {
    /// Through LLVM IR (NVPTX, AMDGPU, the host).
    Llvm(&'static LlvmBackend),
    /// From MLIR itself (SPIR-V: upstream's SPIR-V target serializes the `spirv.module`, no LLVM
    /// IR).
    Mlir(&'static dyn MlirSerializer),
}

impl std::fmt::Debug for Backend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Backend::Llvm(_) => "Llvm",
            Backend::Mlir(_) => "Mlir",
        })
    }
}

/// What a target that compiles through LLVM IR states about it, and its steps.
pub(crate) struct LlvmBackend {
    /// The target's own steps.
    pub steps: &'static dyn LlvmTarget,
    /// LLVM's initializers of the back ends its objects need (`Target::initialize_nvptx`).
    pub back_ends: &'static [fn(&InitializationConfig)],
    /// The calling convention that marks kernels in LLVM IR input (`CallingConv::PTX_Kernel`);
    /// `None`: LLVM IR input cannot name this target.
    pub kernel_calling_convention: Option<u32>,
    /// Passes for the vendor's own high-level dialect, run first: before loops are lowered, so
    /// that its types carried around loops are converted with the loops.
    pub vendor_dialect_pass: Option<&'static str>,
    /// The unit attribute that makes an `llvm.func` a kernel in the LLVM IR translation.
    pub kernel_attribute: &'static str,
    /// The relocation model of its objects.
    pub reloc_mode: RelocMode,
    /// Symbols the vendor's driver provides at load time, which may stay undefined.
    pub driver_symbols: &'static [&'static str],
    /// Whether this is a GPU, whose code cannot call software routines for wide floating point.
    pub is_gpu: bool,
    /// Whether code generation expands conversions between floats and integers wider than 64
    /// bits inline (else LLVM would call a routine no GPU library has).
    pub converts_wide_integers: bool,
    /// The file extension of the ISA dump.
    pub isa_dump_extension: &'static str,
}

/// A target: its [`Description`] and the few questions only its own code can answer (MLIR's
/// `TargetAttrInterface` has two).
pub(crate) trait Target: Sync {
    /// What the target is.
    fn description(&self) -> &'static Description;
    /// Checks a target description's chip and what only this target knows about the rest (its
    /// `features` string with that chip): the chip's processor and the features its suffixes
    /// imply.
    fn chip(&self, spec: &TargetSpec) -> Result<Chip>;
    /// What loading an object of `format` with these bytes asks of the driver (a PTX ISA
    /// version, the CUDA version that built a cubin, a code object version), read from the
    /// object itself; `None` where the target's objects ask nothing of the sort.
    fn load_requirement(&self, _format: Format, _bytes: &[u8]) -> Option<LoadRequirement> {
        None
    }
    /// Whether MLIR 22's lowering for this target would crash the process on `op` (named
    /// `name`): the op as written and what to write instead. The front end finds these first.
    fn lowering_crash(&self, _op: &OperationRef, _name: &str) -> Option<(String, String)> {
        None
    }
    /// Why this target refuses what `question` asks about; `None` when it takes it (or has
    /// nothing better to say than the shared explanation).
    fn explain(&self, _question: Question<'_>) -> Option<&'static str> {
        None
    }
    /// Everything about the vendor's toolkit that can change an object (for cache keys).
    fn toolkit_identity(&self, toolkits: &Toolkits) -> String;
}

/// The steps of a target that compiles through LLVM IR (NVPTX, AMDGPU, the host): the lowering
/// to the LLVM dialect, then ModuleToObject (upstream's `SerializeGPUModuleBase`).
pub(crate) trait LlvmTarget: Sync {
    /// Rewrites the `gpu.module` before its lowering pipeline runs (after the kernel attribute
    /// is set); `checked` for the checked host objects' lowering. Targets whose lowering
    /// pipelines are equal (they share one lowering) must make the same rewrite.
    fn prepare_for_lowering(
        &self,
        _context: &melior::Context,
        _gpu_module: &OperationRefMut,
        _checked: bool,
    ) {
    }
    /// The MLIR passes that lower the gpu dialect (and the vendor's own dialect) to this
    /// vendor's (the rest of the pipeline is shared, in `lower`).
    fn lowering_pass(&self, processor: &str) -> String;
    /// ModuleToObject: the target's own steps on the module between the shared ones of
    /// `steps`, in upstream's order (pre-link fixes → link user bitcode and device libraries →
    /// post-link checks → optimize → ISA → binary).
    fn to_object(&self, steps: ObjectSteps<'_, '_>) -> Result<Compiled>;
}

/// A target whose objects are serialized from MLIR itself, not through LLVM IR (upstream's
/// SPIR-V target serializes the `spirv.module`): the pipeline hands it each parsed `gpu.module`.
pub(crate) trait MlirSerializer: Sync {
    /// Lowers a copy of `gpu_module` for `spec` and serializes it: the objects and what the
    /// runtime needs to run them. `kernels` are the module's kernels with their lowered
    /// parameters (what the launch stubs pass), `locations` where each is (`file:line:col`), for
    /// errors about one kernel. MLIR's diagnostics go to the context's handler; the caller
    /// renders them with the error.
    fn serialize(
        &self,
        context: &melior::Context,
        gpu_module: &OperationRef,
        kernels: &[gpu_manifest::Kernel],
        locations: &[String],
        spec: &TargetSpec,
    ) -> Result<Compiled>;
}
