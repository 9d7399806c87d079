//! Which Vulkan object runs on a device: the SPIR-V of the highest `vulkanX.Y` not above the
//! device's Vulkan version (the SPIR-V capabilities it declares are checked when it loads).

use crate::binary::Object;

/// `vulkan1.2` → (1, 2).
pub(crate) fn vulkan_version(chip: &str) -> Option<(u32, u32)> {
    let (major, minor) = chip.strip_prefix("vulkan")?.split_once('.')?;
    Some((major.parse().ok()?, minor.parse().ok()?))
}

/// The object of `candidates` for a device of Vulkan version `arch` (`vulkan1.3`).
pub(crate) fn select<'b>(
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
