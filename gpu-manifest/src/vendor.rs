//! Who runs an object, and what kind of bytes it is.

use serde::{Deserialize, Serialize};
use std::fmt;

/// Which GPU vendor an object is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Vendor {
    /// NVIDIA, through the NVVM target (`#nvvm.target`).
    Nvptx,
    /// AMD, through the ROCDL target (`#rocdl.target`).
    Amdgpu,
    /// The build's own CPU: the kernels compiled for the target triple and run by the runtime's
    /// block scheduler.
    Host,
    /// Any Vulkan device (GPUs of every maker, Mesa's lavapipe on a CPU): SPIR-V through MLIR's
    /// SPIR-V conversion, run through the Vulkan API.
    Vulkan,
    /// OpenCL devices that take SPIR-V (Intel GPUs, Intel's CPU runtime, Mesa's rusticl; Level
    /// Zero takes the same objects): OpenCL-style SPIR-V (physical 64-bit pointers, the `Kernel`
    /// capability) through MLIR's SPIR-V conversion. Formerly `levelzero`, a name still accepted
    /// ([`Vendor::from_name`]).
    #[serde(rename = "opencl")]
    OpenCl,
}

impl Vendor {
    /// Every target, in declaration order (`vendor as usize` indexes it).
    pub const ALL: [Vendor; 5] = [
        Vendor::Nvptx,
        Vendor::Amdgpu,
        Vendor::Host,
        Vendor::Vulkan,
        Vendor::OpenCl,
    ];
    /// The GPU vendors (every vendor but the host).
    pub const GPUS: [Vendor; 4] = [
        Vendor::Nvptx,
        Vendor::Amdgpu,
        Vendor::Vulkan,
        Vendor::OpenCl,
    ];

    /// The vendor `name` spells ([`Vendor::name`]), if any; `levelzero`, the OpenCL target's
    /// name until its files, its driver and its name were made one, still means it.
    pub fn from_name(name: &str) -> Option<Vendor> {
        match name {
            "levelzero" => Some(Vendor::OpenCl),
            _ => Vendor::ALL.into_iter().find(|vendor| vendor.name() == name),
        }
    }

    /// The chips a bare vendor builds for (`targets = [nvptx]` in `include_gpu_binary!`,
    /// `Build::target(vendor, &[])`) when the kernel file has no target attribute of its own: for
    /// NVIDIA a cubin for Turing, Ampere and Hopper and their PTX (which newer GPUs compile at
    /// load time); for AMD MI200, MI300 and RDNA3; for the host none (the build's own triple);
    /// for Vulkan one SPIR-V object for Vulkan 1.1 and newer (subgroup operations need 1.1);
    /// for OpenCL one SPIR-V 1.0 object (every OpenCL and Level Zero driver that takes SPIR-V
    /// takes it).
    pub const fn default_chips(self) -> &'static [&'static str] {
        match self {
            Vendor::Nvptx => &["sm_75", "sm_80", "sm_90"],
            // LLVM's six generic processors (code object v6, for runtimes from ROCm 6.3)
            // cover every chip from gfx900 but gfx908 and gfx90a; the specific objects serve
            // those two and, on older runtimes, the most used data-center and desktop chips.
            Vendor::Amdgpu => &[
                "gfx908",
                "gfx90a",
                "gfx942",
                "gfx1100",
                "gfx9-generic",
                "gfx9-4-generic",
                "gfx10-1-generic",
                "gfx10-3-generic",
                "gfx11-generic",
                "gfx12-generic",
            ],
            Vendor::Host => &[],
            Vendor::Vulkan => &["vulkan1.1"],
            Vendor::OpenCl => &["spirv1.0"],
        }
    }

    /// What its objects of `format` are called, for listings and errors: `PTX`, `cubin`,
    /// `hsaco`, `SPIR-V`.
    pub fn object_kind(self, format: Format) -> &'static str {
        match (self, format) {
            (Vendor::Nvptx, Format::Isa) => "PTX",
            (Vendor::Nvptx, Format::Bin) => "cubin",
            (Vendor::Amdgpu, Format::Isa) => "AMDGPU assembly",
            (Vendor::Amdgpu, Format::Bin) => "hsaco",
            (Vendor::Host, _) => "native code",
            (Vendor::Vulkan, _) => "SPIR-V",
            (Vendor::OpenCl, _) => "OpenCL SPIR-V",
        }
    }

    /// The vendor a common other name for it means (`cuda`, `rocm`, `cpu`, ...), for "did you
    /// mean" messages and the command line's aliases.
    pub fn from_alias(alias: &str) -> Option<Vendor> {
        match alias.to_ascii_lowercase().as_str() {
            "cuda" | "nvidia" | "nvvm" | "ptx" | "cubin" | "sm" | "nvptx64" => Some(Vendor::Nvptx),
            "amd" | "rocm" | "rocdl" | "hip" | "hsaco" | "amdgcn" | "gfx" => Some(Vendor::Amdgpu),
            "cpu" | "x86" | "x86_64" | "aarch64" | "native" | "llvm" => Some(Vendor::Host),
            "vk" | "spirv" | "spir-v" | "lavapipe" | "moltenvk" => Some(Vendor::Vulkan),
            "intel" | "ze" | "level_zero" | "level-zero" | "l0" | "oneapi" | "sycl" | "cl"
            | "xe" | "rusticl" => Some(Vendor::OpenCl),
            _ => None,
        }
    }

    /// The gpu-embed feature that compiles in the driver running its objects, where one does
    /// (`vulkan`: the Vulkan driver brings the `ash` crate); the other drivers are always there.
    pub fn runtime_feature(self) -> Option<&'static str> {
        match self {
            Vendor::Vulkan => Some("vulkan"),
            Vendor::Nvptx | Vendor::Amdgpu | Vendor::Host | Vendor::OpenCl => None,
        }
    }

    /// The vendor's name as gpu-build and `include_gpu_binary!` spell it: `nvptx`, `amdgpu`,
    /// `host`, `vulkan`, `opencl`.
    pub fn name(self) -> &'static str {
        match self {
            Vendor::Nvptx => "nvptx",
            Vendor::Amdgpu => "amdgpu",
            Vendor::Host => "host",
            Vendor::Vulkan => "vulkan",
            Vendor::OpenCl => "opencl",
        }
    }

    /// The variant's name in Rust (`Nvptx`, `OpenCl`), for code that generates a path to it
    /// (`include_gpu_binary!`'s `::gpu_embed::Vendor::Nvptx`).
    pub fn variant_name(self) -> &'static str {
        match self {
            Vendor::Nvptx => "Nvptx",
            Vendor::Amdgpu => "Amdgpu",
            Vendor::Host => "Host",
            Vendor::Vulkan => "Vulkan",
            Vendor::OpenCl => "OpenCl",
        }
    }
}

impl fmt::Display for Vendor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What kind of bytes an object holds; the names follow upstream's `gpu.object` formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Format {
    /// Target assembly: PTX for NVPTX (the driver can JIT it for newer chips).
    Isa,
    /// A loadable binary: cubin for NVPTX, hsaco for AMDGPU.
    Bin,
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Format::Isa => "isa",
            Format::Bin => "bin",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_opencl_targets_former_name_still_means_it() {
        assert_eq!(Vendor::from_name("opencl"), Some(Vendor::OpenCl));
        assert_eq!(Vendor::from_name("levelzero"), Some(Vendor::OpenCl));
        assert_eq!(Vendor::OpenCl.name(), "opencl");
        assert_eq!(Vendor::from_name("level_zero"), None);
        assert_eq!(Vendor::from_alias("level_zero"), Some(Vendor::OpenCl));
    }

    #[test]
    fn each_vendor_names_its_rust_variant() {
        assert_eq!(Vendor::Nvptx.variant_name(), "Nvptx");
        assert_eq!(Vendor::OpenCl.variant_name(), "OpenCl");
        for vendor in Vendor::ALL {
            assert_eq!(format!("{vendor:?}"), vendor.variant_name());
        }
    }
}
