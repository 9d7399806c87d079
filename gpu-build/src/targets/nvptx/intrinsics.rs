//! NVVM intrinsics a chip (or PTX version) lacks. LLVM 22's NVPTX instruction selection stops
//! the process ("Cannot select: intrinsic …", a fatal error) when a kernel calls one, e.g. an
//! `nvgpu.mbarrier.create` compiled for the default sm_75. Checked before code generation, so it
//! is an error naming the intrinsic, the chip it needs and how to ask for it.
//!
//! Each requirement was measured with `llc-22` on a call of the intrinsic at sm_70 … sm_120 and
//! PTX 7.0 … 8.7 (the intrinsics MLIR 22's NVVM lowering emits for upstream's GPU integration
//! tests, where our fuzzer found them); the first matching prefix applies.

use super::chips::{ptx_version, sm_number};
use crate::error::{Error, ErrorKind, Result};
use inkwell::module::Module;

/// What a family of intrinsics needs.
struct Requirement {
    prefix: &'static str,
    /// The oldest chip, times ten (`80`: sm_80).
    sm: u32,
    /// The oldest PTX ISA version, times ten.
    ptx: u32,
    /// Only the architecture-specific chip of exactly that generation (`sm_90a`).
    arch_specific: bool,
}

const fn needs(prefix: &'static str, sm: u32, ptx: u32) -> Requirement {
    Requirement {
        prefix,
        sm,
        ptx,
        arch_specific: false,
    }
}

const REQUIREMENTS: &[Requirement] = &[
    needs("llvm.nvvm.wmma.m8n8k4.", 80, 70),
    needs("llvm.nvvm.mma.m16n8k16.", 80, 70),
    needs("llvm.nvvm.mma.m16n8k4.", 80, 70),
    needs("llvm.nvvm.mbarrier.arrive.expect.tx", 90, 80),
    needs("llvm.nvvm.mbarrier.", 80, 70),
    needs("llvm.nvvm.read.ptx.sreg.cluster", 90, 78),
    needs("llvm.nvvm.read.ptx.sreg.nclusterid", 90, 78),
    needs("llvm.nvvm.cp.async.bulk.", 90, 80),
    needs("llvm.nvvm.prefetch.tensormap", 90, 80),
    needs("llvm.nvvm.elect.sync", 90, 80),
    Requirement {
        prefix: "llvm.nvvm.wgmma.",
        sm: 90,
        ptx: 80,
        arch_specific: true,
    },
];

/// Refuses a module calling an intrinsic `processor` (with `features`) lacks.
pub(super) fn check(module: &Module, processor: &str, features: &str) -> Result<()> {
    let sm = sm_number(processor);
    let ptx = ptx_version(processor, features).unwrap_or(0);
    for function in module.get_functions() {
        if function.get_intrinsic_id() == 0 {
            continue;
        }
        let name = function.get_name().to_string_lossy();
        let Some(needed) = REQUIREMENTS.iter().find(|r| name.starts_with(r.prefix)) else {
            continue;
        };
        let chip = format!(
            "sm_{}{}",
            needed.sm,
            if needed.arch_specific { "a" } else { "" }
        );
        let chip_lacks = if needed.arch_specific {
            processor != chip
        } else {
            sm < needed.sm
        };
        let chips = if needed.arch_specific {
            format!("{chip} only")
        } else {
            format!("{chip} and newer")
        };
        if chip_lacks {
            return Err(Error::new(
                ErrorKind::InvalidInput,
                format!(
                    "the kernels call `{name}`, which NVIDIA chips have on {chips}, not on \
                     {processor}: compile this module for {chip} (`#nvvm.target<chip = \"{chip}\">`, \
                     or `nvptx({chip})` in `include_gpu_binary!`), or leave out the op that needs it"
                ),
            ));
        }
        if ptx < needed.ptx {
            return Err(Error::new(
                ErrorKind::InvalidInput,
                format!(
                    "the kernels call `{name}`, which needs PTX ISA {}.{} or newer, and this \
                     module is compiled for PTX {}.{}: add `features = \"+ptx{}\"` to its \
                     `#nvvm.target`",
                    needed.ptx / 10,
                    needed.ptx % 10,
                    ptx / 10,
                    ptx % 10,
                    needed.ptx
                ),
            ));
        }
    }
    Ok(())
}
