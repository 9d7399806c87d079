//! The `#nvvm.target` flags besides `fast`, checked when the attribute is read and read back
//! into the NVPTX target's own options.

use crate::targets::interface::{Flag, Flags};

/// The flags of `#nvvm.target` besides `fast`.
pub(crate) const FLAGS: &[Flag] = &[
    Flag::unit("ftz"),
    Flag::arguments("ptxas-cmd-options"),
    Flag::unit("collect-compiler-diagnostics"),
];

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
