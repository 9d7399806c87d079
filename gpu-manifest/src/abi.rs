//! What differs per target about running an object: one [`ObjectAbi`] per object, written by
//! the target that compiled it and read by the driver that runs it. Everything between them
//! (gpu-build's pipeline, cache and outputs, the manifest, `include_gpu_binary!`'s general path)
//! carries it without looking inside, as upstream's `gpu.object` carries its properties.

use crate::{ArgumentKind, Kernel};
use serde::{Deserialize, Serialize};

/// How the runtime runs one object's kernels, beyond what every object says (its kernels'
/// lowered parameters, [`Kernel::params`]). Tagged by `kind` in the manifest:
/// `{"kind": "host", "symbol_prefix": ...}`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ObjectAbi {
    /// The driver loads the object and finds each kernel by its name; a launch passes the
    /// lowered parameters as they are (NVIDIA's PTX and cubins, AMD's hsaco). The object's own
    /// bytes say the rest.
    #[default]
    LoweredParams,
    /// Native code linked into the program, whose kernels are called through generated entry
    /// points (the host target).
    Host(HostEntries),
    /// SPIR-V for the Vulkan API: what a device must support and how arguments are bound.
    Vulkan(VulkanEntries),
    /// OpenCL-style SPIR-V for Level Zero: what a device must support and what each argument is.
    LevelZero(LevelZeroEntries),
}

impl ObjectAbi {
    /// Whether the object's code is linked into the crate that embeds it (host objects: the
    /// build script links them as a static library), rather than loaded by a driver at run time.
    pub fn links_into_crate(&self) -> bool {
        matches!(self, ObjectAbi::Host(_))
    }

    /// The same ABI, naming `library` as the static library the crate links the object's code
    /// from (`lib<library>.a`); unchanged for an object a driver loads
    /// ([`ObjectAbi::links_into_crate`]).
    pub fn with_crate_library(self, library: String) -> ObjectAbi {
        match self {
            ObjectAbi::Host(entries) => ObjectAbi::Host(HostEntries { library, ..entries }),
            other => other,
        }
    }

    /// The entry points of a host object.
    pub fn host(&self) -> Option<&HostEntries> {
        match self {
            ObjectAbi::Host(entries) => Some(entries),
            _ => None,
        }
    }

    /// The bindings and requirements of a Vulkan object.
    pub fn vulkan(&self) -> Option<&VulkanEntries> {
        match self {
            ObjectAbi::Vulkan(entries) => Some(entries),
            _ => None,
        }
    }

    /// The arguments and requirements of a Level Zero object.
    pub fn level_zero(&self) -> Option<&LevelZeroEntries> {
        match self {
            ObjectAbi::LevelZero(entries) => Some(entries),
            _ => None,
        }
    }
}

/// A Level Zero (OpenCL-style SPIR-V) object's kernel ABI, read from the converted module: a
/// memref argument is one pointer to its first element (the buffer's device address: the
/// kernel knows its shape, so a memref's dynamic sizes must be passed as arguments too), a
/// scalar its value, `index` 64 bits wide.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LevelZeroEntries {
    /// The SPIR-V version the module declares (`1.0`).
    pub spirv_version: String,
    /// The SPIR-V capabilities the module declares (`Addresses`, `Kernel`, `Int64`, ...).
    pub capabilities: Vec<String>,
    /// The SPIR-V extensions the module declares.
    pub extensions: Vec<String>,
    /// One per kernel of the module, in source order.
    pub kernels: Vec<LevelZeroKernel>,
}

/// One OpenCL-style SPIR-V entry point.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LevelZeroKernel {
    /// The entry point's name (the kernel's).
    pub name: String,
    /// Workgroup (shared) memory the kernel declares, in bytes.
    pub workgroup_memory: u64,
    /// One per source argument, in order: what `zeKernelSetArgumentValue` gets for it.
    pub arguments: Vec<LevelZeroArgument>,
}

/// What one Level Zero kernel argument is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum LevelZeroArgument {
    /// A memref: the device address of its first element (8 bytes).
    Pointer,
    /// A scalar of `bytes` bytes, by value.
    Scalar {
        /// Its size.
        bytes: u32,
    },
}

impl Kernel {
    /// For an object's table of `count` entries (`what`: "Vulkan bindings"), the index of each
    /// source argument's first lowered parameter: an error when the table and the kernel do not
    /// have as many arguments, or an argument has no lowered parameter.
    fn first_params(&self, count: usize, what: &str) -> Result<Vec<usize>, String> {
        if count != self.arguments.len() {
            return Err(format!(
                "kernel `{}`: {count} {what} for {} arguments",
                self.name,
                self.arguments.len()
            ));
        }
        (0..count)
            .map(|index| {
                self.params
                    .iter()
                    .position(|p| p.argument == index)
                    .ok_or_else(|| {
                        format!(
                            "kernel `{}`: argument {index} has no lowered parameter",
                            self.name
                        )
                    })
            })
            .collect()
    }
}

impl LevelZeroKernel {
    /// Each argument with where a launch of `kernel` (this entry point's kernel, with its
    /// lowered parameters) finds its value: the one rule the launch stubs' tables and `mgpu`
    /// share, as [`VulkanKernel::launch_bindings`] is for Vulkan.
    pub fn launch_arguments(
        &self,
        kernel: &Kernel,
    ) -> Result<Vec<LevelZeroLaunchArgument>, String> {
        let params = kernel.first_params(self.arguments.len(), "Level Zero arguments")?;
        self.arguments
            .iter()
            .zip(&kernel.arguments)
            .zip(params)
            .enumerate()
            .map(|(index, ((argument, source), param))| {
                let kind = match (argument, &source.kind) {
                    (LevelZeroArgument::Pointer, ArgumentKind::Memref { element, .. }) => {
                        LevelZeroLaunchKind::FirstElement {
                            element_bytes: element.bytes(),
                        }
                    }
                    (LevelZeroArgument::Pointer, ArgumentKind::Pointer) => {
                        LevelZeroLaunchKind::Address
                    }
                    (LevelZeroArgument::Scalar { bytes }, ArgumentKind::Scalar { .. }) => {
                        LevelZeroLaunchKind::Scalar { bytes: *bytes }
                    }
                    _ => {
                        return Err(format!(
                            "kernel `{}`: argument {index} ({}) cannot be passed as {argument:?}",
                            kernel.name, source.ty
                        ))
                    }
                };
                Ok(LevelZeroLaunchArgument { param, kind })
            })
            .collect()
    }
}

/// Where a launch finds one Level Zero (OpenCL-style SPIR-V) kernel argument among its lowered
/// parameters, and what the kernel gets for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LevelZeroLaunchArgument {
    /// Index of the argument's first lowered parameter (a memref's allocated pointer).
    pub param: usize,
    /// What the kernel gets.
    pub kind: LevelZeroLaunchKind,
}

/// What one Level Zero kernel argument gets from the lowered parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LevelZeroLaunchKind {
    /// A memref: the address of its first element, `aligned + offset * element_bytes` from its
    /// descriptor (the parameters at `param + 1` and `param + 2`).
    FirstElement {
        /// Bytes per element.
        element_bytes: u32,
    },
    /// A pointer argument, passed as it is.
    Address,
    /// A scalar of `bytes` bytes, by value.
    Scalar {
        /// Its size.
        bytes: u32,
    },
}

/// A Vulkan (SPIR-V) object's kernel ABI: what a device must support, and how each kernel's
/// arguments reach it. Every argument is a storage buffer in descriptor set 0: a memref its
/// elements (one contiguous range), a scalar a buffer holding just the value.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VulkanEntries {
    /// The SPIR-V version the module declares (`1.3`).
    pub spirv_version: String,
    /// The SPIR-V capabilities the module declares (`Shader`, `Int64`, `GroupNonUniform`, ...):
    /// the minimal set for what the kernels use, as `spirv-update-vce` computes it.
    pub capabilities: Vec<String>,
    /// The SPIR-V extensions the module declares.
    pub extensions: Vec<String>,
    /// One per kernel of the module, in source order.
    pub kernels: Vec<VulkanKernel>,
}

/// The specialization constants (`SpecId`s) of a Vulkan object's workgroup size, x, y and z:
/// the object's `WorkgroupSize` built-in is a composite of them, so one SPIR-V module runs at
/// any block size; the runtime specializes each kernel's pipeline with its launch's block size
/// (as `layout(local_size_x_id = …)` does in GLSL). Chosen far from the small ids a hand-written
/// module's own specialization constants take.
pub const WORKGROUP_SIZE_SPEC_IDS: [u32; 3] = [0x4742_0000, 0x4742_0001, 0x4742_0002];

/// One SPIR-V entry point.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VulkanKernel {
    /// The entry point's name (the kernel's).
    pub name: String,
    /// The workgroup size the kernel was compiled for (its `known_block_size`): every launch's
    /// block must be exactly this. `None`: any block size the device allows — the launch's
    /// size specializes the pipeline ([`WORKGROUP_SIZE_SPEC_IDS`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workgroup_size: Option<[u32; 3]>,
    /// Workgroup (shared) memory the kernel declares, in bytes.
    pub workgroup_memory: u64,
    /// The subgroup size the kernel's `gpu.shuffle`s were compiled for (MLIR lowers a shuffle
    /// only at the target's subgroup width, and the shader then assumes it): a device whose
    /// subgroups have another size cannot run the kernel. `None`: any size.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subgroup_size: Option<u32>,
    /// The most threads a block may have (the kernel's shuffles that go through workgroup
    /// memory have a slot per thread up to this). `None`: what the device allows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_block_threads: Option<u32>,
    /// One per source argument, in order, then the hidden ones
    /// ([`VulkanBindingKind::MemrefSize`], [`VulkanBindingKind::Log`]).
    pub bindings: Vec<VulkanBinding>,
    /// What the kernel writes to its log buffer, by record number: its `gpu.printf`s and
    /// `cf.assert`s. Empty: the kernel has no log buffer.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub log: Vec<VulkanLogEntry>,
}

/// One kind of record a Vulkan kernel writes to its log buffer
/// ([`VulkanBindingKind::Log`]). The buffer is 32-bit words: word 0 counts the words the
/// kernel's threads claimed (an atomic add per record), word 1 is the capacity the runtime set,
/// records start at word 2. A record is its number in [`VulkanKernel::log`], then its payload;
/// a record that does not fit is not written (the count still grows, so the runtime knows).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "record", rename_all = "snake_case")]
pub enum VulkanLogEntry {
    /// A `gpu.printf`: each argument in two words (low, high) of 64 bits — integers
    /// sign-extended, floats as f64 — to be formatted by C's rules.
    Printf {
        /// The format, as C's `printf` reads it.
        format: String,
        /// Each argument's kind.
        arguments: Vec<VulkanLogValue>,
    },
    /// A failed `cf.assert`: the thread's ids (x, y, z) and then its block's, six words. The
    /// thread stops there (it skips the rest of the block holding the assertion).
    Assertion {
        /// The assertion's message.
        message: String,
        /// Where it is (from the op's location, as MLIR's NVVM lowering reads it).
        file: String,
        /// Its line.
        line: u32,
        /// Its function.
        function: String,
    },
}

impl VulkanLogEntry {
    /// Words of a record of this kind, its number included.
    pub fn words(&self) -> usize {
        match self {
            VulkanLogEntry::Printf { arguments, .. } => 1 + 2 * arguments.len(),
            VulkanLogEntry::Assertion { .. } => 7,
        }
    }
}

/// The kind of a logged `gpu.printf` argument.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum VulkanLogValue {
    /// A signed 64-bit integer (narrower ones sign-extended; `index` too).
    Integer,
    /// An f64 (f16 and f32 widened).
    Float,
}

/// Where a launch finds one Vulkan kernel argument: its binding, and its place among the
/// launch's lowered parameters (what the runtime's binding tables hold).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VulkanLaunchBinding {
    /// Descriptor set.
    pub set: u32,
    /// Binding within the set.
    pub binding: u32,
    /// Index of the argument's first lowered parameter (a memref's allocated pointer).
    pub param: usize,
    /// For a memref's elements, its rank (its descriptor's sizes and strides follow the
    /// pointers and offset); `None` for a scalar.
    pub rank: Option<usize>,
    /// What the buffer holds.
    pub kind: VulkanBindingKind,
}

impl VulkanKernel {
    /// Each binding with where a launch of `kernel` (this entry point's kernel, with its lowered
    /// parameters) finds its value: the one rule the launch stubs' tables and `mgpu` share.
    pub fn launch_bindings(&self, kernel: &Kernel) -> Result<Vec<VulkanLaunchBinding>, String> {
        // The kernel's own arguments, then the hidden sizes of its memrefs.
        let own = kernel.arguments.len().min(self.bindings.len());
        let (arguments, hidden) = self.bindings.split_at(own);
        let params = kernel.first_params(arguments.len(), "Vulkan bindings")?;
        let mut launch = arguments
            .iter()
            .zip(&kernel.arguments)
            .zip(&params)
            .enumerate()
            .map(|(index, ((binding, argument), &param))| {
                let rank = match (binding.kind, &argument.kind) {
                    (VulkanBindingKind::Elements { .. }, ArgumentKind::Memref { shape, .. }) => {
                        Some(shape.len())
                    }
                    (VulkanBindingKind::Scalar { .. }, ArgumentKind::Scalar { .. })
                    | (VulkanBindingKind::Pointer, ArgumentKind::Pointer) => None,
                    _ => {
                        return Err(format!(
                            "kernel `{}`: argument {index} ({}) cannot be bound as {:?}",
                            kernel.name, argument.ty, binding.kind
                        ))
                    }
                };
                Ok(VulkanLaunchBinding {
                    set: binding.set,
                    binding: binding.binding,
                    param,
                    rank,
                    kind: binding.kind,
                })
            })
            .collect::<Result<Vec<_>, String>>()?;
        for binding in hidden {
            if binding.kind == VulkanBindingKind::Log {
                launch.push(VulkanLaunchBinding {
                    set: binding.set,
                    binding: binding.binding,
                    param: 0,
                    rank: None,
                    kind: binding.kind,
                });
                continue;
            }
            let VulkanBindingKind::MemrefSize { argument, dim } = binding.kind else {
                return Err(format!(
                    "kernel `{}`: binding {} past its {} arguments is {:?}, not a memref's size",
                    kernel.name,
                    binding.binding,
                    kernel.arguments.len(),
                    binding.kind
                ));
            };
            let rank = match kernel.arguments.get(argument as usize).map(|a| &a.kind) {
                Some(ArgumentKind::Memref { shape, .. }) if (dim as usize) < shape.len() => {
                    shape.len()
                }
                _ => {
                    return Err(format!(
                        "kernel `{}`: binding {} is size {dim} of argument {argument}, which is \
                         not a memref of that many dimensions",
                        kernel.name, binding.binding
                    ))
                }
            };
            launch.push(VulkanLaunchBinding {
                set: binding.set,
                binding: binding.binding,
                param: params[argument as usize],
                rank: Some(rank),
                kind: binding.kind,
            });
        }
        Ok(launch)
    }
}

/// Where one kernel argument is bound.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VulkanBinding {
    /// Descriptor set.
    pub set: u32,
    /// Binding within the set.
    pub binding: u32,
    /// What the buffer holds.
    #[serde(flatten)]
    pub kind: VulkanBindingKind,
}

/// What a Vulkan kernel argument's storage buffer holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "holds", rename_all = "snake_case")]
pub enum VulkanBindingKind {
    /// A memref's elements: the view's contiguous range, from its first element. Its descriptor
    /// fields (the lowered parameters) say where.
    Elements {
        /// Bytes per element.
        element_bytes: u32,
    },
    /// One scalar of `bytes` bytes: `index` travels as a 32-bit integer (SPIR-V's index width
    /// for Vulkan), which the runtime checks the value fits.
    Scalar {
        /// Its size in the buffer.
        bytes: u32,
    },
    /// A hidden argument, after the kernel's own: size `dim` of memref argument `argument`, as
    /// a 32-bit integer (checked to fit), from the memref's descriptor. The Vulkan target adds
    /// one per dynamic size of a memref with a dynamic size past the first, or read by
    /// `memref.dim`: MLIR's SPIR-V lowering must be given what a buffer binding cannot say.
    MemrefSize {
        /// The memref argument's index.
        argument: u32,
        /// The dimension.
        dim: u32,
    },
    /// A pointer argument (of a kernel in the LLVM dialect): the bytes from the address it
    /// holds to the end of its allocation.
    Pointer,
    /// A hidden argument, last: the kernel's log buffer ([`VulkanLogEntry`]), which the
    /// runtime makes per launch and reads once the launch has run.
    Log,
}

/// How a host object's kernels are called: each kernel `k` has an entry point
/// `<symbol_prefix>k(void **params, void *context)` in the static library the build script links.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostEntries {
    /// What every entry point's symbol starts with (unique to the crate, file and module).
    pub symbol_prefix: String,
    /// Kernels whose threads the scheduler runs as coroutines, switching at each barrier
    /// (barriers `gpu-build` could not split the kernel at). Every other kernel runs through its
    /// blocks entry ([`crate::host_abi::blocks_entry`]).
    pub coroutine_kernels: Vec<String>,
    /// Whether the entry points check every memory access (`GPU_EMBED_CHECK=1` at build time):
    /// the runtime then passes the checked run's functions in the context
    /// ([`crate::host_abi::CHECK_REPORT_OFFSET`]) and fails the launch with what they report.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub checked: bool,
    /// The static library holding the entry points (`lib<library>.a` in `gpu-build/host/`).
    /// The build script links it into the crate; the embedding code names it as well, so that
    /// what the build script's link flags do not reach (the crate's doc tests) links it too.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub library: String,
}
