//! Which AMD object runs on a device: the hsaco for the device's gfx, its `:xnack±` /
//! `:sramecc±` settings respected (an object without a setting runs either way).

use crate::binary::{Format, Object};

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

/// The object of `candidates` for the device `arch` (`gfx90a:sramecc+:xnack-`), by the
/// rules above: the most specific compatible one.
pub(crate) fn select<'b>(
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
