//! NVPTX chips and features: the processors LLVM 22 knows, with the oldest PTX ISA each needs,
//! and the PTX versions a target's features may name.

use crate::error::{Error, ErrorKind, Result};
use crate::targets::interface::Chip;
use crate::targets::support::chips::{feature_items, parse_chip, unknown_feature, ChipRules};
use gpu_manifest::Vendor;

/// Each NVPTX chip with the oldest PTX ISA version (times ten) LLVM 22 emits for it. Asking for
/// an older one (`+ptx60` on sm_80) makes LLVM abort the process, so it is checked first.
pub(crate) const NVPTX_CHIPS: &[(&str, u32)] = &[
    ("sm_20", 32),
    ("sm_21", 32),
    ("sm_30", 32),
    ("sm_32", 40),
    ("sm_35", 32),
    ("sm_37", 41),
    ("sm_50", 40),
    ("sm_52", 41),
    ("sm_53", 42),
    ("sm_60", 50),
    ("sm_61", 50),
    ("sm_62", 50),
    ("sm_70", 60),
    ("sm_72", 61),
    ("sm_75", 63),
    ("sm_80", 70),
    ("sm_86", 71),
    ("sm_87", 74),
    ("sm_88", 90),
    ("sm_89", 78),
    ("sm_90", 78),
    ("sm_90a", 80),
    ("sm_100", 86),
    ("sm_100a", 86),
    ("sm_100f", 88),
    ("sm_101", 86),
    ("sm_101a", 86),
    ("sm_101f", 88),
    ("sm_103", 88),
    ("sm_103a", 88),
    ("sm_103f", 88),
    ("sm_110", 90),
    ("sm_110a", 90),
    ("sm_110f", 90),
    ("sm_120", 87),
    ("sm_120a", 87),
    ("sm_120f", 88),
    ("sm_121", 88),
    ("sm_121a", 88),
    ("sm_121f", 88),
];

/// The PTX ISA versions LLVM 22 can emit (`llc -march=nvptx64 -mattr=help`): the only NVPTX
/// features a target may name; the chip implies the rest.
pub(crate) const PTX_VERSIONS: &[u32] = &[
    32, 40, 41, 42, 43, 50, 60, 61, 62, 63, 64, 65, 70, 71, 72, 73, 74, 75, 76, 77, 78, 80, 81, 82,
    83, 84, 85, 86, 87, 88, 90,
];

/// The chip examples and messages show.
pub(crate) const EXAMPLE: &str = "sm_80";

/// Every NVPTX processor name.
pub(crate) fn known_chips() -> Vec<&'static str> {
    NVPTX_CHIPS.iter().map(|(chip, _)| *chip).collect()
}

/// Checks an NVPTX chip (no suffixes).
pub(crate) fn parse(chip: &str) -> Result<Chip> {
    parse_chip(
        &ChipRules {
            vendor: Vendor::Nvptx,
            known: &known_chips(),
            suffixes: &[],
            suffix_help: "NVPTX chips take no suffixes",
            example: EXAMPLE,
        },
        chip,
    )
}

/// NVPTX features are PTX ISA versions (`+ptx80`).
pub(crate) fn check_features(features: &str) -> Result<()> {
    for (sign, name) in feature_items(features) {
        let known = sign == "+"
            && name
                .strip_prefix("ptx")
                .and_then(|v| v.parse::<u32>().ok())
                .is_some_and(|v| PTX_VERSIONS.contains(&v));
        if !known {
            return Err(unknown_feature(
                sign,
                name,
                "NVPTX features are PTX ISA versions (`+ptx80`); the chip implies the rest",
            ));
        }
    }
    Ok(())
}

/// A requested PTX version older than the chip allows makes LLVM abort the process: refused.
pub(crate) fn check_ptx_version(chip: &str, processor: &str, features: &str) -> Result<()> {
    let Some(min) = min_ptx_version(processor) else {
        return Ok(());
    };
    let requested = features
        .split(',')
        .filter_map(|f| f.trim().strip_prefix("+ptx")?.parse::<u32>().ok())
        .max();
    if let Some(requested) = requested.filter(|&requested| requested < min) {
        return Err(Error::new(
            ErrorKind::InvalidTarget,
            format!(
                "PTX ISA {}.{} (`+ptx{requested}` in features) cannot target {chip}; it needs \
                 {}.{} or newer: use `+ptx{min}` or drop the feature to get the oldest \
                 version the chip allows",
                requested / 10,
                requested % 10,
                min / 10,
                min % 10
            ),
        ));
    }
    Ok(())
}

/// Whether an NVPTX chip has `redux.sync` (sm_80 and later).
pub(crate) fn has_redux(chip: &str) -> bool {
    sm_number(chip) >= 80
}

/// The compute capability of an NVPTX chip times ten: 90 for `sm_90` and `sm_90a`.
pub(crate) fn sm_number(chip: &str) -> u32 {
    chip.trim_start_matches("sm_")
        .chars()
        .take_while(char::is_ascii_digit)
        .collect::<String>()
        .parse()
        .unwrap_or(0)
}

/// The PTX ISA version (times ten) LLVM 22 emits for `processor` with `features`: the newest
/// `+ptxNN` asked for, else the oldest the chip allows.
pub(crate) fn ptx_version(processor: &str, features: &str) -> Option<u32> {
    features
        .split(',')
        .filter_map(|f| f.trim().strip_prefix("+ptx")?.parse::<u32>().ok())
        .max()
        .or_else(|| min_ptx_version(processor))
}

/// The oldest PTX ISA version (times ten) LLVM 22 emits for an NVPTX chip.
pub(crate) fn min_ptx_version(chip: &str) -> Option<u32> {
    NVPTX_CHIPS
        .iter()
        .find(|(known, _)| *known == chip)
        .map(|(_, ptx)| *ptx)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::targets::support::chips::{llc_cpus, llc_help};

    #[test]
    fn redux_starts_at_sm_80() {
        assert!(has_redux("sm_80") && has_redux("sm_90a") && has_redux("sm_100"));
        assert!(!has_redux("sm_75") && !has_redux("sm_8"));
    }

    #[test]
    fn unknown_chips_are_rejected_with_a_suggestion() {
        let err = parse("sm_91").unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidTarget);
        assert!(
            err.message()
                .contains("`sm_91` is not a nvptx chip LLVM 22 knows"),
            "{err}"
        );
        assert!(err.message().contains("did you mean `sm_90`?"), "{err}");
        assert!(err.message().contains("sm_80, sm_86"), "{err}");
        assert!(parse("sm_80:xnack+").is_err());
    }

    #[test]
    fn features_are_checked() {
        assert!(check_features("+ptx80").is_ok());
        assert!(check_features("").is_ok());
        for bad in ["+ptx99", "-ptx80", "+sm_90", "ptx80", "+foo"] {
            let error = check_features(bad).unwrap_err();
            assert!(error.message().contains(&format!("`{bad}`")), "{error}");
        }
    }

    /// The PTX versions above must be exactly what LLVM 22 knows (`llc -mattr=help`).
    #[test]
    fn ptx_versions_match_llvm() {
        let text = llc_help("nvptx64", "-mattr=help");
        let features = text
            .split("Available features for this target:")
            .nth(1)
            .expect("llc prints its feature list");
        let from_llvm: Vec<u32> = features
            .lines()
            .filter_map(|line| {
                line.split_whitespace()
                    .next()?
                    .strip_prefix("ptx")?
                    .parse()
                    .ok()
            })
            .collect();
        assert_eq!(PTX_VERSIONS, from_llvm.as_slice());
    }

    /// The list above must be exactly what LLVM 22 accepts (`llc -mcpu=help`).
    #[test]
    fn chip_list_matches_llvm() {
        let mut from_llvm = llc_cpus("nvptx64");
        let mut ours: Vec<String> = known_chips().into_iter().map(String::from).collect();
        from_llvm.sort();
        ours.sort();
        assert_eq!(ours, from_llvm, "nvptx chip list differs from llc-22");
    }
}
