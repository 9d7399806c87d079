//! The `#rocdl.target` flags besides `fast`, checked when the attribute is read and read back
//! into the AMDGPU target's own options: each sets one of the device libraries' control
//! variables.

use crate::targets::interface::{Flag, Flags};

/// The flags of `#rocdl.target` besides `fast`, all on when present.
pub(crate) const FLAGS: &[Flag] = &[
    Flag::unit("daz"),
    Flag::unit("finite_only"),
    Flag::unit("unsafe_math"),
    Flag::unit("unsafe_sqrt"),
    Flag::unit("no_wave64"),
];

/// What an AMDGPU target's own flags ask for (`fast`, every target's, is `Flags::fast`: on
/// AMDGPU, `finite_only` + `unsafe_math` + `daz`, no correctly rounded sqrt).
pub(crate) struct AmdgpuFlags {
    /// Wave32 device libraries (`__oclc_wavefrontsize64 = 0`).
    pub no_wave64: bool,
    /// Denormals are zero (`__oclc_daz_opt`).
    pub daz: bool,
    /// No infinities or NaNs (`__oclc_finite_only_opt`).
    pub finite_only: bool,
    /// `__oclc_unsafe_math_opt`.
    pub unsafe_math: bool,
    /// Turns off `__oclc_correctly_rounded_sqrt32`.
    pub unsafe_sqrt: bool,
}

impl AmdgpuFlags {
    pub fn of(flags: &Flags) -> AmdgpuFlags {
        AmdgpuFlags {
            no_wave64: flags.has("no_wave64"),
            daz: flags.has("daz"),
            finite_only: flags.has("finite_only"),
            unsafe_math: flags.has("unsafe_math"),
            unsafe_sqrt: flags.has("unsafe_sqrt"),
        }
    }
}
