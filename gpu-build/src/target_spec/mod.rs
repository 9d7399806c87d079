//! Target descriptions: the Rust side of `#nvvm.target` / `#rocdl.target`, with upstream MLIR's
//! parameters, defaults and checks, plus the stricter checks upstream lacks (unknown chips, unknown
//! flags).

mod attr;
pub(crate) mod chips;

use crate::backend::backend;
use crate::error::{Error, ErrorKind, Result};
pub use gpu_manifest::Vendor;
use std::path::PathBuf;

pub(crate) use attr::parse_target_list;
use attr::{TargetAttr, Value};

/// Upstream's `#nvvm.target` chip default (moved from sm_50 to sm_75).
pub const NVPTX_DEFAULT_CHIP: &str = "sm_75";
/// Upstream's `#rocdl.target` chip default.
pub const AMDGPU_DEFAULT_CHIP: &str = "gfx900";
/// Code object version when none is given. Upstream defaults to 600; the device libraries Debian
/// ships (ROCm 5.2) know code objects 4 and 5, and every ROCm runtime since 5.0 loads version 5.
pub const AMDGPU_DEFAULT_ABI: &str = "500";
const AMDGPU_ABIS: &[&str] = &["400", "500", "600"];
/// Upstream 22.1's default: no PTX version feature, so LLVM picks the oldest PTX the chip allows
/// (the widest range of drivers and ptxas versions can load it).
pub(crate) const NVPTX_DEFAULT_FEATURES: &str = "";

/// The triple the crate is being built for: cargo's `TARGET` in a build script, else the machine's
/// own (what LLVM was configured for).
pub fn host_triple() -> String {
    std::env::var("TARGET").unwrap_or_else(|_| {
        inkwell::targets::TargetMachine::get_default_triple()
            .as_str()
            .to_string_lossy()
            .into_owned()
    })
}

/// Everything needed to compile one `gpu.module` for one chip: one `#nvvm.target` or
/// `#rocdl.target` with its parameters resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TargetSpec {
    /// `nvptx`, `amdgpu` or `host`.
    pub vendor: Vendor,
    /// As the user wrote it, feature suffixes included (`gfx90a:xnack-`).
    pub chip: String,
    /// Optimization level (0-3), for LLVM and ptxas.
    pub opt_level: u8,
    /// The LLVM target triple.
    pub triple: String,
    /// LLVM target features (`+ptx80`, `+wavefrontsize64`).
    pub features: String,
    /// The vendor's options (`fast`, `ftz`, `daz`, ...).
    pub flags: Flags,
    /// Bitcode files linked into the module before optimization.
    pub link: Vec<PathBuf>,
    /// ROCDL code object version (`400`, `500`, `600`); empty for NVPTX.
    pub abi: String,
}

/// The `flags` dictionary of a target attribute.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Flags {
    /// Fast math. NVPTX: fast-math function attributes, approximate division and sqrt.
    /// AMDGPU: `finite_only` + `unsafe_math` + `daz`, no correctly rounded sqrt.
    pub fast: bool,
    /// NVPTX: flush denormals to zero (libdevice's `nvvm-reflect-ftz`, f32 denormal mode).
    pub ftz: bool,
    /// NVPTX: extra `ptxas` arguments.
    pub ptxas_options: Vec<String>,
    /// NVPTX: `collect-compiler-diagnostics`: ptxas runs with `-v` and its log (registers,
    /// spills, shared memory per kernel) is reported as a build warning, where upstream attaches
    /// it to the `gpu.object`.
    pub collect_diagnostics: bool,
    /// AMDGPU: wave32 device libraries (`__oclc_wavefrontsize64 = 0`).
    pub no_wave64: bool,
    /// AMDGPU: denormals are zero (`__oclc_daz_opt`).
    pub daz: bool,
    /// AMDGPU: no infinities or NaNs (`__oclc_finite_only_opt`).
    pub finite_only: bool,
    /// AMDGPU: `__oclc_unsafe_math_opt`.
    pub unsafe_math: bool,
    /// AMDGPU: turns off `__oclc_correctly_rounded_sqrt32`.
    pub unsafe_sqrt: bool,
}

impl TargetSpec {
    /// The upstream defaults for `vendor`, with `chip`.
    pub fn new(vendor: Vendor, chip: impl Into<String>) -> Self {
        let chip = chip.into();
        let backend = backend(vendor);
        TargetSpec {
            vendor,
            triple: backend.triple(&chip),
            chip,
            opt_level: 2,
            features: backend.default_features().into(),
            flags: Flags::default(),
            link: Vec::new(),
            abi: backend.default_abi().into(),
        }
    }

    /// The vendor's defaults with its default chip (upstream's `sm_75` and `gfx900`; the host: this
    /// build's triple).
    pub fn default_for(vendor: Vendor) -> Self {
        TargetSpec::new(vendor, backend(vendor).default_chip())
    }

    /// Checks what upstream's verifier checks, and the chip (which upstream does not).
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
        let chip = chips::parse_chip(self.vendor, &self.chip)?;
        chips::check_features(self.vendor, &self.features)?;
        if let Some(min) = chips::min_ptx_version(&chip.processor) {
            let requested = self
                .features
                .split(',')
                .filter_map(|f| f.trim().strip_prefix("+ptx")?.parse::<u32>().ok())
                .max();
            if let Some(requested) = requested.filter(|&requested| requested < min) {
                return Err(Error::new(
                    ErrorKind::InvalidTarget,
                    format!(
                        "PTX ISA {}.{} (`+ptx{requested}` in features) cannot target {}; it needs \
                         {}.{} or newer: use `+ptx{min}` or drop the feature to get the oldest \
                         version the chip allows",
                        requested / 10,
                        requested % 10,
                        self.chip,
                        min / 10,
                        min % 10
                    ),
                ));
            }
        }
        if self.vendor == Vendor::Amdgpu && !AMDGPU_ABIS.contains(&self.abi.as_str()) {
            return Err(Error::new(
                ErrorKind::InvalidTarget,
                format!(
                    "unknown ROCDL abi `{}`; use one of {} (the code object version times 100)",
                    self.abi,
                    AMDGPU_ABIS.join(", ")
                ),
            ));
        }
        Ok(())
    }

    /// Processor name and full feature string for LLVM's target machine.
    pub(crate) fn processor_and_features(&self) -> Result<(String, String)> {
        let chip = chips::parse_chip(self.vendor, &self.chip)?;
        let features = [self.features.as_str(), chip.features.as_str()]
            .into_iter()
            .filter(|f| !f.is_empty())
            .collect::<Vec<_>>()
            .join(",");
        Ok((chip.processor, features))
    }

    /// Reads one parsed target attribute; other kinds of target (`#xevm.target`, ...) are errors.
    pub(crate) fn from_attr(attr: &TargetAttr) -> Result<TargetSpec, String> {
        let vendor = match attr.name.as_str() {
            "nvvm.target" => Vendor::Nvptx,
            "rocdl.target" => Vendor::Amdgpu,
            other => {
                return Err(format!(
                "`#{other}` is not a target gpu-build compiles; use #nvvm.target or #rocdl.target"
            ))
            }
        };
        let mut spec = TargetSpec::default_for(vendor);
        for (key, value) in &attr.params {
            match (key.as_str(), value) {
                ("O", Value::Int(level)) => {
                    spec.opt_level = u8::try_from(*level).unwrap_or(u8::MAX);
                }
                ("triple", Value::Str(s)) => spec.triple = s.clone(),
                ("chip", Value::Str(s)) => spec.chip = s.clone(),
                ("features", Value::Str(s)) => spec.features = s.clone(),
                ("abi", Value::Str(s)) if vendor == Vendor::Amdgpu => spec.abi = s.clone(),
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
    fn from_entries(vendor: Vendor, entries: &[(String, Value)]) -> Result<Flags, String> {
        let mut flags = Flags::default();
        for (name, value) in entries {
            match (vendor, name.as_str()) {
                (_, "fast") => flags.fast = true,
                (Vendor::Nvptx, "ftz") => flags.ftz = true,
                (Vendor::Nvptx, "collect-compiler-diagnostics") => flags.collect_diagnostics = true,
                (Vendor::Nvptx, "ptxas-cmd-options") => {
                    flags.ptxas_options = match value {
                        Value::Str(s) => s.split_whitespace().map(str::to_string).collect(),
                        Value::Array(items) => items
                            .iter()
                            .map(|item| match item {
                                Value::Str(s) => Ok(s.clone()),
                                _ => Err("`ptxas-cmd-options` entries must be strings".to_string()),
                            })
                            .collect::<Result<_, _>>()?,
                        _ => {
                            return Err(
                                "`ptxas-cmd-options` must be a string or an array of strings"
                                    .into(),
                            )
                        }
                    }
                }
                (Vendor::Amdgpu, "no_wave64") => flags.no_wave64 = true,
                (Vendor::Amdgpu, "daz") => flags.daz = true,
                (Vendor::Amdgpu, "finite_only") => flags.finite_only = true,
                (Vendor::Amdgpu, "unsafe_math") => flags.unsafe_math = true,
                (Vendor::Amdgpu, "unsafe_sqrt") => flags.unsafe_sqrt = true,
                (_, other) => {
                    let known = match vendor {
                        Vendor::Nvptx => {
                            "fast, ftz, ptxas-cmd-options, collect-compiler-diagnostics"
                        }
                        _ => "fast, daz, finite_only, unsafe_math, unsafe_sqrt, no_wave64",
                    };
                    return Err(format!(
                        "unknown {vendor} target flag `{other}`; known flags: {known}"
                    ));
                }
            }
        }
        Ok(flags)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        assert!(s.flags.fast && s.flags.no_wave64 && !s.flags.daz);
        assert_eq!((s.opt_level, s.abi.as_str()), (3, "600"));
        assert_eq!(s.link, vec![PathBuf::from("x.bc")]);
        let s =
            spec(r#"[#nvvm.target<flags = {ftz, "ptxas-cmd-options" = "-v  --warn-on-spills"}>]"#)
                .unwrap();
        assert_eq!(s.flags.ptxas_options, vec!["-v", "--warn-on-spills"]);
        let s = spec(r#"[#nvvm.target<flags = {"collect-compiler-diagnostics"}>]"#).unwrap();
        assert!(s.flags.collect_diagnostics);
    }

    #[test]
    fn rejects_unknown_flags_and_targets() {
        let err = spec("[#nvvm.target<flags = {fats}>]").unwrap_err();
        assert!(err.contains("unknown nvptx target flag `fats`"), "{err}");
        assert!(spec("[#rocdl.target<flags = {ftz}>]").is_err());
        assert!(spec("[#xevm.target]")
            .unwrap_err()
            .contains("not a target gpu-build compiles"));
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
