//! The entry points of each kernel, what the runtime's block scheduler calls: the one-thread
//! entry `<prefix><kernel>` and the block-range entry `<prefix><kernel>.blocks` (names and
//! context layout from `gpu_manifest::targets::host`). Here, which entries each kernel gets and what
//! they share; the entry builder's parts, one concern a file: the prologue every entry starts
//! with (`prologue.rs`), the kernel's body as a function of its thread ids (`body.rs`), the loop
//! over a range of blocks (`blocks.rs`), the loops over a block's threads (`loops.rs`), kernels
//! split at their barriers (`regions.rs`, and `subgroups.rs` for those run by subgroup) and the
//! check that a block's threads reached one barrier (`states.rs`).

mod blocks;
mod body;
mod loops;
mod prologue;
mod regions;
mod states;
mod subgroups;

use super::fission::{fission, Fission, Regions};
use super::ir::{always_inline, functions_using, may_call};
use crate::error::Result;
use crate::targets::interface::Job;
use crate::targets::support::nvvm::PTX_KERNEL_CALLING_CONVENTION;
use body::with_thread_id_parameters;
use gpu_manifest::targets::host as host_abi;
use inkwell::basic_block::BasicBlock;
use inkwell::module::{Linkage, Module};
use inkwell::values::{BasicMetadataValueEnum, FunctionValue, GlobalValue, PointerValue};

/// What the entry points need from outside the module.
pub(super) struct Entries {
    /// Kernels that run a coroutine per thread.
    pub(super) coroutine_kernels: Vec<String>,
    /// Whether a block entry calls `malloc` and `free` (per-thread arrays of split kernels).
    pub(super) allocates: bool,
}

/// Kernels become internal functions, called by the two entry points of each. Kernels with
/// barriers are split at them (`fission.rs`) where they can be.
pub(super) fn add_entry_points<'ll>(
    job: &Job<'_, 'll>,
    module: &Module<'ll>,
    prefix: &str,
    context: GlobalValue<'ll>,
    ids: GlobalValue<'ll>,
    barriers: &[FunctionValue<'ll>],
    subgroup_barrier: Option<FunctionValue<'ll>>,
) -> Result<Entries> {
    let kernels: Vec<FunctionValue> = module
        .get_functions()
        .filter(|f| {
            f.get_call_conventions() == PTX_KERNEL_CALLING_CONVENTION && f.count_basic_blocks() > 0
        })
        .collect();
    let mut bodies = Vec::new();
    for kernel in &kernels {
        kernel.set_call_conventions(0);
        kernel.set_linkage(Linkage::Internal);
        always_inline(job, *kernel);
        bodies.push(with_thread_id_parameters(job, module, *kernel, ids)?);
    }
    // Device functions that read a thread id (not inlined into a kernel here) still read it from
    // the thread-local ids, which a block entry whose work calls one then keeps up to date.
    let thread_ids: [Option<FunctionValue>; 3] =
        [0, 1, 2].map(|slot| module.get_function(&format!("__gpu_host_id_{slot}")));
    let readers: Vec<FunctionValue> = thread_ids.iter().flatten().copied().collect();
    // Block ids and sizes, grid sizes: the same in every thread of a block.
    let uniform: Vec<FunctionValue> = (3..host_abi::ID_SLOTS)
        .filter_map(|slot| module.get_function(&format!("__gpu_host_id_{slot}")))
        .collect();
    // The functions that use thread-local globals besides the context and ids: workgroup memory
    // (`retarget.rs`), which a worker's blocks share one after another.
    let workgroup_memory: Vec<_> = module
        .get_globals()
        .filter(|g| g.is_thread_local() && *g != context && *g != ids)
        .collect();
    let workgroup_memory_users = functions_using(&workgroup_memory);
    let mut entries = Entries {
        coroutine_kernels: Vec::new(),
        allocates: false,
    };
    for (kernel, body) in kernels.into_iter().zip(bodies) {
        let name = kernel.get_name().to_string_lossy().into_owned();
        EntryBuilder::new(
            job,
            module,
            context,
            ids,
            kernel,
            &host_abi::thread_entry(prefix, &name),
            false,
        )?
        .thread()?;
        let region_name = format!("{name}.region");
        let work = match fission(
            body,
            barriers,
            subgroup_barrier,
            &uniform,
            thread_ids,
            &region_name,
        ) {
            Fission::NoBarrier => ThreadWork::Body(body),
            Fission::Split(regions) => {
                entries.allocates |= regions.thread_bytes > 0;
                ThreadWork::Regions(regions)
            }
            Fission::Coroutines(why) => {
                job.cargo.warn(format!(
                    "kernel `{name}` runs one coroutine per GPU thread on the host (slow): \
                     its barriers cannot be split into thread loops: {why}"
                ));
                entries.coroutine_kernels.push(name.clone());
                ThreadWork::Coroutines
            }
        };
        let tid_read_elsewhere = match &work {
            ThreadWork::Body(body) => may_call(*body, &readers),
            ThreadWork::Regions(regions) => may_call(regions.function, &readers),
            ThreadWork::Coroutines => true,
        };
        let uses_workgroup_memory = match &work {
            ThreadWork::Body(body) => {
                workgroup_memory_users.contains(body) || may_call(*body, &workgroup_memory_users)
            }
            _ => true,
        };
        EntryBuilder::new(
            job,
            module,
            context,
            ids,
            kernel,
            &host_abi::blocks_entry(prefix, &name),
            true,
        )?
        .blocks(work, tid_read_elsewhere, uses_workgroup_memory)?;
    }
    Ok(entries)
}

/// What a block entry runs for each thread.
enum ThreadWork<'ll> {
    /// The kernel with the thread ids as parameters (no barriers).
    Body(FunctionValue<'ll>),
    /// The kernel split at its barriers.
    Regions(Regions<'ll>),
    /// Nothing: the kernel runs a coroutine per thread, through the one-thread entry.
    Coroutines,
}

/// One entry point: sets the context and the ids, loads the kernel's parameters, calls it.
struct EntryBuilder<'a, 'll> {
    job: &'a Job<'a, 'll>,
    module: &'a Module<'ll>,
    builder: inkwell::builder::Builder<'ll>,
    function: FunctionValue<'ll>,
    /// The first block, where the parameters are loaded.
    entry: BasicBlock<'ll>,
    kernel: FunctionValue<'ll>,
    context: PointerValue<'ll>,
    ids: PointerValue<'ll>,
    arguments: Vec<BasicMetadataValueEnum<'ll>>,
}
