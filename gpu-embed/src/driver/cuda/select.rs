//! Which NVIDIA object runs on a device: an arch-specific cubin (`sm_90a`) of exactly the device's
//! compute capability (it runs only there, and uses what only that chip has: wgmma on 9.0), else
//! the cubin for the device's exact sm, else a cubin of the same major version and an older minor
//! (cubins run on later minors of their major), else PTX: the arch-specific PTX of the device's
//! compute capability, else that of the highest sm not above the device's (the driver compiles
//! it).

use crate::binary::{Format, Object};

/// `sm_86` → (8, 6); suffixed architectures (`sm_90a`) only match themselves.
fn sm_version(chip: &str) -> Option<(u32, u32, bool)> {
    let digits = chip.strip_prefix("sm_")?;
    let number: String = digits.chars().take_while(|c| c.is_ascii_digit()).collect();
    let suffixed = number.len() != digits.len();
    let value: u32 = number.parse().ok()?;
    Some((value / 10, value % 10, suffixed))
}

/// The object of `candidates` for the device `arch` (`sm_86`), by the rules above.
pub(crate) fn select<'b>(
    candidates: impl Iterator<Item = &'b Object> + Clone,
    arch: &str,
) -> Option<&'b Object> {
    let (major, minor, _) = sm_version(arch)?;
    let arch_specific = |format: Format| {
        candidates
            .clone()
            .filter(move |o| o.format() == format)
            .find(|o| sm_version(o.chip()) == Some((major, minor, true)))
    };
    if let Some(specific) = arch_specific(Format::Bin) {
        return Some(specific);
    }
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
    if let Some(specific) = arch_specific(Format::Isa) {
        return Some(specific);
    }
    candidates
        .filter(|o| o.format() == Format::Isa)
        .filter_map(|o| Some((sm_version(o.chip())?, o)))
        .filter(|((m, n, suffixed), _)| (*m, *n) <= (major, minor) && !suffixed)
        .max_by_key(|((m, n, _), _)| (*m, *n))
        .map(|(_, object)| object)
}
