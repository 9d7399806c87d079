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
    /// Intel GPUs through Level Zero (oneAPI's driver interface): OpenCL-style SPIR-V (physical
    /// 64-bit pointers, the `Kernel` capability) through MLIR's SPIR-V conversion.
    #[serde(rename = "levelzero")]
    LevelZero,
}

impl Vendor {
    /// Every target, in declaration order (`vendor as usize` indexes it).
    pub const ALL: [Vendor; 5] = [
        Vendor::Nvptx,
        Vendor::Amdgpu,
        Vendor::Host,
        Vendor::Vulkan,
        Vendor::LevelZero,
    ];
    /// The GPU vendors (every vendor but the host).
    pub const GPUS: [Vendor; 4] = [
        Vendor::Nvptx,
        Vendor::Amdgpu,
        Vendor::Vulkan,
        Vendor::LevelZero,
    ];

    /// The vendor `name` spells ([`Vendor::name`]), if any.
    pub fn from_name(name: &str) -> Option<Vendor> {
        Vendor::ALL.into_iter().find(|vendor| vendor.name() == name)
    }

    /// The chips a bare vendor builds for (`targets = [nvptx]` in `include_gpu_binary!`,
    /// `Build::target(vendor, &[])`) when the kernel file has no target attribute of its own: for
    /// NVIDIA a cubin for Turing, Ampere and Hopper and their PTX (which newer GPUs compile at
    /// load time); for AMD MI200, MI300 and RDNA3; for the host none (the build's own triple);
    /// for Vulkan one SPIR-V object for Vulkan 1.1 and newer (subgroup operations need 1.1);
    /// for Level Zero one SPIR-V 1.0 object (every Level Zero driver takes it).
    pub const fn default_chips(self) -> &'static [&'static str] {
        match self {
            Vendor::Nvptx => &["sm_75", "sm_80", "sm_90"],
            Vendor::Amdgpu => &["gfx90a", "gfx942", "gfx1100"],
            Vendor::Host => &[],
            Vendor::Vulkan => &["vulkan1.1"],
            Vendor::LevelZero => &["spirv1.0"],
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
            (Vendor::LevelZero, _) => "OpenCL SPIR-V",
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
            "intel" | "ze" | "level_zero" | "level-zero" | "l0" | "oneapi" | "sycl" | "opencl"
            | "xe" => Some(Vendor::LevelZero),
            _ => None,
        }
    }

    /// The vendor's name as gpu-build and `include_gpu_binary!` spell it: `nvptx`, `amdgpu`,
    /// `host`, `vulkan`, `levelzero`.
    pub fn name(self) -> &'static str {
        match self {
            Vendor::Nvptx => "nvptx",
            Vendor::Amdgpu => "amdgpu",
            Vendor::Host => "host",
            Vendor::Vulkan => "vulkan",
            Vendor::LevelZero => "levelzero",
        }
    }

    /// The variant's name in Rust (`Nvptx`, `LevelZero`), for code that generates a path to it
    /// (`include_gpu_binary!`'s `::gpu_embed::Vendor::Nvptx`).
    pub fn variant_name(self) -> &'static str {
        match self {
            Vendor::Nvptx => "Nvptx",
            Vendor::Amdgpu => "Amdgpu",
            Vendor::Host => "Host",
            Vendor::Vulkan => "Vulkan",
            Vendor::LevelZero => "LevelZero",
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
    fn each_vendor_names_its_rust_variant() {
        assert_eq!(Vendor::Nvptx.variant_name(), "Nvptx");
        assert_eq!(Vendor::LevelZero.variant_name(), "LevelZero");
        for vendor in Vendor::ALL {
            assert_eq!(format!("{vendor:?}"), vendor.variant_name());
        }
    }
}
