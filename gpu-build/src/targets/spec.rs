//! Target descriptions read and checked: the Rust side of a target attribute (`#nvvm.target`,
//! `#rocdl.target`) with upstream MLIR's parameters, defaults and checks, plus the stricter
//! checks upstream lacks (unknown chips, features and flags, a triple of another target). The
//! shared parameters are read here; each target answers for its own (`abi`, flags, chips,
//! features) through the registry. Targets never call into this file.

use crate::error::{Error, ErrorKind, Result};
use crate::targets::attr::{TargetAttr, Value};
use crate::targets::interface::{FlagValue, Flags, TargetSpec};
use crate::targets::{attribute_names, by_attribute, target};
use gpu_manifest::Vendor;
use std::path::PathBuf;

impl TargetSpec {
    /// The upstream defaults for `vendor`, with `chip`.
    pub fn new(vendor: Vendor, chip: impl Into<String>) -> Self {
        let chip = chip.into();
        let target = target(vendor);
        TargetSpec {
            vendor,
            triple: target.description().triple_for(&chip),
            chip,
            opt_level: 2,
            features: target.description().default_features.into(),
            flags: Flags::default(),
            link: Vec::new(),
            abi: target.description().default_abi.into(),
            checked: false,
        }
    }

    /// The vendor's defaults with its default chip (upstream's `sm_75` and `gfx900`; the host: this
    /// build's triple).
    pub fn default_for(vendor: Vendor) -> Self {
        TargetSpec::new(vendor, target(vendor).description().default_chip())
    }

    /// Checks what upstream's verifier checks, and what it lets through to LLVM (which then
    /// warns, aborts or emits code for another processor): the chip, the features, the triple.
    pub(crate) fn validate(&self) -> Result<()> {
        if self.opt_level > 3 {
            return Err(Error::new(
                ErrorKind::InvalidTarget,
                format!(
                    "optimization level {} is out of range; use 0, 1, 2 or 3",
                    self.opt_level
                ),
            ));
        }
        if self.triple.is_empty() {
            return Err(Error::new(
                ErrorKind::InvalidTarget,
                "the target triple is empty",
            ));
        }
        let target = target(self.vendor);
        if let Some(prefix) = target.description().triple_prefix {
            if !self.triple.starts_with(prefix) {
                return Err(Error::new(
                    ErrorKind::InvalidTarget,
                    format!(
                        "the triple `{}` is not a {} triple (`{prefix}...`); drop `triple` to get \
                         `{}`",
                        self.triple,
                        self.vendor,
                        target.description().triple_for(&self.chip)
                    ),
                ));
            }
        }
        target.chip(self)?;
        let abis = target.description().abis;
        if !abis.is_empty() && !abis.contains(&self.abi.as_str()) {
            return Err(Error::new(
                ErrorKind::InvalidTarget,
                format!(
                    "unknown {} abi `{}`; use one of {} (the code object version times 100)",
                    target.description().lowering_name,
                    self.abi,
                    abis.join(", ")
                ),
            ));
        }
        Ok(())
    }

    /// Processor name and full feature string for LLVM's target machine.
    pub(crate) fn processor_and_features(&self) -> Result<(String, String)> {
        let chip = target(self.vendor).chip(self)?;
        let features = [self.features.as_str(), chip.features.as_str()]
            .into_iter()
            .filter(|f| !f.is_empty())
            .collect::<Vec<_>>()
            .join(",");
        Ok((chip.processor, features))
    }

    /// Reads one parsed target attribute; other kinds of target (`#xevm.target`, ...) are errors.
    pub(crate) fn from_attr(attr: &TargetAttr) -> Result<TargetSpec, String> {
        let Some(target) = by_attribute(&attr.name) else {
            let names: Vec<String> = attribute_names().iter().map(|n| format!("#{n}")).collect();
            return Err(format!(
                "`#{}` is not a target gpu-build compiles; use {}",
                attr.name,
                names.join(" or ")
            ));
        };
        let vendor = target.description().vendor;
        let mut spec = TargetSpec::default_for(vendor);
        for (key, value) in &attr.params {
            match (key.as_str(), value) {
                ("O", Value::Int(level)) => {
                    spec.opt_level = u8::try_from(*level).unwrap_or(u8::MAX);
                }
                ("triple", Value::Str(s)) => spec.triple = s.clone(),
                ("chip", Value::Str(s)) => spec.chip = s.clone(),
                ("features", Value::Str(s)) => spec.features = s.clone(),
                ("abi", Value::Str(s)) if !target.description().abis.is_empty() => {
                    spec.abi = s.clone()
                }
                ("flags", Value::Dict(entries)) => {
                    spec.flags = Flags::from_entries(vendor, entries)?
                }
                ("link", Value::Array(items)) => {
                    for item in items {
                        match item {
                            Value::Str(path) => spec.link.push(PathBuf::from(path)),
                            _ => return Err("`link` entries must be strings (file paths)".into()),
                        }
                    }
                }
                (key, _) => {
                    return Err(format!("unexpected parameter `{key}` in #{}", attr.name));
                }
            }
        }
        Ok(spec)
    }
}

impl Flags {
    /// A target attribute's `flags`: `fast` for every target, the rest as the target reads them.
    fn from_entries(vendor: Vendor, entries: &[(String, Value)]) -> Result<Flags, String> {
        let target = target(vendor);
        let mut flags = Flags::default();
        for (name, value) in entries {
            if name == "fast" {
                flags.fast = true;
                continue;
            }
            let description = target.description();
            let Some(flag) = description.flags.iter().find(|flag| flag.name == name) else {
                return Err(format!(
                    "unknown {vendor} target flag `{name}`; known flags: {}",
                    description.known_flags()
                ));
            };
            let values = match flag.value {
                FlagValue::Unit => Vec::new(),
                FlagValue::Arguments => arguments(name, value)?,
            };
            flags.target.insert(name.clone(), values);
        }
        Ok(flags)
    }
}

/// A flag's command-line arguments: a string of whitespace-separated arguments, or an array of
/// them.
fn arguments(name: &str, value: &Value) -> Result<Vec<String>, String> {
    match value {
        Value::Str(s) => Ok(s.split_whitespace().map(str::to_string).collect()),
        Value::Array(items) => items
            .iter()
            .map(|item| match item {
                Value::Str(s) => Ok(s.clone()),
                _ => Err(format!("`{name}` entries must be strings")),
            })
            .collect(),
        _ => Err(format!("`{name}` must be a string or an array of strings")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::targets::attr::parse_target_list;

    fn spec(text: &str) -> Result<TargetSpec, String> {
        TargetSpec::from_attr(&parse_target_list(text)?[0])
    }

    #[test]
    fn defaults_match_upstream() {
        let nvvm = spec("[#nvvm.target]").unwrap();
        assert_eq!(
            (
                nvvm.opt_level,
                nvvm.triple.as_str(),
                nvvm.chip.as_str(),
                nvvm.features.as_str()
            ),
            (2, "nvptx64-nvidia-cuda", "sm_75", "")
        );
        let rocdl = spec("[#rocdl.target]").unwrap();
        assert_eq!(
            (
                rocdl.opt_level,
                rocdl.triple.as_str(),
                rocdl.chip.as_str(),
                rocdl.features.as_str()
            ),
            (2, "amdgcn-amd-amdhsa", "gfx900", "")
        );
    }

    #[test]
    fn reads_flags_and_links() {
        let s = spec(r#"[#rocdl.target<O = 3, chip = "gfx1100", abi = "600", flags = {fast, no_wave64}, link = ["x.bc"]>]"#)
            .unwrap();
        assert!(s.flags.fast && s.flags.has("no_wave64") && !s.flags.has("daz"));
        assert_eq!((s.opt_level, s.abi.as_str()), (3, "600"));
        assert_eq!(s.link, vec![PathBuf::from("x.bc")]);
        let s =
            spec(r#"[#nvvm.target<flags = {ftz, "ptxas-cmd-options" = "-v  --warn-on-spills"}>]"#)
                .unwrap();
        assert_eq!(
            s.flags.values("ptxas-cmd-options"),
            ["-v", "--warn-on-spills"]
        );
        let s = spec(r#"[#nvvm.target<flags = {"collect-compiler-diagnostics"}>]"#).unwrap();
        assert!(s.flags.has("collect-compiler-diagnostics"));
    }

    #[test]
    fn rejects_unknown_flags_and_targets() {
        let err = spec("[#nvvm.target<flags = {fats}>]").unwrap_err();
        assert!(err.contains("unknown nvptx target flag `fats`"), "{err}");
        assert!(spec("[#rocdl.target<flags = {ftz}>]").is_err());
        let err = spec("[#xevm.target]").unwrap_err();
        assert!(err.contains("not a target gpu-build compiles"), "{err}");
        assert!(err.contains("use #nvvm.target or #rocdl.target"), "{err}");
    }

    #[test]
    fn a_triple_of_another_target_is_refused() {
        let mut s =
            spec(r#"[#nvvm.target<chip = "sm_80", triple = "amdgcn-amd-amdhsa">]"#).unwrap();
        let err = s.validate().unwrap_err();
        assert!(
            err.message().contains(
                "the triple `amdgcn-amd-amdhsa` is not a nvptx triple (`nvptx...`); drop `triple` \
                 to get `nvptx64-nvidia-cuda`"
            ),
            "{err}"
        );
        s.triple = "nvptx64-nvidia-cuda".into();
        s.validate().unwrap();
    }

    #[test]
    fn validation_names_the_problem() {
        let mut s = TargetSpec::default_for(Vendor::Amdgpu);
        s.abi = "700".into();
        assert!(s
            .validate()
            .unwrap_err()
            .message()
            .contains("unknown ROCDL abi `700`"));
        let mut s = TargetSpec::default_for(Vendor::Nvptx);
        s.opt_level = 4;
        assert!(s.validate().unwrap_err().message().contains("out of range"));
        let mut s = TargetSpec::new(Vendor::Nvptx, "sm_80");
        s.features = "+ptx60".into();
        let err = s.validate().unwrap_err();
        assert!(
            err.message()
                .contains("PTX ISA 6.0 (`+ptx60` in features) cannot target sm_80"),
            "{err}"
        );
        s.features = "+ptx70".into();
        s.validate().unwrap();
        let mut s = TargetSpec::new(Vendor::Amdgpu, "gfx90a:xnack-");
        s.features = "+wavefrontsize32".into();
        assert_eq!(
            s.processor_and_features().unwrap(),
            ("gfx90a".to_string(), "+wavefrontsize32,-xnack".to_string())
        );
    }
}
