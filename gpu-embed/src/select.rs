//! Which embedded object runs on a device. NVIDIA: the cubin for the device's exact sm, else a
//! cubin of the same major version and an older minor (cubins run on later minors of their
//! major), else the PTX of the highest sm not above the device's (the driver compiles it). AMD:
//! the hsaco for the device's gfx, its `:xnack±` / `:sramecc±` settings respected (an object
//! without a setting runs either way). Vulkan: the SPIR-V of the highest `vulkanX.Y` not above
//! the device's Vulkan version (the SPIR-V capabilities it declares are checked when it loads).
//!
//! Where the driver's version is known (CUDA's `cuDriverGetVersion`, HIP's
//! `hipDriverGetVersion`), an object the driver cannot load is never chosen: a cubin built by a
//! newer CUDA major version than the driver's, PTX of an ISA newer than the driver's JIT knows,
//! an AMDGPU code object version newer than the ROCm runtime's loader takes
//! (`gpu_manifest::LoadRequirement`, read from each object when it was built). No fit names the
//! driver's version, what each object needs, and the fix. Each driver's chip rules live in its
//! folder (`driver/<name>/select.rs`), picked by the driver registry.

use crate::binary::{Binary, LoadRequirement, Object, Vendor};
use crate::driver;
use gpu_manifest::DriverVersion;
use std::fmt;

/// What selection needs to know about a device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceArch {
    /// Which driver runs it.
    pub vendor: Vendor,
    /// `sm_86`, `gfx90a:sramecc+:xnack-`.
    pub arch: String,
    /// For messages: `NVIDIA H200`.
    pub name: String,
    /// The driver's version where it matters to loading (a CUDA driver's, a ROCm release's).
    /// `None`: unknown, not checked.
    pub driver_version: Option<DriverVersion>,
}

/// No embedded object can run on the device. Its message is at most three lines: the device,
/// what was built for its kind of device (and, in a word, for the others), and the fix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NoFit {
    /// The device, for the message.
    pub device: String,
    /// The gpu.module whose objects do not fit.
    pub binary: &'static str,
    /// The device's driver.
    pub vendor: Vendor,
    /// The device's chip (`sm_75`, `gfx90a`, `vulkan1.3`).
    pub arch: String,
    /// The objects embedded for the device's driver (chip, kind, and what loading each needs).
    pub objects: Vec<String>,
    /// The other drivers objects were embedded for.
    pub other_targets: Vec<Vendor>,
    /// Why objects for the device's chip were passed over: its driver is too old for them.
    pub driver_too_old: Option<String>,
}

impl fmt::Display for NoFit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let vendor = self.vendor;
        writeln!(
            f,
            "no object of gpu.module @{} runs on {}",
            self.binary, self.device
        )?;
        let others = if self.other_targets.is_empty() {
            String::new()
        } else {
            let names: Vec<&str> = self.other_targets.iter().map(|v| v.name()).collect();
            format!("; also built for {}", names.join(", "))
        };
        if self.objects.is_empty() {
            writeln!(f, "  built for no {vendor} chip{others}")?;
        } else {
            writeln!(
                f,
                "  built for {vendor}: {}{others}",
                self.objects.join(", ")
            )?;
        }
        match &self.driver_too_old {
            Some(fix) => write!(f, "  {fix}"),
            // Without any object of the vendor, the vendor's default chips may run here too.
            None if self.objects.is_empty() => write!(
                f,
                "  add `{vendor}` (or `{vendor}({})`) to the targets of include_gpu_binary!",
                self.arch
            ),
            None => write!(
                f,
                "  add `{vendor}({arch})` to the targets of include_gpu_binary! (or build with \
                 GPU_BUILD_{upper}_CHIPS={arch})",
                arch = self.arch,
                upper = vendor.name().to_uppercase()
            ),
        }
    }
}

/// The object of `binary` to load on `device`, by the rules above (NVIDIA: exact cubin, a cubin
/// of an older minor of the same major, then PTX; AMD: the hsaco for its gfx and settings);
/// [`NoFit`] lists what was embedded.
pub fn select<'b>(binary: &'b Binary, device: &DeviceArch) -> Result<&'b Object, NoFit> {
    let candidates = binary
        .objects()
        .iter()
        .filter(|o| o.vendor() == device.vendor);
    let loadable = candidates.filter(|o| loads_on(o, device.driver_version));
    let chosen = driver::registry::select_for_chip(device.vendor, loadable, &device.arch);
    chosen.ok_or_else(|| {
        let driver = match device.driver_version {
            Some(DriverVersion::Cuda { major, minor }) => format!(", CUDA driver {major}.{minor}"),
            Some(rocm) => format!(", {rocm}"),
            None => String::new(),
        };
        let mut other_targets: Vec<Vendor> = Vec::new();
        for object in binary.objects() {
            if object.vendor() != device.vendor && !other_targets.contains(&object.vendor()) {
                other_targets.push(object.vendor());
            }
        }
        NoFit {
            device: format!(
                "{} ({} {}{driver})",
                device.name, device.vendor, device.arch
            ),
            binary: binary.name(),
            vendor: device.vendor,
            arch: device.arch.clone(),
            objects: binary
                .objects()
                .iter()
                .filter(|o| o.vendor() == device.vendor)
                .map(Object::describe)
                .collect(),
            other_targets,
            driver_too_old: driver_too_old(binary, device),
        }
    })
}

/// Whether a device whose driver is `driver` loads `object` (unknown versions and
/// requirements are not checked).
fn loads_on(object: &Object, driver: Option<DriverVersion>) -> bool {
    match (object.requires(), driver) {
        (Some(requirement), Some(driver)) => requirement.loads_on(driver),
        _ => true,
    }
}

/// When the device's chip has objects its driver is too old for: the fix, naming the driver
/// version each of them needs.
fn driver_too_old(binary: &Binary, device: &DeviceArch) -> Option<String> {
    let driver = device.driver_version?;
    let fitting_but_too_new = binary
        .objects()
        .iter()
        .filter(|o| o.vendor() == device.vendor)
        .filter(|o| {
            driver::registry::select_for_chip(device.vendor, std::iter::once(*o), &device.arch)
                .is_some()
        })
        .filter(|o| !loads_on(o, Some(driver)))
        .collect::<Vec<_>>();
    // Whether one of them is for the device's own chip (not a family's, as AMD's generic
    // processors are, which exist only in the newest code object version).
    let base = |chip: &str| chip.split(':').next().unwrap_or_default().to_string();
    let own_chip = fitting_but_too_new
        .iter()
        .any(|o| base(o.chip()) == base(&device.arch));
    let fitting_but_too_new = fitting_but_too_new.into_iter().filter_map(Object::requires);
    match driver {
        DriverVersion::Cuda { .. } => {
            let (need_major, need_minor) = fitting_but_too_new
                .filter_map(|r| r.oldest_cuda_driver())
                .min()?;
            Some(format!(
                "The driver ({driver}) is older than these objects need: update it to CUDA \
                 {need_major}.{need_minor} or newer, build with a CUDA toolkit no newer than the \
                 driver (its ptxas makes the cubins), or add an older chip to the targets as a \
                 fallback (LLVM writes each chip's PTX at the oldest ISA the chip allows: \
                 sm_70's is PTX ISA 6.0, which CUDA 9.0 drivers and newer compile)"
            ))
        }
        DriverVersion::Rocm { .. } => {
            let (need_major, need_minor) =
                fitting_but_too_new.filter_map(|r| r.oldest_rocm()).min()?;
            let v4 = LoadRequirement::CodeObject { version: 4 };
            let fix = if !own_chip {
                format!(
                    ", or add `{}({})` to the targets of include_gpu_binary! (an object of the \
                     chip's own, which this runtime loads)",
                    device.vendor,
                    base(&device.arch)
                )
            } else if v4.loads_on(driver) {
                ", or build them as code object v4, which this runtime loads (`abi = \"400\"` \
                 in the module's `#rocdl.target`)"
                    .to_string()
            } else {
                String::new()
            };
            Some(format!(
                "The HIP runtime ({driver}) is older than these objects need: update it to ROCm \
                 {need_major}.{need_minor} or newer{fix}"
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::binary::Format;

    static OBJECTS: [Object; 5] = [
        Object::new(Vendor::Nvptx, "sm_80", Format::Bin, b"cubin80"),
        Object::new(Vendor::Nvptx, "sm_90", Format::Bin, b"cubin90"),
        Object::new(Vendor::Nvptx, "sm_80", Format::Isa, b"ptx80"),
        Object::new(Vendor::Amdgpu, "gfx1100", Format::Bin, b"hsaco1100"),
        Object::new(Vendor::Amdgpu, "gfx942:xnack-", Format::Bin, b"hsaco942"),
    ];
    static BINARY: Binary = Binary::new("k", &OBJECTS, &["k"]);

    fn device(vendor: Vendor, arch: &str) -> DeviceArch {
        DeviceArch {
            vendor,
            arch: arch.into(),
            name: "test GPU".into(),
            driver_version: None,
        }
    }

    fn chosen(vendor: Vendor, arch: &str) -> Result<&'static [u8], NoFit> {
        select(&BINARY, &device(vendor, arch)).map(|o| o.bytes())
    }

    #[test]
    fn nvidia_prefers_the_exact_cubin_then_the_same_major_then_ptx() {
        assert_eq!(chosen(Vendor::Nvptx, "sm_86").unwrap(), b"cubin80");
        assert_eq!(chosen(Vendor::Nvptx, "sm_90").unwrap(), b"cubin90");
        assert_eq!(chosen(Vendor::Nvptx, "sm_100").unwrap(), b"ptx80");
        assert!(
            chosen(Vendor::Nvptx, "sm_75").is_err(),
            "PTX for sm_80 cannot run on sm_75"
        );
    }

    /// Arch-specific objects (`sm_90a`) run on exactly their compute capability, where they win
    /// over the plain ones; a device named `sm_90` (as CUDA reports 9.0) gets them (issue 61,
    /// item 1: an `sm_90a`-only module had no fitting object on an H100).
    #[test]
    fn nvidia_prefers_an_arch_specific_object_on_its_own_compute_capability() {
        static ONLY_SPECIFIC: [Object; 2] = [
            Object::new(Vendor::Nvptx, "sm_90a", Format::Bin, b"cubin90a"),
            Object::new(Vendor::Nvptx, "sm_90a", Format::Isa, b"ptx90a"),
        ];
        static SPECIFIC: Binary = Binary::new("k", &ONLY_SPECIFIC, &["k"]);
        static BOTH: [Object; 4] = [
            Object::new(Vendor::Nvptx, "sm_90", Format::Bin, b"cubin90"),
            Object::new(Vendor::Nvptx, "sm_90a", Format::Bin, b"cubin90a"),
            Object::new(Vendor::Nvptx, "sm_90", Format::Isa, b"ptx90"),
            Object::new(Vendor::Nvptx, "sm_90a", Format::Isa, b"ptx90a"),
        ];
        static PLAIN_AND_SPECIFIC: Binary = Binary::new("k", &BOTH, &["k"]);
        let on = |binary: &'static Binary, arch: &str| {
            select(binary, &device(Vendor::Nvptx, arch)).map(|o| o.bytes())
        };
        assert_eq!(on(&SPECIFIC, "sm_90").unwrap(), b"cubin90a");
        assert_eq!(on(&PLAIN_AND_SPECIFIC, "sm_90").unwrap(), b"cubin90a");
        // Only on 9.0: a 10.0 device JITs the plain PTX, an 8.9 one has nothing.
        assert_eq!(on(&PLAIN_AND_SPECIFIC, "sm_100").unwrap(), b"ptx90");
        assert!(on(&SPECIFIC, "sm_100").is_err());
        assert!(on(&SPECIFIC, "sm_89").is_err());
        // PTX alone: the arch-specific PTX of the device's own compute capability.
        static PTX: [Object; 2] = [
            Object::new(Vendor::Nvptx, "sm_90", Format::Isa, b"ptx90"),
            Object::new(Vendor::Nvptx, "sm_90a", Format::Isa, b"ptx90a"),
        ];
        static PTX_ONLY: Binary = Binary::new("k", &PTX, &["k"]);
        assert_eq!(on(&PTX_ONLY, "sm_90").unwrap(), b"ptx90a");
    }

    #[test]
    fn amd_respects_feature_settings() {
        assert_eq!(chosen(Vendor::Amdgpu, "gfx1100").unwrap(), b"hsaco1100");
        assert_eq!(
            chosen(Vendor::Amdgpu, "gfx942:sramecc+:xnack-").unwrap(),
            b"hsaco942"
        );
        assert!(chosen(Vendor::Amdgpu, "gfx942:sramecc+:xnack+").is_err());
    }

    /// A chip without its own hsaco runs its generic family's (code object v6) where the
    /// runtime loads v6; an older runtime is told to update, and a chip of no family is told
    /// to add itself.
    #[test]
    fn amd_falls_back_to_the_generic_family_where_the_runtime_loads_it() {
        static GENERIC: [Object; 3] = [
            Object::new(Vendor::Amdgpu, "gfx90a", Format::Bin, b"hsaco90a")
                .requiring(LoadRequirement::CodeObject { version: 5 }),
            Object::new(
                Vendor::Amdgpu,
                "gfx10-3-generic",
                Format::Bin,
                b"generic103",
            )
            .requiring(LoadRequirement::CodeObject { version: 6 }),
            Object::new(Vendor::Amdgpu, "gfx1030", Format::Bin, b"hsaco1030")
                .requiring(LoadRequirement::CodeObject { version: 5 }),
        ];
        static BINARY: Binary = Binary::new("k", &GENERIC, &["k"]);
        let on = |arch: &str, minor: u32| {
            let device = DeviceArch {
                driver_version: Some(DriverVersion::Rocm { major: 6, minor }),
                ..device(Vendor::Amdgpu, arch)
            };
            select(&BINARY, &device)
        };
        // The chip's own object wins over its family's.
        assert_eq!(on("gfx1030", 3).unwrap().bytes(), b"hsaco1030");
        assert_eq!(on("gfx1031", 3).unwrap().bytes(), b"generic103");
        assert_eq!(on("gfx1036:xnack-", 3).unwrap().bytes(), b"generic103");
        let old_runtime = on("gfx1031", 2).unwrap_err().to_string();
        assert!(
            old_runtime.contains("update it to ROCm 6.3"),
            "{old_runtime}"
        );
        assert!(old_runtime.lines().count() <= 3, "{old_runtime}");
        let no_family = on("gfx908", 3).unwrap_err().to_string();
        assert!(no_family.contains("amdgpu(gfx908)"), "{no_family}");
        assert_eq!(
            on("gfx90a:sramecc+:xnack-", 2).unwrap().bytes(),
            b"hsaco90a"
        );
    }

    #[test]
    #[cfg(feature = "vulkan")]
    fn vulkan_takes_the_newest_version_the_device_has() {
        static VULKAN: [Object; 3] = [
            Object::new(Vendor::Vulkan, "vulkan1.1", Format::Bin, b"spirv11"),
            Object::new(Vendor::Vulkan, "vulkan1.3", Format::Bin, b"spirv13"),
            Object::new(Vendor::Vulkan, "vulkan1.2", Format::Bin, b"spirv12"),
        ];
        static BINARY: Binary = Binary::new("k", &VULKAN, &["k"]);
        let chosen = |arch: &str| select(&BINARY, &device(Vendor::Vulkan, arch)).map(|o| o.bytes());
        assert_eq!(chosen("vulkan1.3").unwrap(), b"spirv13");
        assert_eq!(chosen("vulkan1.4").unwrap(), b"spirv13");
        assert_eq!(chosen("vulkan1.2").unwrap(), b"spirv12");
        assert_eq!(chosen("vulkan1.1").unwrap(), b"spirv11");
        assert!(chosen("vulkan1.0").is_err());
        assert!(chosen("sm_80").is_err());
    }

    #[test]
    fn opencl_takes_the_newest_spirv_the_driver_takes() {
        static SPIRV: [Object; 2] = [
            Object::new(Vendor::OpenCl, "spirv1.0", Format::Bin, b"spirv10"),
            Object::new(Vendor::OpenCl, "spirv1.3", Format::Bin, b"spirv13"),
        ];
        static BINARY: Binary = Binary::new("k", &SPIRV, &["k"]);
        let chosen = |arch: &str| select(&BINARY, &device(Vendor::OpenCl, arch)).map(|o| o.bytes());
        assert_eq!(chosen("spirv1.4").unwrap(), b"spirv13");
        assert_eq!(chosen("spirv1.3").unwrap(), b"spirv13");
        assert_eq!(chosen("spirv1.2").unwrap(), b"spirv10");
        assert!(chosen("spirv0.9").is_err());
        assert!(chosen("vulkan1.3").is_err());
    }

    /// Objects as CUDA 12.9's toolkit builds them (cubins built by 12.9; LLVM's PTX at ISA 8.0
    /// for sm_80 and 8.3 for sm_90a-only code), on drivers of several versions. Rules: NVIDIA's
    /// CUDA compatibility guide (a cubin loads on any driver of its CUDA major version or newer)
    /// and the PTX ISA release notes (PTX ISA 8.0 came with CUDA 12.0, 8.3 with 12.3).
    #[test]
    fn nvidia_selection_knows_what_each_driver_version_loads() {
        use crate::binary::LoadRequirement::{CudaToolkit, PtxIsa};
        static OBJECTS: [Object; 3] = [
            Object::new(Vendor::Nvptx, "sm_80", Format::Bin, b"cubin80").requiring(CudaToolkit {
                major: 12,
                minor: 9,
            }),
            Object::new(Vendor::Nvptx, "sm_80", Format::Isa, b"ptx80")
                .requiring(PtxIsa { major: 8, minor: 0 }),
            Object::new(Vendor::Nvptx, "sm_90", Format::Isa, b"ptx90")
                .requiring(PtxIsa { major: 8, minor: 3 }),
        ];
        static BINARY: Binary = Binary::new("k", &OBJECTS, &["k"]);
        let on = |binary: &'static Binary, arch: &str, (major, minor): (u32, u32)| {
            let device = DeviceArch {
                driver_version: Some(DriverVersion::Cuda { major, minor }),
                ..device(Vendor::Nvptx, arch)
            };
            select(binary, &device).map(|o| o.bytes())
        };
        // A 12.0 driver loads a cubin of 12.9 (minor version compatibility).
        assert_eq!(on(&BINARY, "sm_80", (12, 0)).unwrap(), b"cubin80");
        assert_eq!(on(&BINARY, "sm_86", (12, 4)).unwrap(), b"cubin80");
        // Hopper: no cubin of its major; PTX for sm_90 needs 12.3, else sm_80's PTX (ISA 8.0).
        assert_eq!(on(&BINARY, "sm_90", (12, 3)).unwrap(), b"ptx90");
        assert_eq!(on(&BINARY, "sm_90", (12, 2)).unwrap(), b"ptx80");
        // Without the driver's version, the chip alone decides.
        assert_eq!(
            select(&BINARY, &device(Vendor::Nvptx, "sm_90"))
                .unwrap()
                .bytes(),
            b"ptx90"
        );
        // A CUDA 11 driver loads none of them: the error names its version, what each object
        // needs, and the driver version that would load them.
        let message = on(&BINARY, "sm_80", (11, 8)).unwrap_err().to_string();
        for part in [
            "test GPU (nvptx sm_80, CUDA driver 11.8)",
            "nvptx sm_80 cubin (built by CUDA 12.9, a CUDA 12.x driver or newer)",
            "nvptx sm_80 PTX (PTX ISA 8.0, a CUDA 12.0 driver or newer)",
            "The driver (CUDA 11.8) is older than these objects need: update it to CUDA 12.0",
        ] {
            assert!(message.contains(part), "{part}: {message}");
        }
        // An older chip has nothing for it whatever the driver: the chip is the fix.
        let message = on(&BINARY, "sm_75", (12, 9)).unwrap_err().to_string();
        assert!(
            message.contains(
                "add `nvptx(sm_75)` to the targets of include_gpu_binary! (or build \
                              with GPU_BUILD_NVPTX_CHIPS=sm_75)"
            ),
            "{message}"
        );

        // An older chip's PTX is the fallback for older drivers: LLVM 22 writes sm_80's PTX at
        // ISA 7.0 (CUDA 11.0) and sm_70's at 6.0 (CUDA 9.0).
        static WITH_FALLBACK: [Object; 3] = [
            Object::new(Vendor::Nvptx, "sm_80", Format::Bin, b"cubin80").requiring(CudaToolkit {
                major: 12,
                minor: 9,
            }),
            Object::new(Vendor::Nvptx, "sm_80", Format::Isa, b"ptx80")
                .requiring(PtxIsa { major: 7, minor: 0 }),
            Object::new(Vendor::Nvptx, "sm_70", Format::Isa, b"ptx70")
                .requiring(PtxIsa { major: 6, minor: 0 }),
        ];
        static FALLBACK: Binary = Binary::new("k", &WITH_FALLBACK, &["k"]);
        assert_eq!(on(&FALLBACK, "sm_80", (12, 0)).unwrap(), b"cubin80");
        assert_eq!(on(&FALLBACK, "sm_80", (11, 0)).unwrap(), b"ptx80");
        assert_eq!(on(&FALLBACK, "sm_80", (10, 2)).unwrap(), b"ptx70");
        let message = on(&FALLBACK, "sm_80", (8, 0)).unwrap_err().to_string();
        assert!(
            message.contains("update it to CUDA 9.0 or newer"),
            "{message}"
        );
    }

    /// hsaco of each code object version LLVM 22 emits, on the ROCm releases users have: the
    /// loader takes v4 from ROCm 4.1, v5 from 5.2, v6 from 6.3 (ROCR-Runtime's loader at those
    /// tags; llvm-project PR 130963 for v6). Debian 12 ships ROCm 5.2.3, Debian 13 5.7.1.
    #[test]
    fn amd_selection_knows_what_each_rocm_release_loads() {
        use crate::binary::LoadRequirement::CodeObject;
        static OBJECTS: [Object; 3] = [
            Object::new(Vendor::Amdgpu, "gfx90a", Format::Bin, b"v6")
                .requiring(CodeObject { version: 6 }),
            Object::new(Vendor::Amdgpu, "gfx90a", Format::Bin, b"v5")
                .requiring(CodeObject { version: 5 }),
            Object::new(Vendor::Amdgpu, "gfx1100", Format::Bin, b"v4")
                .requiring(CodeObject { version: 4 }),
        ];
        static BINARY: Binary = Binary::new("k", &OBJECTS, &["k"]);
        let on = |binary: &'static Binary, arch: &str, rocm: Option<(u32, u32)>| {
            let device = DeviceArch {
                driver_version: rocm.map(|(major, minor)| DriverVersion::Rocm { major, minor }),
                ..device(Vendor::Amdgpu, arch)
            };
            select(binary, &device).map(|o| o.bytes())
        };
        // The newest code object the runtime loads: v6 from 6.3, v5 on 6.2 and Debian's 5.x.
        assert_eq!(on(&BINARY, "gfx90a", Some((6, 4))).unwrap(), b"v6");
        assert_eq!(on(&BINARY, "gfx90a", Some((6, 2))).unwrap(), b"v5");
        assert_eq!(on(&BINARY, "gfx90a", Some((5, 7))).unwrap(), b"v5");
        assert_eq!(on(&BINARY, "gfx90a", Some((5, 2))).unwrap(), b"v5");
        assert_eq!(on(&BINARY, "gfx1100", Some((4, 1))).unwrap(), b"v4");
        // Without the runtime's version, the chip alone decides (the first fitting object).
        assert_eq!(on(&BINARY, "gfx90a", None).unwrap(), b"v6");
        // ROCm 5.1 loads v4 but not v5 or v6: the error names the runtime, each object's need,
        // the release to update to, and the code object version this runtime takes.
        let message = on(&BINARY, "gfx90a", Some((5, 1))).unwrap_err().to_string();
        for part in [
            "test GPU (amdgpu gfx90a, ROCm 5.1)",
            "amdgpu gfx90a hsaco (code object v5, ROCm 5.2 or newer)",
            "amdgpu gfx90a hsaco (code object v6, ROCm 6.3 or newer)",
            "The HIP runtime (ROCm 5.1) is older than these objects need: update it to ROCm 5.2",
            "build them as code object v4, which this runtime loads (`abi = \"400\"`",
        ] {
            assert!(message.contains(part), "{part}: {message}");
        }
        // ROCm 4.0 loads none of LLVM 22's code objects: updating is the only fix.
        let message = on(&BINARY, "gfx1100", Some((4, 0)))
            .unwrap_err()
            .to_string();
        assert!(
            message.contains("update it to ROCm 4.1 or newer"),
            "{message}"
        );
        assert!(!message.contains("code object v4, which"), "{message}");
        // A code object version newer than the table knows loads only on a newer ROCm.
        static FUTURE: [Object; 1] = [Object::new(Vendor::Amdgpu, "gfx90a", Format::Bin, b"v7")
            .requiring(CodeObject { version: 7 })];
        static FUTURE_BINARY: Binary = Binary::new("k", &FUTURE, &["k"]);
        assert!(on(&FUTURE_BINARY, "gfx90a", Some((6, 3))).is_err());
        assert_eq!(on(&FUTURE_BINARY, "gfx90a", Some((7, 0))).unwrap(), b"v7");
        // An older chip has nothing for it whatever the runtime: the chip is the fix.
        let message = on(&BINARY, "gfx908", Some((6, 4))).unwrap_err().to_string();
        assert!(message.contains("add `amdgpu(gfx908)`"), "{message}");
    }

    /// Three lines: the device; its driver's objects, each, and the other targets in a word;
    /// the fix, naming the chip to add (or the target, where it has no object at all).
    #[test]
    fn no_fit_names_the_device_what_was_built_and_the_fix_in_three_lines() {
        let message = chosen(Vendor::Amdgpu, "gfx90a").unwrap_err().to_string();
        assert_eq!(
            message,
            "no object of gpu.module @k runs on test GPU (amdgpu gfx90a)\n  \
             built for amdgpu: amdgpu gfx1100 hsaco, amdgpu gfx942:xnack- hsaco; also built for \
             nvptx\n  add `amdgpu(gfx90a)` to the targets of include_gpu_binary! (or build with \
             GPU_BUILD_AMDGPU_CHIPS=gfx90a)"
        );
        let message = chosen(Vendor::Vulkan, "vulkan1.3").unwrap_err().to_string();
        assert_eq!(message.lines().count(), 3, "{message}");
        assert!(
            message.contains("built for no vulkan chip; also built for nvptx, amdgpu")
                && message.contains("add `vulkan` (or `vulkan(vulkan1.3)`) to the targets"),
            "{message}"
        );
    }
}
