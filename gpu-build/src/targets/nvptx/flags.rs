//! The `#nvvm.target` flags besides `fast`, checked when the attribute is read and read back
//! into the NVPTX target's own options.

use crate::targets::attr::Value;
use crate::targets::interface::Flags;

/// The flags of `#nvvm.target` besides `fast`, for messages.
pub(crate) const KNOWN: &str = "fast, ftz, ptxas-cmd-options, collect-compiler-diagnostics";

/// What an NVPTX target's own flags ask for (`fast`, every target's, is `Flags::fast`: on
/// NVPTX, fast-math function attributes, approximate division and sqrt).
pub(crate) struct NvptxFlags {
    /// Flush denormals to zero (libdevice's `nvvm-reflect-ftz`, f32 denormal mode).
    pub ftz: bool,
    /// Extra `ptxas` arguments.
    pub ptxas_options: Vec<String>,
    /// `collect-compiler-diagnostics`: ptxas runs with `-v` and its log (registers, spills,
    /// shared memory per kernel) is reported as a build warning, where upstream attaches it to
    /// the `gpu.object`.
    pub collect_diagnostics: bool,
}

impl NvptxFlags {
    pub fn of(flags: &Flags) -> NvptxFlags {
        NvptxFlags {
            ftz: flags.has("ftz"),
            ptxas_options: flags.values("ptxas-cmd-options").to_vec(),
            collect_diagnostics: flags.has("collect-compiler-diagnostics"),
        }
    }
}

/// Checks one flag; its values to keep.
pub(crate) fn parse(name: &str, value: &Value) -> Option<Result<Vec<String>, String>> {
    match name {
        "ftz" | "collect-compiler-diagnostics" => Some(Ok(Vec::new())),
        "ptxas-cmd-options" => Some(ptxas_options(value)),
        _ => None,
    }
}

/// `ptxas-cmd-options`: a string of whitespace-separated arguments, or an array of them.
fn ptxas_options(value: &Value) -> Result<Vec<String>, String> {
    match value {
        Value::Str(s) => Ok(s.split_whitespace().map(str::to_string).collect()),
        Value::Array(items) => items
            .iter()
            .map(|item| match item {
                Value::Str(s) => Ok(s.clone()),
                _ => Err("`ptxas-cmd-options` entries must be strings".to_string()),
            })
            .collect(),
        _ => Err("`ptxas-cmd-options` must be a string or an array of strings".into()),
    }
}
