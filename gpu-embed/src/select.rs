//! Which embedded object runs on a device. NVIDIA: the cubin for the device's exact sm, else a
//! cubin of the same major version and an older minor (cubins run on later minors of their
//! major), else the PTX of the highest sm not above the device's (the driver compiles it). AMD:
//! the hsaco for the device's gfx, its `:xnack±` / `:sramecc±` settings respected (an object
//! without a setting runs either way). Vulkan: the SPIR-V of the highest `vulkanX.Y` not above
//! the device's Vulkan version (the SPIR-V capabilities it declares are checked when it loads).

use crate::binary::{Binary, Format, Object, Vendor};
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
}

/// No embedded object can run on the device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NoFit {
    /// The device, for the message.
    pub device: String,
    /// The gpu.module whose objects do not fit.
    pub binary: &'static str,
    /// What was embedded (vendor and chip of each object).
    pub objects: Vec<String>,
}

impl fmt::Display for NoFit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "no object of gpu.module @{} runs on {}; embedded: {}. Add the device's chip to the \
             targets of include_gpu_binary! (or GPU_BUILD_NVPTX_CHIPS / GPU_BUILD_AMDGPU_CHIPS)",
            self.binary,
            self.device,
            if self.objects.is_empty() {
                "none".to_string()
            } else {
                self.objects.join(", ")
            }
        )
    }
}

/// `sm_86` → (8, 6); suffixed architectures (`sm_90a`) only match themselves.
fn sm_version(chip: &str) -> Option<(u32, u32, bool)> {
    let digits = chip.strip_prefix("sm_")?;
    let number: String = digits.chars().take_while(|c| c.is_ascii_digit()).collect();
    let suffixed = number.len() != digits.len();
    let value: u32 = number.parse().ok()?;
    Some((value / 10, value % 10, suffixed))
}

/// `gfx90a:sramecc+:xnack-` → ("gfx90a", [("sramecc", '+'), ("xnack", '-')]).
fn gfx_parts(chip: &str) -> (&str, Vec<(&str, char)>) {
    let mut parts = chip.split(':');
    let base = parts.next().unwrap_or_default();
    let settings = parts
        .filter_map(|p| {
            let sign = p.chars().last()?;
            matches!(sign, '+' | '-').then(|| (&p[..p.len() - 1], sign))
        })
        .collect();
    (base, settings)
}

/// The object of `binary` to load on `device`, by the rules above (NVIDIA: exact cubin, a cubin
/// of an older minor of the same major, then PTX; AMD: the hsaco for its gfx and settings);
/// [`NoFit`] lists what was embedded.
pub fn select<'b>(binary: &'b Binary, device: &DeviceArch) -> Result<&'b Object, NoFit> {
    let candidates = binary
        .objects()
        .iter()
        .filter(|o| o.vendor() == device.vendor);
    let chosen = match device.vendor {
        Vendor::Nvptx => select_nvidia(candidates, &device.arch),
        Vendor::Amdgpu => select_amd(candidates, &device.arch),
        // Linked into this program, so built for the triple it runs on.
        Vendor::Host => candidates.into_iter().next(),
        Vendor::Vulkan => select_vulkan(candidates, &device.arch),
        Vendor::LevelZero => select_level_zero(candidates, &device.arch),
    };
    chosen.ok_or_else(|| NoFit {
        device: format!("{} ({} {})", device.name, device.vendor, device.arch),
        binary: binary.name(),
        objects: binary.objects().iter().map(Object::describe).collect(),
    })
}

fn select_nvidia<'b>(
    candidates: impl Iterator<Item = &'b Object> + Clone,
    arch: &str,
) -> Option<&'b Object> {
    let (major, minor, _) = sm_version(arch)?;
    let bins = candidates.clone().filter(|o| o.format() == Format::Bin);
    if let Some(exact) = bins.clone().find(|o| o.chip() == arch) {
        return Some(exact);
    }
    let same_major = bins
        .filter_map(|o| Some((sm_version(o.chip())?, o)))
        .filter(|((m, n, suffixed), _)| *m == major && *n <= minor && !suffixed)
        .max_by_key(|((_, n, _), _)| *n);
    if let Some((_, object)) = same_major {
        return Some(object);
    }
    candidates
        .filter(|o| o.format() == Format::Isa)
        .filter_map(|o| Some((sm_version(o.chip())?, o)))
        .filter(|((m, n, suffixed), o)| {
            (*m, *n) <= (major, minor) && (!suffixed || o.chip() == arch)
        })
        .max_by_key(|((m, n, _), _)| (*m, *n))
        .map(|(_, object)| object)
}

fn select_vulkan<'b>(
    candidates: impl Iterator<Item = &'b Object>,
    arch: &str,
) -> Option<&'b Object> {
    let device = vulkan_version(arch)?;
    candidates
        .filter_map(|o| Some((vulkan_version(o.chip())?, o)))
        .filter(|(version, _)| *version <= device)
        .max_by_key(|(version, _)| *version)
        .map(|(_, object)| object)
}

/// For a Level Zero device taking SPIR-V up to `arch` (`spirv1.2`), the object of the newest
/// SPIR-V version it takes.
fn select_level_zero<'b>(
    candidates: impl Iterator<Item = &'b Object>,
    arch: &str,
) -> Option<&'b Object> {
    let device = spirv_version(arch)?;
    candidates
        .filter_map(|o| Some((spirv_version(o.chip())?, o)))
        .filter(|(version, _)| *version <= device)
        .max_by_key(|(version, _)| *version)
        .map(|(_, object)| object)
}

/// `spirv1.2` → (1, 2).
fn spirv_version(chip: &str) -> Option<(u32, u32)> {
    let (major, minor) = chip.strip_prefix("spirv")?.split_once('.')?;
    Some((major.parse().ok()?, minor.parse().ok()?))
}

/// `vulkan1.2` → (1, 2).
pub(crate) fn vulkan_version(chip: &str) -> Option<(u32, u32)> {
    let (major, minor) = chip.strip_prefix("vulkan")?.split_once('.')?;
    Some((major.parse().ok()?, minor.parse().ok()?))
}

fn select_amd<'b>(
    candidates: impl Iterator<Item = &'b Object> + Clone,
    arch: &str,
) -> Option<&'b Object> {
    let (base, settings) = gfx_parts(arch);
    let bins = candidates.filter(|o| o.format() == Format::Bin);
    if let Some(exact) = bins.clone().find(|o| o.chip() == arch) {
        return Some(exact);
    }
    bins.filter(|o| {
        let (object_base, object_settings) = gfx_parts(o.chip());
        object_base == base
            && object_settings
                .iter()
                .all(|(feature, sign)| settings.iter().any(|(f, s)| f == feature && s == sign))
    })
    // The most specific compatible object.
    .max_by_key(|o| gfx_parts(o.chip()).1.len())
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn amd_respects_feature_settings() {
        assert_eq!(chosen(Vendor::Amdgpu, "gfx1100").unwrap(), b"hsaco1100");
        assert_eq!(
            chosen(Vendor::Amdgpu, "gfx942:sramecc+:xnack-").unwrap(),
            b"hsaco942"
        );
        assert!(chosen(Vendor::Amdgpu, "gfx942:sramecc+:xnack+").is_err());
    }

    #[test]
    fn vulkan_takes_the_newest_version_the_device_has() {
        static VULKAN: [Object; 3] = [
            Object::vulkan("vulkan1.1", b"spirv11", &["Shader"], &[]),
            Object::vulkan("vulkan1.3", b"spirv13", &["Shader"], &[]),
            Object::vulkan("vulkan1.2", b"spirv12", &["Shader"], &[]),
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
    fn level_zero_takes_the_newest_spirv_the_driver_takes() {
        static SPIRV: [Object; 2] = [
            Object::new(Vendor::LevelZero, "spirv1.0", Format::Bin, b"spirv10"),
            Object::new(Vendor::LevelZero, "spirv1.3", Format::Bin, b"spirv13"),
        ];
        static BINARY: Binary = Binary::new("k", &SPIRV, &["k"]);
        let chosen =
            |arch: &str| select(&BINARY, &device(Vendor::LevelZero, arch)).map(|o| o.bytes());
        assert_eq!(chosen("spirv1.4").unwrap(), b"spirv13");
        assert_eq!(chosen("spirv1.3").unwrap(), b"spirv13");
        assert_eq!(chosen("spirv1.2").unwrap(), b"spirv10");
        assert!(chosen("spirv0.9").is_err());
        assert!(chosen("vulkan1.3").is_err());
    }

    #[test]
    fn no_fit_names_the_device_and_every_object() {
        let error = chosen(Vendor::Amdgpu, "gfx90a").unwrap_err();
        let message = error.to_string();
        assert!(message.contains("test GPU (amdgpu gfx90a)"), "{message}");
        assert!(message.contains("amdgpu gfx1100 hsaco"), "{message}");
        assert!(message.contains("nvptx sm_80 PTX"), "{message}");
    }
}
