//! What every GPU target's chips share: LLVM only warns "'sm_99' is not a recognized processor
//! for this target (ignoring processor)" and then emits code for a generic processor; gpu-build
//! rejects unknown chips instead, naming the closest known one. LLVM's C API has no "is this CPU
//! valid" query, so each target keeps its list (`targets/<name>/chips.rs`) and a test there
//! compares it with `llc-22 -mcpu=help`.

use crate::error::{Error, ErrorKind, Result};
use crate::targets::interface::Chip;
use gpu_manifest::Vendor;

/// A target's chips, as the shared parsing needs them.
pub(crate) struct ChipRules<'a> {
    pub vendor: Vendor,
    /// Every processor name LLVM 22 knows for the target.
    pub known: &'a [&'a str],
    /// The feature suffixes a chip may carry (`gfx90a:xnack-`); empty: none.
    pub suffixes: &'a [&'a str],
    /// What the suffixes are, for messages.
    pub suffix_help: &'a str,
    /// A chip to show when none was given.
    pub example: &'a str,
}

/// Checks `chip` against `rules`, splitting feature suffixes off.
pub(crate) fn parse_chip(rules: &ChipRules, chip: &str) -> Result<Chip> {
    let vendor = rules.vendor;
    if chip.trim().is_empty() {
        return Err(Error::new(
            ErrorKind::InvalidTarget,
            format!(
                "the {vendor} chip is empty; name one, e.g. `{}`",
                rules.example
            ),
        ));
    }
    let mut parts = chip.split(':');
    let processor = parts.next().unwrap_or_default();
    if !rules.known.contains(&processor) {
        return Err(Error::new(
            ErrorKind::InvalidTarget,
            format!(
                "`{processor}` is not a {vendor} chip LLVM 22 knows{}; valid chips: {}",
                suggestion(rules.known, processor)
                    .map(|s| format!(" (did you mean `{s}`?)"))
                    .unwrap_or_default(),
                rules.known.join(", ")
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
        if !rules.suffixes.contains(&name) {
            return Err(Error::new(
                ErrorKind::InvalidTarget,
                format!(
                    "`{chip}`: `{suffix}` is not a chip feature suffix; {}",
                    rules.suffix_help
                ),
            ));
        }
        features.push(format!("{sign}{name}"));
    }
    Ok(Chip {
        processor: processor.to_string(),
        features: features.join(","),
    })
}

/// The `+name` / `-name` items of a target's `features` string, split into sign and name.
pub(crate) fn feature_items(features: &str) -> Vec<(&str, &str)> {
    features
        .split(',')
        .map(str::trim)
        .filter(|f| !f.is_empty())
        .map(|item| item.split_at(item.find(|c| c != '+' && c != '-').unwrap_or(item.len())))
        .collect()
}

/// The error for a feature a target does not take.
pub(crate) fn unknown_feature(sign: &str, name: &str, allowed: &str) -> Error {
    Error::new(
        ErrorKind::InvalidTarget,
        format!("unknown or unsupported target feature `{sign}{name}`: {allowed}"),
    )
}

/// The closest known chip by edit distance, if it is close enough to be a typo; among equals, the
/// one sharing the longest prefix (`sm_91` → `sm_90`, not `sm_21`).
fn suggestion<'a>(known: &[&'a str], chip: &str) -> Option<&'a str> {
    let shared_prefix = |known: &str| {
        chip.chars()
            .zip(known.chars())
            .take_while(|(a, b)| a == b)
            .count()
    };
    known
        .iter()
        .map(|&known| {
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

/// What `llc-22 -march=<arch> <flag>` prints (its CPU or feature list), for the tests that
/// compare each target's lists with LLVM's.
#[cfg(test)]
pub(crate) fn llc_help(arch: &str, flag: &str) -> String {
    let output = std::process::Command::new("llc-22")
        .args([&format!("-march={arch}"), flag])
        .output()
        .expect("llc-22 runs (install llvm-22)");
    String::from_utf8_lossy(&output.stdout).to_string() + &String::from_utf8_lossy(&output.stderr)
}

/// The CPUs `llc-22 -march=<arch> -mcpu=help` lists.
#[cfg(test)]
pub(crate) fn llc_cpus(arch: &str) -> Vec<String> {
    let text = llc_help(arch, "-mcpu=help");
    let cpus = text
        .split("Available CPUs for this target:")
        .nth(1)
        .and_then(|rest| rest.split("Available features").next())
        .expect("llc prints its CPU list");
    cpus.lines()
        .filter_map(|line| line.split_whitespace().next())
        .map(String::from)
        .collect()
}
