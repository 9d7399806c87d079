//! Which AMD object runs on a device: the hsaco for the device's gfx, its `:xnack±` /
//! `:sramecc±` settings respected (an object without a setting runs either way), else the hsaco
//! of the device's generic family (`gfx10-3-generic` for a gfx1030 … gfx1036: code object v6,
//! which only runtimes that load v6 are offered, `select.rs`).

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

/// LLVM's generic processors and the chips each runs on (its AMDGPU generic processor table).
const GENERIC_FAMILIES: [(&str, &[&str]); 6] = [
    (
        "gfx9-generic",
        &["gfx900", "gfx902", "gfx904", "gfx906", "gfx909", "gfx90c"],
    ),
    ("gfx9-4-generic", &["gfx940", "gfx941", "gfx942", "gfx950"]),
    (
        "gfx10-1-generic",
        &["gfx1010", "gfx1011", "gfx1012", "gfx1013"],
    ),
    (
        "gfx10-3-generic",
        &[
            "gfx1030", "gfx1031", "gfx1032", "gfx1033", "gfx1034", "gfx1035", "gfx1036",
        ],
    ),
    (
        "gfx11-generic",
        &[
            "gfx1100", "gfx1101", "gfx1102", "gfx1103", "gfx1150", "gfx1151", "gfx1152", "gfx1153",
        ],
    ),
    ("gfx12-generic", &["gfx1200", "gfx1201"]),
];

/// The generic processor whose objects run on chip `base` (`gfx1031` → `gfx10-3-generic`).
pub(crate) fn generic_family(base: &str) -> Option<&'static str> {
    GENERIC_FAMILIES
        .iter()
        .find(|(_, members)| members.contains(&base))
        .map(|(generic, _)| *generic)
}

/// The object of `candidates` for the device `arch` (`gfx90a:sramecc+:xnack-`), by the
/// rules above: the most specific compatible one of the device's own chip, else of its
/// generic family.
pub(crate) fn select<'b>(
    candidates: impl Iterator<Item = &'b Object> + Clone,
    arch: &str,
) -> Option<&'b Object> {
    let (base, settings) = gfx_parts(arch);
    let bins = candidates.filter(|o| o.format() == Format::Bin);
    if let Some(exact) = bins.clone().find(|o| o.chip() == arch) {
        return Some(exact);
    }
    let compatible = |chip: &str| {
        bins.clone()
            .filter(|o| {
                let (object_base, object_settings) = gfx_parts(o.chip());
                object_base == chip
                    && object_settings.iter().all(|(feature, sign)| {
                        settings.iter().any(|(f, s)| f == feature && s == sign)
                    })
            })
            // The most specific compatible object.
            .max_by_key(|o| gfx_parts(o.chip()).1.len())
    };
    compatible(base).or_else(|| generic_family(base).and_then(compatible))
}
