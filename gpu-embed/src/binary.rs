//! The embedded objects: the run-time analogues of upstream's `gpu.binary` and `gpu.object`.

pub use gpu_manifest::{Format, LoadRequirement, Vendor};

/// A host kernel's entry point: `(params, context)`, see `gpu-build`'s host target. Used by
/// `include_gpu_binary!`'s expansion.
#[doc(hidden)]
pub type HostEntry = unsafe extern "C" fn(*mut *mut std::ffi::c_void, *mut std::ffi::c_void);

/// A host kernel's entry point for a range of blocks: `(params, context, first, count) ->
/// status`, see `gpu_manifest::host_abi::blocks_entry`. Used by `include_gpu_binary!`'s
/// expansion.
#[doc(hidden)]
pub type HostBlocksEntry =
    unsafe extern "C" fn(*mut *mut std::ffi::c_void, *mut std::ffi::c_void, u64, u64) -> u32;

/// One kernel compiled for the host and linked into the program. Used by
/// `include_gpu_binary!`'s expansion.
#[doc(hidden)]
#[derive(Debug, Clone, Copy)]
pub struct HostKernel {
    /// The kernel's name.
    pub name: &'static str,
    /// Runs one GPU thread (used when its threads run as coroutines).
    pub thread: HostEntry,
    /// Runs every thread of a range of blocks in loops (kernels split at their barriers too).
    pub blocks: HostBlocksEntry,
    /// Whether its threads run as coroutines, switching at barriers (barriers `gpu-build` could
    /// not split the kernel at).
    pub coroutines: bool,
    /// Whether its entry points check every memory access (`gpu_manifest::HostEntries::checked`).
    pub checked: bool,
    /// Per lowered parameter, the name of the source argument it belongs to (for the checked
    /// run's reports).
    pub parameter_names: &'static [&'static str],
}

/// One kernel of a Vulkan (SPIR-V) object: its entry point and how its arguments are bound
/// (`gpu_manifest::VulkanKernel`, with each argument's place among the lowered parameters the
/// launch stub passes). Used by `include_gpu_binary!`'s expansion.
#[doc(hidden)]
#[derive(Debug, Clone, Copy)]
pub struct VulkanKernel {
    /// The entry point's name.
    pub name: &'static str,
    /// The workgroup size the kernel was compiled for (`known_block_size`); a launch's block
    /// must equal it. `None`: any size, specialized per launch.
    pub workgroup_size: Option<[u32; 3]>,
    /// Workgroup (shared) memory the kernel declares, in bytes.
    pub workgroup_memory: u64,
    /// The subgroup size the kernel's shuffles assume; a device with another is refused.
    pub subgroup_size: Option<u32>,
    /// The most threads a block may have (slots of its shuffles in workgroup memory); `None`:
    /// what the device allows.
    pub max_block_threads: Option<u32>,
    /// One per source argument, in order, then the hidden ones.
    pub bindings: &'static [VulkanBinding],
    /// The kinds of record the kernel writes to its log buffer, by number (empty: none).
    pub log: &'static [VulkanLogRecord],
}

/// One kind of record a Vulkan kernel writes to its log buffer (`gpu_manifest::VulkanLogEntry`
/// says the layout). Used by `include_gpu_binary!`'s expansion.
#[doc(hidden)]
#[derive(Debug, Clone, Copy)]
pub enum VulkanLogRecord {
    /// A `gpu.printf`: its C format, and for each argument whether it is a float (an f64)
    /// rather than a 64-bit integer.
    Printf {
        format: &'static str,
        floats: &'static [bool],
    },
    /// A failed `cf.assert`, with the failing thread's and block's ids.
    Assertion {
        message: &'static str,
        file: &'static str,
        line: u32,
        function: &'static str,
    },
}

/// Where one argument of a Vulkan kernel is bound, and where its value is among the launch's
/// lowered parameters. Used by `include_gpu_binary!`'s expansion.
#[doc(hidden)]
#[derive(Debug, Clone, Copy)]
pub struct VulkanBinding {
    /// Descriptor set.
    pub set: u32,
    /// Binding within the set.
    pub binding: u32,
    /// Index of the argument's first lowered parameter (a memref's allocated pointer).
    pub param: usize,
    /// What the storage buffer holds.
    pub kind: VulkanArgument,
}

impl From<gpu_manifest::VulkanLaunchBinding> for VulkanBinding {
    fn from(binding: gpu_manifest::VulkanLaunchBinding) -> VulkanBinding {
        VulkanBinding {
            set: binding.set,
            binding: binding.binding,
            param: binding.param,
            kind: match binding.kind {
                gpu_manifest::VulkanBindingKind::Elements { element_bytes } => {
                    VulkanArgument::Elements {
                        rank: binding.rank.unwrap_or_default(),
                        element_bytes,
                    }
                }
                gpu_manifest::VulkanBindingKind::Scalar { bytes } => {
                    VulkanArgument::Scalar { bytes }
                }
                gpu_manifest::VulkanBindingKind::MemrefSize { dim, .. } => VulkanArgument::Size {
                    rank: binding.rank.unwrap_or_default(),
                    dim: dim as usize,
                },
                gpu_manifest::VulkanBindingKind::Log => VulkanArgument::Log,
                gpu_manifest::VulkanBindingKind::Pointer => VulkanArgument::Pointer,
            },
        }
    }
}

/// What a Vulkan kernel argument's storage buffer holds. Used by `include_gpu_binary!`'s
/// expansion.
#[doc(hidden)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VulkanArgument {
    /// A memref of `rank` dimensions, whose lowered parameters from `param` on are its
    /// descriptor (allocated and aligned pointer, offset, `rank` sizes, `rank` strides): bound
    /// as the contiguous range of its elements.
    Elements {
        /// Dimensions.
        rank: usize,
        /// Bytes per element.
        element_bytes: u32,
    },
    /// A scalar parameter, copied into a buffer of `bytes` bytes (an 8-byte `index` parameter
    /// into 4 bytes, checked to fit).
    Scalar {
        /// Its size in the buffer.
        bytes: u32,
    },
    /// Size `dim` of the memref of `rank` dimensions whose descriptor starts at `param`, copied
    /// into a buffer as a 32-bit integer (checked to fit): a hidden argument the Vulkan target
    /// adds where the kernel needs a size its buffer binding cannot give.
    Size {
        /// The memref's dimensions.
        rank: usize,
        /// The dimension.
        dim: usize,
    },
    /// The kernel's log buffer, which the launch makes and reads once the kernel has run.
    Log,
    /// A pointer parameter (8 bytes, a device address of this device): bound as the bytes from
    /// that address to the end of its allocation.
    Pointer,
}

/// One kernel of a Level Zero (OpenCL-style SPIR-V) object: its entry point and where each
/// argument's value is among the lowered parameters the launch stub passes
/// (`gpu_manifest::LevelZeroKernel::launch_arguments`). Used by `include_gpu_binary!`'s expansion.
#[doc(hidden)]
#[derive(Debug, Clone, Copy)]
pub struct LevelZeroKernel {
    /// The entry point's name.
    pub name: &'static str,
    /// Workgroup (shared) memory the kernel declares, in bytes.
    pub workgroup_memory: u64,
    /// One per source argument, in order.
    pub arguments: &'static [LevelZeroArgument],
}

/// One argument of a Level Zero kernel: where its value is among the launch's lowered
/// parameters and what the kernel gets. Used by `include_gpu_binary!`'s expansion.
#[doc(hidden)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LevelZeroArgument {
    /// Index of the argument's first lowered parameter (a memref's allocated pointer).
    pub param: usize,
    /// What the kernel gets.
    pub kind: LevelZeroArgumentKind,
}

/// What a Level Zero kernel gets for one argument. Used by `include_gpu_binary!`'s expansion.
#[doc(hidden)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LevelZeroArgumentKind {
    /// A memref: the address of its first element, from its descriptor (aligned pointer at
    /// `param + 1`, offset in elements at `param + 2`).
    FirstElement {
        /// Bytes per element.
        element_bytes: u32,
    },
    /// A pointer, as it is.
    Address,
    /// A scalar of `bytes` bytes, by value.
    Scalar {
        /// Its size.
        bytes: u32,
    },
}

impl From<gpu_manifest::LevelZeroLaunchArgument> for LevelZeroArgument {
    fn from(argument: gpu_manifest::LevelZeroLaunchArgument) -> LevelZeroArgument {
        LevelZeroArgument {
            param: argument.param,
            kind: match argument.kind {
                gpu_manifest::LevelZeroLaunchKind::FirstElement { element_bytes } => {
                    LevelZeroArgumentKind::FirstElement { element_bytes }
                }
                gpu_manifest::LevelZeroLaunchKind::Address => LevelZeroArgumentKind::Address,
                gpu_manifest::LevelZeroLaunchKind::Scalar { bytes } => {
                    LevelZeroArgumentKind::Scalar { bytes }
                }
            },
        }
    }
}

/// The kernel tables an object carries for the driver that runs it, by its kind: one per
/// object, so no object holds another kind's table.
#[derive(Debug, Clone, Copy)]
enum KernelTables {
    /// The driver finds each kernel in the object's own bytes (PTX, cubins, hsaco).
    InObject,
    /// Host kernels linked into the program.
    Host(&'static [HostKernel]),
    /// Vulkan entry points and their bindings.
    Vulkan(&'static [VulkanKernel]),
    /// OpenCL-style SPIR-V entry points and their arguments.
    LevelZero(&'static [LevelZeroKernel]),
}

/// One compiled object, embedded in the program.
#[derive(Debug, Clone, Copy)]
pub struct Object {
    vendor: Vendor,
    chip: &'static str,
    format: Format,
    bytes: &'static [u8],
    kernels: KernelTables,
    capabilities: &'static [&'static str],
    requires: Option<LoadRequirement>,
}

impl Object {
    /// Used by `include_gpu_binary!`'s expansion.
    #[doc(hidden)]
    pub const fn new(
        vendor: Vendor,
        chip: &'static str,
        format: Format,
        bytes: &'static [u8],
    ) -> Object {
        Object {
            vendor,
            chip,
            format,
            bytes,
            kernels: KernelTables::InObject,
            capabilities: &[],
            requires: None,
        }
    }

    /// The object with what loading it asks of the driver (from the manifest). Used by
    /// `include_gpu_binary!`'s expansion.
    #[doc(hidden)]
    pub const fn requiring(self, requirement: LoadRequirement) -> Object {
        Object {
            requires: Some(requirement),
            ..self
        }
    }

    /// A Vulkan object: SPIR-V for `chip` (`vulkan1.1`), the SPIR-V capabilities it declares,
    /// and its kernels' bindings. Used by `include_gpu_binary!`'s expansion.
    #[doc(hidden)]
    pub const fn vulkan(
        chip: &'static str,
        bytes: &'static [u8],
        capabilities: &'static [&'static str],
        kernels: &'static [VulkanKernel],
    ) -> Object {
        Object {
            vendor: Vendor::Vulkan,
            chip,
            format: Format::Bin,
            bytes,
            kernels: KernelTables::Vulkan(kernels),
            capabilities,
            requires: None,
        }
    }

    /// A Level Zero object: OpenCL-style SPIR-V for `chip` (`spirv1.0`), the SPIR-V capabilities
    /// it declares, and its kernels' arguments. Used by `include_gpu_binary!`'s expansion.
    #[doc(hidden)]
    pub const fn level_zero(
        chip: &'static str,
        bytes: &'static [u8],
        capabilities: &'static [&'static str],
        kernels: &'static [LevelZeroKernel],
    ) -> Object {
        Object {
            vendor: Vendor::LevelZero,
            chip,
            format: Format::Bin,
            bytes,
            kernels: KernelTables::LevelZero(kernels),
            capabilities,
            requires: None,
        }
    }

    /// The host object: kernels linked into the program for `triple`. Used by
    /// `include_gpu_binary!`'s expansion.
    #[doc(hidden)]
    pub const fn host(triple: &'static str, kernels: &'static [HostKernel]) -> Object {
        Object {
            vendor: Vendor::Host,
            chip: triple,
            format: Format::Bin,
            bytes: &[],
            kernels: KernelTables::Host(kernels),
            capabilities: &[],
            requires: None,
        }
    }

    /// A host object's kernel `name`.
    pub(crate) fn host_kernel(&self, name: &str) -> Option<&'static HostKernel> {
        match self.kernels {
            KernelTables::Host(kernels) => kernels.iter().find(|k| k.name == name),
            _ => None,
        }
    }

    /// A Vulkan object's kernel `name`.
    #[cfg_attr(not(feature = "vulkan"), allow(dead_code))]
    pub(crate) fn vulkan_kernel(&self, name: &str) -> Option<&'static VulkanKernel> {
        match self.kernels {
            KernelTables::Vulkan(kernels) => kernels.iter().find(|k| k.name == name),
            _ => None,
        }
    }

    /// A Level Zero object's kernel `name`.
    pub(crate) fn level_zero_kernel(&self, name: &str) -> Option<&'static LevelZeroKernel> {
        match self.kernels {
            KernelTables::LevelZero(kernels) => kernels.iter().find(|k| k.name == name),
            _ => None,
        }
    }

    /// The SPIR-V capabilities a Vulkan or Level Zero object declares (empty for other
    /// objects): what a device must support to run it.
    pub fn capabilities(&self) -> &'static [&'static str] {
        self.capabilities
    }

    /// What loading it asks of the driver (a PTX ISA version, the CUDA version that built a
    /// cubin, a code object version), as gpu-build read it from the object; `None` where
    /// nothing is asked or nothing was recorded.
    pub fn requires(&self) -> Option<LoadRequirement> {
        self.requires
    }

    /// The vendor whose devices run it.
    pub fn vendor(&self) -> Vendor {
        self.vendor
    }

    /// `sm_90`, `gfx90a`, `gfx90a:xnack-`; the target triple for the host.
    pub fn chip(&self) -> &'static str {
        self.chip
    }

    /// ISA text (PTX) or a binary (cubin, hsaco, host object).
    pub fn format(&self) -> Format {
        self.format
    }

    /// The object's bytes; empty for the host object, whose code is linked into the program.
    pub fn bytes(&self) -> &'static [u8] {
        self.bytes
    }

    /// What the object is, for listings and errors: `nvptx sm_80 PTX`, `amdgpu gfx90a hsaco`,
    /// and what loading it needs where that is recorded: `nvptx sm_80 PTX (PTX ISA 8.0, a CUDA
    /// 12.0 driver or newer)`.
    pub fn describe(&self) -> String {
        let kind = self.vendor.object_kind(self.format);
        match self.requires {
            Some(requirement) => format!("{} {} {kind} ({requirement})", self.vendor, self.chip),
            None => format!("{} {} {kind}", self.vendor, self.chip),
        }
    }
}

/// All objects compiled from one `gpu.module`, and its kernels.
#[derive(Debug)]
pub struct Binary {
    name: &'static str,
    objects: &'static [Object],
    kernels: &'static [&'static str],
}

impl Binary {
    /// Used by `include_gpu_binary!`'s expansion.
    #[doc(hidden)]
    pub const fn new(
        name: &'static str,
        objects: &'static [Object],
        kernels: &'static [&'static str],
    ) -> Binary {
        Binary {
            name,
            objects,
            kernels,
        }
    }

    /// The `gpu.module` symbol.
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// Every object embedded for this gpu.module.
    pub fn objects(&self) -> &'static [Object] {
        self.objects
    }

    /// The module's kernels, by name.
    pub fn kernels(&self) -> &'static [&'static str] {
        self.kernels
    }
}
