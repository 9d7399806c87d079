//! Which Level Zero object runs on a device: the SPIR-V of the newest version it takes.

use crate::binary::Object;

/// `spirv1.2` → (1, 2).
fn spirv_version(chip: &str) -> Option<(u32, u32)> {
    let (major, minor) = chip.strip_prefix("spirv")?.split_once('.')?;
    Some((major.parse().ok()?, minor.parse().ok()?))
}

/// For a Level Zero device taking SPIR-V up to `arch` (`spirv1.2`), the object of the newest
/// SPIR-V version it takes.
pub(crate) fn select<'b>(
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
