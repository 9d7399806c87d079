//! AMDGPU chips and features: the `gfx*` processors LLVM 22 knows, the feature suffixes a chip
//! name may carry, and the mode features a target may turn on or off.

use crate::error::{Error, ErrorKind, Result};
use crate::targets::interface::Chip;
use crate::targets::support::chips::{feature_items, parse_chip, unknown_feature, ChipRules};
use gpu_manifest::Vendor;

/// Only the `gfx*` names: the marketing aliases (`tahiti`, `fiji`, ...) and `generic` are not
/// useful as hsaco targets.
pub(crate) const AMDGPU_CHIPS: &[&str] = &[
    "gfx600",
    "gfx601",
    "gfx602",
    "gfx700",
    "gfx701",
    "gfx702",
    "gfx703",
    "gfx704",
    "gfx705",
    "gfx801",
    "gfx802",
    "gfx803",
    "gfx805",
    "gfx810",
    "gfx900",
    "gfx902",
    "gfx904",
    "gfx906",
    "gfx908",
    "gfx909",
    "gfx90a",
    "gfx90c",
    "gfx942",
    "gfx950",
    "gfx1010",
    "gfx1011",
    "gfx1012",
    "gfx1013",
    "gfx1030",
    "gfx1031",
    "gfx1032",
    "gfx1033",
    "gfx1034",
    "gfx1035",
    "gfx1036",
    "gfx1100",
    "gfx1101",
    "gfx1102",
    "gfx1103",
    "gfx1150",
    "gfx1151",
    "gfx1152",
    "gfx1153",
    "gfx1200",
    "gfx1201",
    "gfx1250",
    "gfx1251",
    "gfx9-generic",
    "gfx9-4-generic",
    "gfx10-1-generic",
    "gfx10-3-generic",
    "gfx11-generic",
    "gfx12-generic",
];

/// Each generic processor (code object v6: one object for a family of chips) and the oldest
/// chip of its family (LLVM's AMDGPU generic processor table). MLIR's lowering parses only
/// `gfxNNN` chipsets, so a generic processor is lowered as that chip, which has nothing the
/// family lacks, and compiled by LLVM as itself.
pub(crate) const GENERIC_FAMILIES: [(&str, &str); 6] = [
    ("gfx9-generic", "gfx900"),
    ("gfx9-4-generic", "gfx940"),
    ("gfx10-1-generic", "gfx1010"),
    ("gfx10-3-generic", "gfx1030"),
    ("gfx11-generic", "gfx1100"),
    ("gfx12-generic", "gfx1200"),
];

/// The chip whose lowering and device-library ISA version stand for `processor`: its
/// family's oldest chip for a generic processor, itself otherwise.
pub(crate) fn lowered_as(processor: &str) -> &str {
    GENERIC_FAMILIES
        .iter()
        .find(|(generic, _)| *generic == processor)
        .map_or(processor, |(_, oldest)| oldest)
}

/// Target features an AMDGPU chip name may carry as suffixes (`gfx90a:sramecc+:xnack-`).
const AMDGPU_CHIP_FEATURES: &[&str] = &["xnack", "sramecc"];

/// AMDGPU features that select a mode of the chip rather than describe its hardware: the ones a
/// target may name. Turning off a feature the hardware has (`-flat-address-space`) makes LLVM's
/// instruction selection abort the process.
pub(crate) const AMDGPU_MODE_FEATURES: &[&str] = &[
    "xnack",
    "sramecc",
    "wavefrontsize32",
    "wavefrontsize64",
    "cumode",
    "tgsplit",
];

/// The chip examples and messages show.
pub(crate) const EXAMPLE: &str = "gfx90a";

/// Checks an AMDGPU chip, splitting `:xnack±` / `:sramecc±` off as features.
pub(crate) fn parse(chip: &str) -> Result<Chip> {
    parse_chip(
        &ChipRules {
            vendor: Vendor::Amdgpu,
            known: AMDGPU_CHIPS,
            suffixes: AMDGPU_CHIP_FEATURES,
            suffix_help: "AMDGPU chips take `:xnack+`, `:xnack-`, `:sramecc+` or `:sramecc-`",
            example: EXAMPLE,
        },
        chip,
    )
}

/// AMDGPU features may turn mode features on or off, one wave size at most.
pub(crate) fn check_features(features: &str) -> Result<()> {
    let items = feature_items(features);
    for &(sign, name) in &items {
        if !((sign == "+" || sign == "-") && AMDGPU_MODE_FEATURES.contains(&name)) {
            return Err(unknown_feature(
                sign,
                name,
                &format!(
                    "AMDGPU features may turn on or off only {}; the chip implies the rest",
                    AMDGPU_MODE_FEATURES
                        .iter()
                        .map(|f| format!("`{f}`"))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            ));
        }
    }
    if items.contains(&("+", "wavefrontsize32")) && items.contains(&("+", "wavefrontsize64")) {
        return Err(Error::new(
            ErrorKind::InvalidTarget,
            "`+wavefrontsize32` and `+wavefrontsize64` together: a wave has one size; keep one",
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::targets::support::chips::{llc_cpus, llc_help};

    #[test]
    fn splits_amdgpu_feature_suffixes() {
        let chip = parse("gfx90a:sramecc+:xnack-").unwrap();
        assert_eq!(chip.processor, "gfx90a");
        assert_eq!(chip.features, "+sramecc,-xnack");
    }

    #[test]
    fn unknown_chips_are_rejected() {
        let err = parse("sm_80").unwrap_err();
        assert!(err.message().contains("valid chips: gfx600"), "{err}");
        assert!(parse("gfx90a:foo+").is_err());
        assert!(parse(" ").unwrap_err().message().contains("empty"));
    }

    #[test]
    fn features_are_checked() {
        assert!(check_features("+wavefrontsize64, -xnack").is_ok());
        for bad in [
            "-flat-address-space",
            "+foo",
            "xnack",
            "+wavefrontsize32,+wavefrontsize64",
        ] {
            assert!(check_features(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn mode_features_are_llvms() {
        let amdgpu = llc_help("amdgcn", "-mattr=help");
        for feature in AMDGPU_MODE_FEATURES {
            assert!(
                amdgpu
                    .lines()
                    .any(|line| line.split_whitespace().next() == Some(feature)),
                "LLVM 22 has no AMDGPU feature `{feature}`"
            );
        }
    }

    /// The list above must be exactly what LLVM 22 accepts (`llc -mcpu=help`), `gfx*` only.
    #[test]
    fn chip_list_matches_llvm() {
        let mut from_llvm: Vec<String> = llc_cpus("amdgcn")
            .into_iter()
            .filter(|cpu| cpu.starts_with("gfx"))
            .collect();
        let mut ours: Vec<String> = AMDGPU_CHIPS.iter().map(|c| c.to_string()).collect();
        from_llvm.sort();
        ours.sort();
        assert_eq!(ours, from_llvm, "amdgpu chip list differs from llc-22");
    }
}
