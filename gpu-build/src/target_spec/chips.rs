//! The processors LLVM 22 knows for each GPU target.
//!
//! LLVM only warns "'sm_99' is not a recognized processor for this target (ignoring processor)"
//! and then emits code for a generic processor; we reject unknown chips instead. LLVM's C API has
//! no "is this CPU valid" query, so the lists are kept here and a test compares them with
//! `llc-22 -mcpu=help`.

use crate::error::{Error, ErrorKind, Result};
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

/// Target features an AMDGPU chip name may carry as suffixes (`gfx90a:sramecc+:xnack-`).
const AMDGPU_CHIP_FEATURES: &[&str] = &["xnack", "sramecc"];

/// The PTX ISA versions LLVM 22 can emit (`llc -march=nvptx64 -mattr=help`): the only NVPTX
/// features a target may name; the chip implies the rest.
pub(crate) const PTX_VERSIONS: &[u32] = &[
    32, 40, 41, 42, 43, 50, 60, 61, 62, 63, 64, 65, 70, 71, 72, 73, 74, 75, 76, 77, 78, 80, 81, 82,
    83, 84, 85, 86, 87, 88, 90,
];

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

/// Checks a target's `features` string: `+name` / `-name` items of the features above.
pub(crate) fn check_features(vendor: Vendor, features: &str) -> Result<()> {
    let allowed = || match vendor {
        Vendor::Nvptx => {
            "NVPTX features are PTX ISA versions (`+ptx80`); the chip implies the rest".to_string()
        }
        _ => format!(
            "AMDGPU features may turn on or off only {}; the chip implies the rest",
            AMDGPU_MODE_FEATURES
                .iter()
                .map(|f| format!("`{f}`"))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    let mut items = Vec::new();
    for item in features.split(',').map(str::trim).filter(|f| !f.is_empty()) {
        let (sign, name) = item.split_at(item.find(|c| c != '+' && c != '-').unwrap_or(item.len()));
        let known = match vendor {
            Vendor::Nvptx => {
                sign == "+"
                    && name
                        .strip_prefix("ptx")
                        .and_then(|v| v.parse::<u32>().ok())
                        .is_some_and(|v| PTX_VERSIONS.contains(&v))
            }
            Vendor::Amdgpu => (sign == "+" || sign == "-") && AMDGPU_MODE_FEATURES.contains(&name),
            Vendor::Host => true,
        };
        if !known {
            return Err(Error::new(
                ErrorKind::InvalidTarget,
                format!(
                    "unknown or unsupported target feature `{item}`: {}",
                    allowed()
                ),
            ));
        }
        items.push((sign, name));
    }
    if items.contains(&("+", "wavefrontsize32")) && items.contains(&("+", "wavefrontsize64")) {
        return Err(Error::new(
            ErrorKind::InvalidTarget,
            "`+wavefrontsize32` and `+wavefrontsize64` together: a wave has one size; keep one",
        ));
    }
    Ok(())
}

/// A validated chip: the processor name LLVM takes and the target features its suffixes imply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Chip {
    pub processor: String,
    /// `+xnack,-sramecc` from `gfx90a:xnack+:sramecc-`; empty for NVPTX.
    pub features: String,
}

pub(crate) fn known_chips(vendor: Vendor) -> Vec<&'static str> {
    match vendor {
        Vendor::Nvptx => NVPTX_CHIPS.iter().map(|(chip, _)| *chip).collect(),
        Vendor::Amdgpu => AMDGPU_CHIPS.to_vec(),
        Vendor::Host => Vec::new(),
    }
}

/// Whether an NVPTX chip has `redux.sync` (sm_80 and later).
pub(crate) fn has_redux(chip: &str) -> bool {
    let sm: u32 = chip
        .trim_start_matches("sm_")
        .chars()
        .take_while(char::is_ascii_digit)
        .collect::<String>()
        .parse()
        .unwrap_or(0);
    sm >= 80
}

/// The oldest PTX ISA version (times ten) LLVM 22 emits for an NVPTX chip.
pub(crate) fn min_ptx_version(chip: &str) -> Option<u32> {
    NVPTX_CHIPS
        .iter()
        .find(|(known, _)| *known == chip)
        .map(|(_, ptx)| *ptx)
}

/// Checks `chip` for `vendor`, splitting AMDGPU feature suffixes off. For the host, the "chip" is
/// the target triple, compiled for the triple's baseline processor (as rustc does by default).
pub(crate) fn parse_chip(vendor: Vendor, chip: &str) -> Result<Chip> {
    if vendor == Vendor::Host {
        return Ok(Chip {
            processor: "generic".into(),
            features: String::new(),
        });
    }
    if chip.trim().is_empty() {
        return Err(Error::new(
            ErrorKind::InvalidTarget,
            format!(
                "the {vendor} chip is empty; name one, e.g. `{}`",
                default_example(vendor)
            ),
        ));
    }
    let mut parts = chip.split(':');
    let processor = parts.next().unwrap_or_default();
    if !known_chips(vendor).contains(&processor) {
        return Err(Error::new(
            ErrorKind::InvalidTarget,
            format!(
                "`{processor}` is not a {vendor} chip LLVM 22 knows{}; valid chips: {}",
                suggestion(vendor, processor)
                    .map(|s| format!(" (did you mean `{s}`?)"))
                    .unwrap_or_default(),
                known_chips(vendor).join(", ")
            ),
        ));
    }
    let mut features = Vec::new();
    for suffix in parts {
        let (name, sign) = match suffix.strip_suffix('+') {
            Some(name) => (name, '+'),
            None => match suffix.strip_suffix('-') {
                Some(name) => (name, '-'),
                None => ("", ' '),
            },
        };
        if vendor != Vendor::Amdgpu || !AMDGPU_CHIP_FEATURES.contains(&name) {
            return Err(Error::new(
                ErrorKind::InvalidTarget,
                format!(
                    "`{chip}`: `{suffix}` is not a chip feature suffix; {} ",
                    match vendor {
                        Vendor::Amdgpu =>
                            "AMDGPU chips take `:xnack+`, `:xnack-`, `:sramecc+` or `:sramecc-`",
                        _ => "NVPTX chips take no suffixes",
                    }
                )
                .trim_end()
                .to_string(),
            ));
        }
        features.push(format!("{sign}{name}"));
    }
    Ok(Chip {
        processor: processor.to_string(),
        features: features.join(","),
    })
}

fn default_example(vendor: Vendor) -> &'static str {
    match vendor {
        Vendor::Nvptx => "sm_80",
        Vendor::Amdgpu => "gfx90a",
        Vendor::Host => "x86_64-unknown-linux-gnu",
    }
}

/// The closest known chip by edit distance, if it is close enough to be a typo; among equals, the
/// one sharing the longest prefix (`sm_91` → `sm_90`, not `sm_21`).
fn suggestion(vendor: Vendor, chip: &str) -> Option<&'static str> {
    let shared_prefix = |known: &str| {
        chip.chars()
            .zip(known.chars())
            .take_while(|(a, b)| a == b)
            .count()
    };
    known_chips(vendor)
        .into_iter()
        .map(|known| {
            (
                edit_distance(chip, known),
                std::cmp::Reverse(shared_prefix(known)),
                known,
            )
        })
        .filter(|(distance, _, _)| *distance <= 2)
        .min()
        .map(|(_, _, known)| known)
}

pub(crate) fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut previous = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let substitution = previous + usize::from(ca != *cb);
            previous = row[j + 1];
            row[j + 1] = substitution.min(row[j] + 1).min(previous + 1);
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    #[test]
    fn redux_starts_at_sm_80() {
        assert!(has_redux("sm_80") && has_redux("sm_90a") && has_redux("sm_100"));
        assert!(!has_redux("sm_75") && !has_redux("sm_8"));
    }

    #[test]
    fn splits_amdgpu_feature_suffixes() {
        let chip = parse_chip(Vendor::Amdgpu, "gfx90a:sramecc+:xnack-").unwrap();
        assert_eq!(chip.processor, "gfx90a");
        assert_eq!(chip.features, "+sramecc,-xnack");
    }

    #[test]
    fn unknown_chips_are_rejected_with_a_suggestion() {
        let err = parse_chip(Vendor::Nvptx, "sm_91").unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidTarget);
        assert!(
            err.message()
                .contains("`sm_91` is not a nvptx chip LLVM 22 knows"),
            "{err}"
        );
        assert!(err.message().contains("did you mean `sm_90`?"), "{err}");
        assert!(err.message().contains("sm_80, sm_86"), "{err}");
        let err = parse_chip(Vendor::Amdgpu, "sm_80").unwrap_err();
        assert!(err.message().contains("valid chips: gfx600"), "{err}");
        assert!(parse_chip(Vendor::Nvptx, "sm_80:xnack+").is_err());
        assert!(parse_chip(Vendor::Amdgpu, "gfx90a:foo+").is_err());
        assert!(parse_chip(Vendor::Amdgpu, " ")
            .unwrap_err()
            .message()
            .contains("empty"));
    }

    #[test]
    fn features_are_checked() {
        assert!(check_features(Vendor::Nvptx, "+ptx80").is_ok());
        assert!(check_features(Vendor::Nvptx, "").is_ok());
        for bad in ["+ptx99", "-ptx80", "+sm_90", "ptx80", "+foo"] {
            let error = check_features(Vendor::Nvptx, bad).unwrap_err();
            assert!(error.message().contains(&format!("`{bad}`")), "{error}");
        }
        assert!(check_features(Vendor::Amdgpu, "+wavefrontsize64, -xnack").is_ok());
        for bad in [
            "-flat-address-space",
            "+foo",
            "xnack",
            "+wavefrontsize32,+wavefrontsize64",
        ] {
            assert!(check_features(Vendor::Amdgpu, bad).is_err(), "{bad}");
        }
    }

    /// What `llc-22 -march=<arch> <flag>` prints (its CPU or feature list).
    fn llc_help(arch: &str, flag: &str) -> String {
        let output = Command::new("llc-22")
            .args([&format!("-march={arch}"), flag])
            .output()
            .expect("llc-22 runs (install llvm-22)");
        String::from_utf8_lossy(&output.stdout).to_string()
            + &String::from_utf8_lossy(&output.stderr)
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

    /// The lists above must be exactly what LLVM 22 accepts (`llc -mcpu=help`).
    #[test]
    fn chip_lists_match_llvm() {
        for (arch, vendor) in [("nvptx64", Vendor::Nvptx), ("amdgcn", Vendor::Amdgpu)] {
            let text = llc_help(arch, "-mcpu=help");
            let cpus = text
                .split("Available CPUs for this target:")
                .nth(1)
                .and_then(|rest| rest.split("Available features").next())
                .expect("llc prints its CPU list");
            let mut from_llvm: Vec<&str> = cpus
                .lines()
                .filter_map(|line| line.split_whitespace().next())
                .filter(|cpu| vendor == Vendor::Nvptx || cpu.starts_with("gfx"))
                .collect();
            let mut ours = known_chips(vendor);
            from_llvm.sort();
            ours.sort();
            assert_eq!(ours, from_llvm, "{vendor} chip list differs from llc-22");
        }
    }
}
