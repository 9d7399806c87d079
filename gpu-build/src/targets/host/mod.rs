//! Host hooks: the NVVM-lowered module turned into CPU code the runtime's block scheduler calls.
//!
//! - Thread, block, block-size and grid-size ids (`llvm.nvvm.read.ptx.sreg.*`) read a
//!   thread-local copy of the ids the scheduler passes in a context; in coroutine kernels,
//!   `gpu.barrier` calls back into the scheduler through that context. Entry points fill the
//!   thread-local copy (and a thread-local pointer to the context); a barrier restores both when
//!   the thread resumes, since other GPU threads of the block ran on the same OS thread
//!   meanwhile. A thread-local
//!   array whose address never escapes lets LLVM keep ids in registers across the kernel's
//!   memory accesses.
//! - Workgroup memory (address space 3) becomes thread-local: a scheduler thread runs one block
//!   at a time, with all of that block's GPU threads on it, so each block sees its own copy and
//!   its threads share it. Dynamic shared memory is a thread-local array of
//!   `host_abi::DYNAMIC_SHARED_BYTES`.
//! - libdevice math (`__nv_expf`) becomes the C math library (`expf`); `gpu.printf` the C
//!   library's `printf` (`printf.rs`); warp shuffles an exchange (`subgroup.rs`);
//!   `cf.assert` a report that fails the launch (`assert.rs`).
//! - Each kernel gets two entry points, so the runtime calls every kernel the same way:
//!   `<prefix><kernel>(void **params, void *context)` runs one GPU thread (the scheduler runs
//!   one per coroutine for kernels whose barriers `fission.rs` cannot split),
//!   `<prefix><kernel>.blocks(params, context, first, count) -> status` runs every thread of a
//!   range of blocks in loops (kernels with barriers as loops between barriers, `fission.rs`).
//!   There the kernel's body takes the thread ids as parameters (`<kernel>.ids`), so once inlined
//!   they are the loops' induction variables, not thread-local loads: LLVM optimizes and
//!   vectorizes the nest like a plain loop nest (PoCL's work-item loops), and one call amortizes
//!   its set-up over a whole chunk of blocks.
//!
//! The context's layout and the entry points' names are shared with `gpu-embed`'s host scheduler
//! through `gpu_manifest::targets::host`: twelve `u32` ids at byte 0, then the block and subgroup
//! barrier function pointers.
//!
//! This file holds the `Target` and `LlvmTarget` hooks; the rewrite `to_object` starts with is
//! `retarget.rs`, the entry points it ends with `entry/`.

mod assert;
mod block_reduce;
mod check;
mod entry;
mod fission;
mod index_checks;
mod ir;
mod mma;
mod optimize;
mod passes;
mod printf;
mod retarget;
mod subgroup;

use crate::error::Result;
use crate::targets::interface::{
    Artifact, Backend, Chip, Compiled, Description, LlvmBackend, LlvmTarget, ObjectSteps, Question,
    Target, TargetSpec,
};
use crate::targets::support::llvm::{emit_object, verify_optimized};
use crate::targets::support::nvvm::{
    nvvm_crash, nvvm_lowering, pass_tensor_maps_as_pointers, NVGPU_LOWERING,
};
use crate::toolkit::Toolkits;
use gpu_manifest::targets::host::HostEntries;
use gpu_manifest::{Format, ObjectAbi, Vendor};
use inkwell::targets::RelocMode;
use melior::ir::operation::OperationRefMut;
use melior::ir::OperationRef;
use retarget::retarget;

pub(crate) struct Host;

/// GPU operations the host target does not emulate (it emulates `gpu.shuffle`, `gpu.lane_id`,
/// `gpu.all_reduce` and `gpu.subgroup_reduce`, which MLIR lowers to shuffles and `redux.sync`:
/// `subgroup.rs`; the `gpu.subgroup_mma_*` ops, which it lowers to WMMA: `mma.rs`; and runs
/// `gpu.printf` through the C library: `printf.rs`).
const SUBGROUP_OPS: &[&str] = &[
    "gpu.subgroup_id",
    "gpu.num_subgroups",
    "gpu.subgroup_size",
    "gpu.rotate",
    "gpu.subgroup_broadcast",
];

/// What the Host target is.
static DESCRIPTION: Description = Description {
    example_chip: "x86_64-unknown-linux-gnu",
    // The host's chip is its target triple, the build's own by default.
    default_chip: None,
    triple: None,
    // The host runs the NVVM lowering (see `lowering_pass`).
    lowering_name: "NVVM",
    names_symbols_after_the_crate: true,
    ..Description::new(Vendor::Host, Backend::Llvm(&LLVM))
};

/// How the Host target compiles through LLVM.
static LLVM: LlvmBackend = LlvmBackend {
    steps: &Host,
    // The CPUs Rust's tier-1 Linux targets run on.
    back_ends: &[
        inkwell::targets::Target::initialize_x86,
        inkwell::targets::Target::initialize_aarch64,
    ],
    // LLVM IR input has no kernel calling convention for the host.
    kernel_calling_convention: None,
    vendor_dialect_pass: Some(NVGPU_LOWERING),
    kernel_attribute: "nvvm.kernel",
    // Host objects end up in the crate's program, possibly a shared library.
    reloc_mode: RelocMode::PIC,
    driver_symbols: &[],
    is_gpu: false,
    converts_wide_integers: true,
    isa_dump_extension: "s",
};

impl Target for Host {
    fn description(&self) -> &'static Description {
        &DESCRIPTION
    }

    /// Any triple, compiled for its baseline processor (as rustc does by default).
    fn chip(&self, _spec: &TargetSpec) -> Result<Chip> {
        Ok(Chip::plain("generic"))
    }

    fn lowering_crash(&self, op: &OperationRef, name: &str) -> Option<(String, String)> {
        nvvm_crash(op, name)
    }

    fn toolkit_identity(&self, _toolkits: &Toolkits) -> String {
        "none (LLVM only)".to_string()
    }

    fn explain(&self, question: Question<'_>) -> Option<&'static str> {
        match question {
            Question::NeutralOp(op) => SUBGROUP_OPS.contains(&op).then_some(
                "the host target does not emulate this subgroup (warp) operation (it emulates \
                     gpu.shuffle, gpu.lane_id, gpu.all_reduce, gpu.subgroup_reduce and the \
                     gpu.subgroup_mma ops)",
            ),
            _ => None,
        }
    }
}

impl LlvmTarget for Host {
    /// TMA descriptors become pointers before the NVVM lowering (see
    /// `pass_tensor_maps_as_pointers`), and block reductions go through workgroup memory
    /// instead of warp shuffles (`block_reduce.rs`); checked objects' memref accesses get
    /// their index checks (`index_checks.rs`).
    fn prepare_for_lowering(
        &self,
        context: &melior::Context,
        gpu_module: &OperationRefMut,
        checked: bool,
    ) {
        pass_tensor_maps_as_pointers(context, gpu_module);
        block_reduce::all_reduce_through_workgroup_memory(context, gpu_module);
        if checked {
            index_checks::mark_memref_indices(context, gpu_module);
        }
    }

    /// The host starts from the NVVM lowering (with `redux.sync` for `gpu.subgroup_reduce`, as
    /// on sm_80, so it shares the lowering of those chips); `retarget` then turns its GPU
    /// intrinsics into CPU code.
    fn lowering_pass(&self, _processor: &str) -> String {
        nvvm_lowering(true)
    }

    /// The GPU module retargeted to the CPU with its entry points (libdevice calls became C
    /// library calls, which the final link resolves); optimized with thread loops that stop at
    /// the first thread a guard turns away; an object file.
    fn to_object(&self, mut steps: ObjectSteps<'_, '_>) -> Result<Compiled> {
        let (job, module, machine) = (steps.job, steps.module, steps.machine);
        let retargeted = retarget(&job, module, job.symbol_prefix)?;
        let mut searched = steps.link_user_bitcode()?;
        searched.push("the C math library".to_string());
        steps.drop_unused()?;
        steps.optimize(|| {
            optimize::optimize(module, machine, job.spec.opt_level)?;
            verify_optimized(module)
        })?;
        steps.check_resolved(retargeted.allowed_undefined, &searched)?;
        let object = emit_object(&job, machine, module, &mut steps.dumps, steps.dump.isa)?;
        let abi = ObjectAbi::Host(HostEntries {
            symbol_prefix: job.symbol_prefix.to_string(),
            coroutine_kernels: retargeted.coroutine_kernels,
            checked: job.spec.checked,
            // Named once the crate's objects are gathered into it (`output.rs`).
            library: String::new(),
        });
        let artifacts = vec![Artifact {
            format: Format::Bin,
            extension: "o".to_string(),
            bytes: object,
        }];
        Ok(steps.finish(artifacts, abi))
    }
}
