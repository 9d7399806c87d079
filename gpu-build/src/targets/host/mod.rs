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
//! through `gpu_manifest::host_abi`: twelve `u32` ids at byte 0, then the block and subgroup
//! barrier function pointers.

mod assert;
mod block_reduce;
mod fission;
mod ir;
mod mma;
mod optimize;
mod printf;
mod subgroup;

use crate::error::{Error, ErrorKind, Result};
use crate::targets::interface::{
    build_triple, Artifact, Chip, Dumps, Job, LlvmTarget, PreLinked, Target,
};
use crate::targets::nvptx::lowering::{
    nvvm_crash, nvvm_lowering, pass_tensor_maps_as_pointers, NVGPU_LOWERING,
};
use crate::targets::support::llvm::{emit_object, verify_optimized};
use crate::toolkit::Toolkits;
use fission::{fission, Fission, Regions, DONE};
use gpu_manifest::host_abi;
use gpu_manifest::Format;
use gpu_manifest::Vendor;
use inkwell::attributes::AttributeLoc;
use inkwell::basic_block::BasicBlock;
use inkwell::module::{Linkage, Module};
use inkwell::targets::{RelocMode, TargetMachine};
use inkwell::types::{BasicType, BasicTypeEnum};
use inkwell::values::{
    AsValueRef, BasicMetadataValueEnum, BasicValue, FunctionValue, GlobalValue, InstructionValue,
    IntValue, PointerValue,
};
use inkwell::AddressSpace;
use ir::{always_inline, barrier_function, builder_error, calls_of, id_reader, IDS_BYTES};
use melior::ir::operation::OperationRefMut;
use melior::ir::OperationRef;

/// NVPTX's shared address space.
const WORKGROUP_ADDRESS_SPACE: u16 = 3;
const CONTEXT_VARIABLE: &str = "__gpu_host_context";
const IDS_VARIABLE: &str = "__gpu_host_ids";

/// The id intrinsics and their slot in the context.
const ID_INTRINSICS: [(&str, u64); 12] = [
    ("llvm.nvvm.read.ptx.sreg.tid.x", 0),
    ("llvm.nvvm.read.ptx.sreg.tid.y", 1),
    ("llvm.nvvm.read.ptx.sreg.tid.z", 2),
    ("llvm.nvvm.read.ptx.sreg.ntid.x", 3),
    ("llvm.nvvm.read.ptx.sreg.ntid.y", 4),
    ("llvm.nvvm.read.ptx.sreg.ntid.z", 5),
    ("llvm.nvvm.read.ptx.sreg.ctaid.x", 6),
    ("llvm.nvvm.read.ptx.sreg.ctaid.y", 7),
    ("llvm.nvvm.read.ptx.sreg.ctaid.z", 8),
    ("llvm.nvvm.read.ptx.sreg.nctaid.x", 9),
    ("llvm.nvvm.read.ptx.sreg.nctaid.y", 10),
    ("llvm.nvvm.read.ptx.sreg.nctaid.z", 11),
];

/// The block-wide barriers NVVM lowering emits for `gpu.barrier`.
const BARRIER_INTRINSICS: [&str; 3] = [
    "llvm.nvvm.barrier.cta.sync.aligned.all",
    "llvm.nvvm.barrier0",
    "llvm.nvvm.barrier.cta.sync.all",
];

/// libdevice functions with a C library function of the same name minus `__nv_`.
const LIBM: &[&str] = &[
    "acos",
    "acosh",
    "asin",
    "asinh",
    "atan",
    "atan2",
    "atanh",
    "cbrt",
    "ceil",
    "copysign",
    "cos",
    "cosh",
    "erf",
    "erfc",
    "exp",
    "exp2",
    "expm1",
    "fabs",
    "fdim",
    "floor",
    "fma",
    "fmax",
    "fmin",
    "fmod",
    "hypot",
    "lgamma",
    "log",
    "log10",
    "log1p",
    "log2",
    "nearbyint",
    "pow",
    "remainder",
    "rint",
    "round",
    "sin",
    "sinh",
    "sqrt",
    "tan",
    "tanh",
    "tgamma",
    "trunc",
];

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

impl Target for Host {
    fn vendor(&self) -> Vendor {
        Vendor::Host
    }

    /// The host's chip is its target triple.
    fn triple(&self, chip: &str) -> String {
        chip.to_string()
    }

    fn default_chip(&self) -> String {
        build_triple()
    }

    fn chip_is_triple(&self) -> bool {
        true
    }

    fn example_chip(&self) -> &'static str {
        "x86_64-unknown-linux-gnu"
    }

    /// Any triple, compiled for its baseline processor (as rustc does by default).
    fn parse_chip(&self, _chip: &str) -> Result<Chip> {
        Ok(Chip {
            processor: "generic".into(),
            features: String::new(),
        })
    }

    /// The host runs the NVVM lowering (see `lowering_pass`).
    fn lowering_name(&self) -> &'static str {
        "NVVM"
    }

    fn lowering_crash(&self, op: &OperationRef, name: &str) -> Option<(String, String)> {
        nvvm_crash(op, name)
    }

    fn unsupported_neutral_op(&self, op: &str) -> Option<&'static str> {
        SUBGROUP_OPS.contains(&op).then_some(
            "the host target does not emulate this subgroup (warp) operation (it emulates \
             gpu.shuffle, gpu.lane_id, gpu.all_reduce, gpu.subgroup_reduce and the \
             gpu.subgroup_mma ops)",
        )
    }

    fn toolkit_identity(&self, _toolkits: &Toolkits) -> String {
        "none (LLVM only)".to_string()
    }

    fn names_symbols_after_the_crate(&self) -> bool {
        true
    }

    fn llvm(&self) -> Option<&dyn LlvmTarget> {
        Some(self)
    }
}

impl LlvmTarget for Host {
    /// The CPUs Rust's tier-1 Linux targets run on.
    fn initialize_llvm(&self) {
        let config = Default::default();
        inkwell::targets::Target::initialize_x86(&config);
        inkwell::targets::Target::initialize_aarch64(&config);
    }

    /// TMA descriptors become pointers before the NVVM lowering (see
    /// `pass_tensor_maps_as_pointers`), and block reductions go through workgroup memory
    /// instead of warp shuffles (`block_reduce.rs`).
    fn prepare_for_lowering(&self, context: &melior::Context, gpu_module: &OperationRefMut) {
        pass_tensor_maps_as_pointers(context, gpu_module);
        block_reduce::all_reduce_through_workgroup_memory(context, gpu_module);
    }

    /// The host starts from the NVVM lowering (with `redux.sync` for `gpu.subgroup_reduce`, as
    /// on sm_80, so it shares the lowering of those chips); `retarget` then turns its GPU
    /// intrinsics into CPU code.
    fn lowering_pass(&self, _processor: &str) -> String {
        nvvm_lowering(true)
    }

    fn vendor_dialect_pass(&self) -> Option<&'static str> {
        Some(NVGPU_LOWERING)
    }

    fn kernel_attribute(&self) -> &'static str {
        "nvvm.kernel"
    }

    /// Host objects end up in the crate's program, possibly a shared library.
    fn reloc_mode(&self) -> RelocMode {
        RelocMode::PIC
    }

    fn pre_link<'ll>(&self, job: &Job<'_, 'll>, module: &Module<'ll>) -> Result<PreLinked> {
        let retargeted = retarget(job, module, job.symbol_prefix)?;
        Ok(PreLinked {
            allowed_undefined: retargeted.libm_calls,
            abi: gpu_manifest::ObjectAbi::Host(gpu_manifest::HostEntries {
                symbol_prefix: job.symbol_prefix.to_string(),
                coroutine_kernels: retargeted.coroutine_kernels,
                // Named once the crate's objects are gathered into it (`output.rs`).
                library: String::new(),
            }),
        })
    }

    /// libdevice calls became C library calls in `retarget`; the final link resolves them.
    fn link_device_libraries<'ll>(
        &self,
        _job: &Job<'_, 'll>,
        _module: &Module<'ll>,
    ) -> Result<Vec<String>> {
        Ok(vec!["the C math library".to_string()])
    }

    fn is_gpu(&self) -> bool {
        false
    }

    fn emit(
        &self,
        job: &Job,
        machine: &TargetMachine,
        module: &Module,
        dumps: &mut Dumps,
        dump_isa: bool,
    ) -> Result<Vec<Artifact>> {
        Ok(vec![Artifact {
            format: Format::Bin,
            extension: "o".to_string(),
            bytes: emit_object(job, machine, module, dumps, dump_isa)?,
        }])
    }

    /// The default pipeline plus thread loops that stop at the first thread a guard turns away.
    fn optimize(&self, module: &Module, machine: &TargetMachine, level: u8) -> Result<()> {
        optimize::optimize(module, machine, level)?;
        verify_optimized(module)
    }
}

/// What the runtime needs to know about the retargeted module.
struct Retargeted {
    /// Kernels whose threads run as coroutines (barriers that fission cannot handle).
    coroutine_kernels: Vec<String>,
    /// C library functions the module now calls (allowed to stay undefined: the final link
    /// resolves them).
    libm_calls: Vec<String>,
}

fn retarget<'ll>(
    job: &Job<'_, 'll>,
    module: &Module<'ll>,
    symbol_prefix: &str,
) -> Result<Retargeted> {
    let ptr = job.llvm.ptr_type(AddressSpace::default());
    let context = module.add_global(ptr, None, CONTEXT_VARIABLE);
    context.set_initializer(&ptr.const_null());
    context.set_thread_local(true);
    context.set_linkage(Linkage::Internal);
    let ids_type = job.llvm.i32_type().array_type(12);
    let ids = module.add_global(ids_type, None, IDS_VARIABLE);
    ids.set_initializer(&ids_type.const_zero());
    ids.set_thread_local(true);
    ids.set_linkage(Linkage::Internal);
    ids.set_alignment(16);

    make_workgroup_memory_thread_local(job, module)?;
    for (name, slot) in ID_INTRINSICS {
        if let Some(intrinsic) = module.get_function(name) {
            replace_function(intrinsic, id_reader(job, module, ids, slot)?);
        }
    }
    let mut barriers = Vec::new();
    for name in BARRIER_INTRINSICS {
        if let Some(intrinsic) = module.get_function(name) {
            let function = barrier_function(
                job,
                module,
                context,
                ids,
                &format!("__gpu_host_{}", name.replace('.', "_")),
                intrinsic.get_type(),
                host_abi::BARRIER_OFFSET,
            )?;
            replace_function(intrinsic, function);
            barriers.push(function);
        }
    }
    let mut subgroup_barrier = None;
    if subgroup::uses_subgroups(module) || mma::uses_mma(module) {
        let ty = job.llvm.void_type().fn_type(&[], false);
        let exchange = barrier_function(
            job,
            module,
            context,
            ids,
            "__gpu_host_subgroup_barrier",
            ty,
            host_abi::SUBGROUP_BARRIER_OFFSET,
        )?;
        subgroup::emulate(job, module, ids, exchange)?;
        mma::emulate(job, module, ids, exchange)?;
        // Fission splits kernels at exchanges as at barriers (the block waiting is stronger than
        // the subgroup waiting, and exact where the whole block runs the shuffle or multiply;
        // where only some subgroups do, subgroups run by their own state).
        barriers.push(exchange);
        subgroup_barrier = Some(exchange);
    }
    let mut libm_calls = use_c_math_library(module)?;
    assert::report_assertions(job, module, context, ids)?;
    if printf::use_c_printf(job, module)? {
        // LLVM's optimizer turns a printf of a constant line into puts or putchar.
        libm_calls.extend(["printf", "puts", "putchar"].map(String::from));
    }
    reject_other_intrinsics(module)?;
    let entries = add_entry_points(
        job,
        module,
        symbol_prefix,
        context,
        ids,
        &barriers,
        subgroup_barrier,
    )?;
    if entries.allocates {
        libm_calls.extend(["malloc".to_string(), "free".to_string()]);
    }
    Ok(Retargeted {
        coroutine_kernels: entries.coroutine_kernels,
        libm_calls,
    })
}

/// A call as the instruction it is (to put metadata on it).
fn call_instruction(call: inkwell::values::CallSiteValue) -> Result<InstructionValue> {
    match call.try_as_basic_value() {
        inkwell::values::ValueKind::Basic(value) => value.as_instruction_value(),
        inkwell::values::ValueKind::Instruction(instruction) => Some(instruction),
    }
    .ok_or_else(|| Error::new(ErrorKind::Codegen, "a call that is no instruction"))
}

/// Points every use of `old` at `new` (same type) and deletes `old`.
fn replace_function(old: FunctionValue, new: FunctionValue) {
    old.as_global_value()
        .as_pointer_value()
        .replace_all_uses_with(new.as_global_value().as_pointer_value());
    // SAFETY: no uses remain.
    unsafe { old.delete() };
}

fn make_workgroup_memory_thread_local<'ll>(job: &Job<'_, 'll>, module: &Module<'ll>) -> Result<()> {
    let workgroup: Vec<GlobalValue> = module
        .get_globals()
        .filter(|g| {
            g.as_pointer_value().get_type().get_address_space()
                == AddressSpace::from(WORKGROUP_ADDRESS_SPACE)
        })
        .collect();
    let shared_ptr = job
        .llvm
        .ptr_type(AddressSpace::from(WORKGROUP_ADDRESS_SPACE));
    for old in workgroup {
        let name = old.get_name().to_string_lossy().into_owned();
        // `gpu.dynamic_shared_memory`: a zero-length array (MLIR 22 names it
        // `__dynamic_shmem__<n>`), or an external declaration in LLVM IR input.
        let zero_length = matches!(
            old.get_value_type(),
            inkwell::types::AnyTypeEnum::ArrayType(array) if array.is_empty()
        );
        let dynamic = old.is_declaration() || zero_length;
        let value_type: BasicTypeEnum = if dynamic {
            job.llvm
                .i8_type()
                .array_type(host_abi::DYNAMIC_SHARED_BYTES)
                .as_basic_type_enum()
        } else {
            old.get_value_type().try_into().map_err(|_| {
                Error::new(
                    ErrorKind::Codegen,
                    format!("workgroup variable `{name}` has no storage type"),
                )
            })?
        };
        let new = module.add_global(value_type, None, &format!("{name}.host"));
        new.set_thread_local(true);
        new.set_linkage(Linkage::Internal);
        new.set_alignment(old.get_alignment().max(16));
        match old.get_initializer().filter(|_| !dynamic) {
            Some(initializer) => new.set_initializer(&initializer),
            None => new.set_initializer(&value_type.const_zero()),
        }
        let cast = new.as_pointer_value().const_address_space_cast(shared_ptr);
        old.as_pointer_value().replace_all_uses_with(cast);
        // SAFETY: no uses remain.
        unsafe { old.delete() };
    }
    Ok(())
}

/// `__nv_expf` → `expf`; libdevice functions without a C library twin are errors.
fn use_c_math_library(module: &Module) -> Result<Vec<String>> {
    let mut calls = Vec::new();
    let declared: Vec<FunctionValue> = module
        .get_functions()
        .filter(|f| f.count_basic_blocks() == 0 && f.get_name().to_bytes().starts_with(b"__nv_"))
        .collect();
    for function in declared {
        let name = function.get_name().to_string_lossy().into_owned();
        let c_name = name.trim_start_matches("__nv_").to_string();
        let base = c_name
            .strip_suffix('f')
            .filter(|b| LIBM.contains(b))
            .unwrap_or(&c_name);
        if !LIBM.contains(&base) {
            return Err(Error::new(
                ErrorKind::Unsupported,
                format!("`{name}` (a libdevice function) has no C math library equivalent, so the kernel cannot run on the host"),
            ));
        }
        function.as_global_value().set_name(&c_name);
        calls.push(c_name);
    }
    Ok(calls)
}

fn reject_other_intrinsics(module: &Module) -> Result<()> {
    let remaining = module.get_functions().find(|f| {
        let name = f.get_name().to_bytes();
        name.starts_with(b"llvm.nvvm.")
            && f.as_global_value()
                .as_pointer_value()
                .get_first_use()
                .is_some()
    });
    match remaining {
        Some(function) => Err(Error::new(
            ErrorKind::Unsupported,
            format!(
                "the kernel uses `{}`, a GPU instruction the host target does not emulate",
                function.get_name().to_string_lossy()
            ),
        )),
        None => Ok(()),
    }
}

/// What the entry points need from outside the module.
struct Entries {
    /// Kernels that run a coroutine per thread.
    coroutine_kernels: Vec<String>,
    /// Whether a block entry calls `malloc` and `free` (per-thread arrays of split kernels).
    allocates: bool,
}

/// Kernels become internal functions, called by the two entry points of each. Kernels with
/// barriers are split at them (`fission.rs`) where they can be.
fn add_entry_points<'ll>(
    job: &Job<'_, 'll>,
    module: &Module<'ll>,
    prefix: &str,
    context: GlobalValue<'ll>,
    ids: GlobalValue<'ll>,
    barriers: &[FunctionValue<'ll>],
    subgroup_barrier: Option<FunctionValue<'ll>>,
) -> Result<Entries> {
    const PTX_KERNEL: u32 = 71;
    let kernels: Vec<FunctionValue> = module
        .get_functions()
        .filter(|f| f.get_call_conventions() == PTX_KERNEL && f.count_basic_blocks() > 0)
        .collect();
    let mut bodies = Vec::new();
    for kernel in &kernels {
        kernel.set_call_conventions(0);
        kernel.set_linkage(Linkage::Internal);
        always_inline(job, *kernel);
        bodies.push(with_thread_id_parameters(job, module, *kernel, ids)?);
    }
    // Device functions that read a thread id (not inlined into a kernel here) still read it from
    // the thread-local ids, which the block entry then keeps up to date.
    let tid_read_elsewhere = (0..3).any(|slot| {
        module
            .get_function(&format!("__gpu_host_id_{slot}"))
            .is_some_and(|f| {
                f.as_global_value()
                    .as_pointer_value()
                    .get_first_use()
                    .is_some()
            })
    });
    // Block ids and sizes, grid sizes: the same in every thread of a block.
    let uniform: Vec<FunctionValue> = (3..host_abi::ID_SLOTS)
        .filter_map(|slot| module.get_function(&format!("__gpu_host_id_{slot}")))
        .collect();
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
        let work = match fission(body, barriers, subgroup_barrier, &uniform, &region_name) {
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
        EntryBuilder::new(
            job,
            module,
            context,
            ids,
            kernel,
            &host_abi::blocks_entry(prefix, &name),
            true,
        )?
        .blocks(work, tid_read_elsewhere)?;
    }
    Ok(entries)
}

/// Moves `kernel`'s body into `<kernel>.ids(tid.x, tid.y, tid.z, params...)`, where the thread ids
/// are parameters instead of thread-local loads: inlined into the block entry's loops, they are
/// the loops' induction variables, and LLVM can vectorize across the threads of a block (as
/// PoCL's work-item loops do). `kernel` becomes a wrapper that passes the thread-local ids (what
/// the one-thread entry and coroutines use).
fn with_thread_id_parameters<'ll>(
    job: &Job<'_, 'll>,
    module: &Module<'ll>,
    kernel: FunctionValue<'ll>,
    ids: GlobalValue<'ll>,
) -> Result<FunctionValue<'ll>> {
    use inkwell::types::BasicMetadataTypeEnum;
    let llvm = job.llvm;
    let i32_type = llvm.i32_type();
    let mut parameter_types: Vec<BasicMetadataTypeEnum> = vec![i32_type.into(); 3];
    parameter_types.extend(kernel.get_type().get_param_types());
    let body_type = llvm.void_type().fn_type(&parameter_types, false);
    let name = format!("{}.ids", kernel.get_name().to_string_lossy());
    let body = module.add_function(&name, body_type, Some(Linkage::Internal));
    always_inline(job, body);
    let moved = || {
        Error::new(
            ErrorKind::Codegen,
            "cannot move a kernel's body for the host",
        )
    };
    let anchor = llvm.append_basic_block(body, "anchor");
    let mut after = anchor;
    for block in kernel.get_basic_blocks() {
        block.move_after(after).map_err(|()| moved())?;
        after = block;
    }
    // SAFETY: the anchor is empty and nothing refers to it.
    unsafe { anchor.delete() }.map_err(|()| moved())?;
    for (old, new) in kernel.get_param_iter().zip(body.get_param_iter().skip(3)) {
        // SAFETY: the same type; `old`'s uses all moved into `body`.
        unsafe {
            inkwell::llvm_sys::core::LLVMReplaceAllUsesWith(old.as_value_ref(), new.as_value_ref())
        };
    }
    for slot in 0..3u32 {
        let Some(reader) = module.get_function(&format!("__gpu_host_id_{slot}")) else {
            continue;
        };
        let Some(parameter) = body.get_nth_param(slot) else {
            continue;
        };
        let in_body = calls_of(module, reader)
            .into_iter()
            .filter(|call| call.get_parent().and_then(|b| b.get_parent()) == Some(body));
        for call in in_body {
            // SAFETY: the call returns the i32 id that `parameter` holds.
            unsafe {
                inkwell::llvm_sys::core::LLVMReplaceAllUsesWith(
                    call.as_value_ref(),
                    parameter.as_value_ref(),
                )
            };
            call.erase_from_basic_block();
        }
    }
    // The wrapper: the thread-local ids, then the body.
    let builder = llvm.create_builder();
    builder.position_at_end(llvm.append_basic_block(kernel, "entry"));
    let mut arguments: Vec<BasicMetadataValueEnum> = Vec::new();
    for slot in 0..3u64 {
        // SAFETY: the array holds twelve u32 ids.
        let pointer = unsafe {
            builder.build_in_bounds_gep(
                i32_type,
                ids.as_pointer_value(),
                &[llvm.i64_type().const_int(slot, false)],
                "id",
            )
        }
        .map_err(builder_error)?;
        arguments.push(
            builder
                .build_load(i32_type, pointer, "tid")
                .map_err(builder_error)?
                .into(),
        );
    }
    arguments.extend(kernel.get_param_iter().map(BasicMetadataValueEnum::from));
    builder
        .build_call(body, &arguments, "")
        .map_err(builder_error)?;
    builder.build_return(None).map_err(builder_error)?;
    Ok(body)
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

/// The innermost loop's call.
struct Innermost<'ll> {
    /// `<kernel>.ids`, or the region function.
    function: FunctionValue<'ll>,
    /// Whether the thread-local ids must follow the loops too.
    tid_read_elsewhere: bool,
    /// For a region function: its state and bookkeeping.
    region: Option<RegionCall<'ll>>,
}

/// A call of a split kernel's region function in the thread loops.
#[derive(Clone, Copy)]
struct RegionCall<'ll> {
    state: u32,
    /// Total threads of the block (i64).
    threads_per_block: IntValue<'ll>,
    uniform_in: PointerValue<'ll>,
    uniform_out: PointerValue<'ll>,
    threads: PointerValue<'ll>,
    /// The states the threads reached: one unless threads of the block reached different
    /// barriers.
    reached: StateRange<'ll>,
}

/// The lowest and highest of a set of states (i32 slots), to tell whether they all agree.
#[derive(Clone, Copy)]
struct StateRange<'ll> {
    lowest: PointerValue<'ll>,
    highest: PointerValue<'ll>,
}

/// A split kernel's storage in its block entry.
struct RegionStorage<'ll> {
    /// What every region call passes (its state set per region).
    call: RegionCall<'ll>,
    /// The next region to run (i32).
    state: PointerValue<'ll>,
    /// Where threads that reached different barriers end up.
    diverged: BasicBlock<'ll>,
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

impl<'a, 'll> EntryBuilder<'a, 'll> {
    fn new(
        job: &'a Job<'a, 'll>,
        module: &'a Module<'ll>,
        context: GlobalValue<'ll>,
        ids: GlobalValue<'ll>,
        kernel: FunctionValue<'ll>,
        symbol: &str,
        block_range: bool,
    ) -> Result<Self> {
        let ptr = job.llvm.ptr_type(AddressSpace::default());
        let i64_type = job.llvm.i64_type();
        let entry_type = if block_range {
            job.llvm.i32_type().fn_type(
                &[ptr.into(), ptr.into(), i64_type.into(), i64_type.into()],
                false,
            )
        } else {
            job.llvm
                .void_type()
                .fn_type(&[ptr.into(), ptr.into()], false)
        };
        let function = module.add_function(symbol, entry_type, Some(Linkage::External));
        // The context is the scheduler's, private to this call.
        let noalias = inkwell::attributes::Attribute::get_named_enum_kind_id("noalias");
        function.add_attribute(
            AttributeLoc::Param(1),
            job.llvm.create_enum_attribute(noalias, 0),
        );
        let builder = job.llvm.create_builder();
        let entry = job.llvm.append_basic_block(function, "entry");
        builder.position_at_end(entry);
        let [params, context_argument, ..] = function.get_params()[..] else {
            return Err(Error::new(
                ErrorKind::Codegen,
                "a host entry point without its two parameters",
            ));
        };
        let (params, context_argument) = (
            params.into_pointer_value(),
            context_argument.into_pointer_value(),
        );
        builder
            .build_store(context.as_pointer_value(), context_argument)
            .map_err(builder_error)?;
        let bytes = job.llvm.i64_type().const_int(IDS_BYTES, false);
        builder
            .build_memcpy(ids.as_pointer_value(), 16, context_argument, 4, bytes)
            .map_err(builder_error)?;
        let mut arguments = Vec::new();
        for (index, ty) in kernel.get_type().get_param_types().into_iter().enumerate() {
            let index = job.llvm.i64_type().const_int(index as u64, false);
            // SAFETY: `params` holds one pointer per kernel parameter.
            let slot = unsafe { builder.build_in_bounds_gep(ptr, params, &[index], "slot") }
                .map_err(builder_error)?;
            let pointer = builder
                .build_load(ptr, slot, "param")
                .map_err(builder_error)?
                .into_pointer_value();
            let ty: BasicTypeEnum = ty.try_into().map_err(|_| {
                Error::new(ErrorKind::Codegen, "a kernel parameter without storage")
            })?;
            arguments.push(
                builder
                    .build_load(ty, pointer, "value")
                    .map_err(builder_error)?
                    .into(),
            );
        }
        Ok(EntryBuilder {
            job,
            module,
            builder,
            function,
            entry,
            kernel,
            context: context_argument,
            ids: ids.as_pointer_value(),
            arguments,
        })
    }

    /// One GPU thread, its ids already in the context.
    fn thread(self) -> Result<()> {
        self.builder
            .build_call(self.kernel, &self.arguments, "")
            .map_err(builder_error)?;
        self.builder.build_return(None).map_err(builder_error)?;
        Ok(())
    }

    /// Slot `slot` of the context (`in_context`) or of the thread-local ids.
    fn id_slot(&self, slot: u64, in_context: bool) -> Result<PointerValue<'ll>> {
        let index = self.job.llvm.i64_type().const_int(slot, false);
        let base = if in_context { self.context } else { self.ids };
        // SAFETY: both hold twelve u32 ids.
        unsafe {
            self.builder
                .build_in_bounds_gep(self.job.llvm.i32_type(), base, &[index], "id")
        }
        .map_err(builder_error)
    }

    /// Every thread of blocks `first..first + count`: a loop over the blocks (their ids into the
    /// thread-local ids), and in it z, y, x loops over the block's threads calling the body, or
    /// for a split kernel, such loops for one region after another. Returns a
    /// `host_abi::STATUS_*`.
    fn blocks(self, work: ThreadWork<'ll>, tid_read_elsewhere: bool) -> Result<()> {
        let llvm = self.job.llvm;
        let (i32_type, i64_type) = (llvm.i32_type(), llvm.i64_type());
        let function = match &work {
            ThreadWork::Body(body) => *body,
            ThreadWork::Regions(regions) => regions.function,
            ThreadWork::Coroutines => {
                let status =
                    i32_type.const_int(u64::from(host_abi::STATUS_NEEDS_COROUTINES), false);
                self.builder
                    .build_return(Some(&status))
                    .map_err(builder_error)?;
                return Ok(());
            }
        };
        let load = |slot: u64, name: &str| -> Result<IntValue<'ll>> {
            let value = self
                .builder
                .build_load(i32_type, self.id_slot(slot, true)?, name)
                .map_err(builder_error)?
                .into_int_value();
            if let Some(load) = value.as_instruction() {
                ir::mark_id_range(self.job, load, slot)?;
            }
            Ok(value)
        };
        let mut sizes = Vec::new();
        for slot in 3..6 {
            sizes.push(load(slot, "size")?);
        }
        let widen = |value| {
            self.builder
                .build_int_z_extend(value, i64_type, "wide")
                .map_err(builder_error)
        };
        let (grid_x, grid_y) = (widen(load(9, "grid")?)?, widen(load(10, "grid")?)?);
        let [first, count] = [2, 3].map(|n| {
            self.function
                .get_nth_param(n)
                .map(|p| p.into_int_value())
                .unwrap_or_else(|| i64_type.const_zero())
        });
        let end = self
            .builder
            .build_int_add(first, count, "end")
            .map_err(builder_error)?;
        let split = match &work {
            ThreadWork::Regions(regions) => Some((regions, self.region_storage(regions, &sizes)?)),
            _ => None,
        };

        // Block ids are counted along (x wraps into y, y into z), not divided out of the linear
        // index per block: a division per block is slow, and LLVM's backend may even redo it
        // inside the vectorized thread loops that use the id.
        let builder = &self.builder;
        let [first_x, first_y, first_z] = self.unravel(first, grid_x, grid_y)?;
        let mut counters = Vec::new();
        for (value, name) in [
            (first_x, "block_x"),
            (first_y, "block_y"),
            (first_z, "block_z"),
        ] {
            let counter = builder
                .build_alloca(i64_type, name)
                .map_err(builder_error)?;
            builder.build_store(counter, value).map_err(builder_error)?;
            counters.push(counter);
        }

        let exit = llvm.append_basic_block(self.function, "exit");
        let start = self.builder.get_insert_block().unwrap_or(self.entry);
        self.counted_loop(first, end, start, exit, |_, each, latch| {
            let [x, y, z] = [0, 1, 2].map(|axis| {
                builder
                    .build_load(i64_type, counters[axis], "block_id")
                    .map(|value| value.into_int_value())
                    .map_err(builder_error)
            });
            let (x, y, z) = (x?, y?, z?);
            // `raised` is an id plus 0 or 1: it wraps to 0 at `size` and carries 1 into the next.
            let wrap = |raised: IntValue<'ll>, size: IntValue<'ll>| -> Result<_> {
                let wraps = builder
                    .build_int_compare(inkwell::IntPredicate::EQ, raised, size, "wraps")
                    .map_err(builder_error)?;
                let next = builder
                    .build_select(wraps, i64_type.const_zero(), raised, "next_id")
                    .map_err(builder_error)?
                    .into_int_value();
                let carry = builder
                    .build_int_z_extend(wraps, i64_type, "carry")
                    .map_err(builder_error)?;
                Ok((next, carry))
            };
            let one = i64_type.const_int(1, false);
            let raised_x = builder
                .build_int_nuw_add(x, one, "raised")
                .map_err(builder_error)?;
            let (next_x, carry_x) = wrap(raised_x, grid_x)?;
            let raised_y = builder
                .build_int_nuw_add(y, carry_x, "raised")
                .map_err(builder_error)?;
            let (next_y, carry_y) = wrap(raised_y, grid_y)?;
            let next_z = builder
                .build_int_nuw_add(z, carry_y, "next_z")
                .map_err(builder_error)?;
            for (counter, value) in counters.iter().zip([next_x, next_y, next_z]) {
                builder
                    .build_store(*counter, value)
                    .map_err(builder_error)?;
            }
            for (slot, id) in [(6, x), (7, y), (8, z)] {
                let id = self
                    .builder
                    .build_int_truncate(id, i32_type, "block_id")
                    .map_err(builder_error)?;
                self.builder
                    .build_store(self.id_slot(slot, false)?, id)
                    .map_err(builder_error)?;
            }
            match &split {
                Some((regions, storage)) => {
                    self.regions(regions, storage, tid_read_elsewhere, &sizes, latch)
                }
                None => {
                    let innermost = Innermost {
                        function,
                        tid_read_elsewhere,
                        region: None,
                    };
                    self.nest(2, &sizes, &mut Vec::new(), &innermost, each, latch)
                }
            }
        })?;
        self.builder.position_at_end(exit);
        if let Some((_, storage)) = &split {
            self.release(storage)?;
        }
        let ok = i32_type.const_int(u64::from(host_abi::STATUS_OK), false);
        self.builder
            .build_return(Some(&ok))
            .map_err(builder_error)?;
        Ok(())
    }

    /// The storage of a split kernel, allocated once per call: the per-block slots (twice: read
    /// and written), the per-thread arrays (from the heap: up to 1024 threads times whatever
    /// the kernel keeps across barriers), the state. Returns `STATUS_OUT_OF_MEMORY` when the
    /// heap has no room.
    fn region_storage(
        &self,
        regions: &Regions<'ll>,
        sizes: &[IntValue<'ll>],
    ) -> Result<RegionStorage<'ll>> {
        let llvm = self.job.llvm;
        let (i8_type, i32_type, i64_type) = (llvm.i8_type(), llvm.i32_type(), llvm.i64_type());
        let ptr = llvm.ptr_type(AddressSpace::default());
        let mut threads_per_block = i64_type.const_int(1, false);
        for size in sizes {
            let wide = self
                .builder
                .build_int_z_extend(*size, i64_type, "size")
                .map_err(builder_error)?;
            threads_per_block = self
                .builder
                .build_int_mul(threads_per_block, wide, "threads_per_block")
                .map_err(builder_error)?;
        }
        let slots = i8_type.array_type(regions.uniform_bytes.max(1) as u32);
        let aligned = |pointer: PointerValue<'ll>| -> Result<PointerValue<'ll>> {
            pointer
                .as_instruction_value()
                .map(|i| i.set_alignment(16))
                .transpose()
                .map_err(|e| Error::new(ErrorKind::Codegen, format!("alignment: {e}")))?;
            Ok(pointer)
        };
        let uniform_in = aligned(
            self.builder
                .build_alloca(slots, "uniform_in")
                .map_err(builder_error)?,
        )?;
        let uniform_out = aligned(
            self.builder
                .build_alloca(slots, "uniform_out")
                .map_err(builder_error)?,
        )?;
        let state = self
            .builder
            .build_alloca(i32_type, "state")
            .map_err(builder_error)?;
        let reached = self.state_range("reached")?;
        let threads = if regions.thread_bytes == 0 {
            ptr.const_null()
        } else {
            let malloc = self.c_function("malloc", ptr.fn_type(&[i64_type.into()], false));
            let bytes = self
                .builder
                .build_int_mul(
                    threads_per_block,
                    i64_type.const_int(regions.thread_bytes, false),
                    "bytes",
                )
                .map_err(builder_error)?;
            let threads = self
                .builder
                .build_call(malloc, &[bytes.into()], "threads")
                .map_err(builder_error)?
                .try_as_basic_value()
                .basic()
                .map(|v| v.into_pointer_value())
                .ok_or_else(|| Error::new(ErrorKind::Codegen, "malloc returns nothing"))?;
            let failed = self
                .builder
                .build_is_null(threads, "no_memory")
                .map_err(builder_error)?;
            let no_memory = self.job.llvm.append_basic_block(self.function, "no_memory");
            let allocated = self.job.llvm.append_basic_block(self.function, "allocated");
            self.builder
                .build_conditional_branch(failed, no_memory, allocated)
                .map_err(builder_error)?;
            self.builder.position_at_end(no_memory);
            let status = i32_type.const_int(u64::from(host_abi::STATUS_OUT_OF_MEMORY), false);
            self.builder
                .build_return(Some(&status))
                .map_err(builder_error)?;
            self.builder.position_at_end(allocated);
            threads
        };
        let diverged = llvm.append_basic_block(self.function, "diverged");
        Ok(RegionStorage {
            call: RegionCall {
                state: 0,
                threads_per_block,
                uniform_in,
                uniform_out,
                threads,
                reached,
            },
            state,
            diverged,
        })
    }

    /// A C library function, declared once.
    fn c_function(&self, name: &str, ty: inkwell::types::FunctionType<'ll>) -> FunctionValue<'ll> {
        self.module
            .get_function(name)
            .unwrap_or_else(|| self.module.add_function(name, ty, None))
    }

    /// Frees the per-thread arrays (at the builder's position).
    fn release(&self, storage: &RegionStorage<'ll>) -> Result<()> {
        if storage.call.threads.is_null() {
            return Ok(());
        }
        let ptr = self.job.llvm.ptr_type(AddressSpace::default());
        let free = self.c_function(
            "free",
            self.job.llvm.void_type().fn_type(&[ptr.into()], false),
        );
        self.builder
            .build_call(free, &[storage.call.threads.into()], "")
            .map_err(builder_error)?;
        Ok(())
    }

    /// One block of a split kernel, from the builder's position: region 0 for all threads, then
    /// the region after the barrier they reached, until they are done (then `done`). Threads
    /// that reached different barriers end the call with `STATUS_DIVERGENT_BARRIER`, the
    /// block's ids in the context.
    fn regions(
        &self,
        regions: &Regions<'ll>,
        storage: &RegionStorage<'ll>,
        tid_read_elsewhere: bool,
        sizes: &[IntValue<'ll>],
        done: BasicBlock<'ll>,
    ) -> Result<()> {
        if let Some(table) = regions.subgroup_states {
            return self.regions_by_subgroup(
                regions,
                storage,
                table,
                tid_read_elsewhere,
                sizes,
                done,
            );
        }
        let llvm = self.job.llvm;
        let i32_type = llvm.i32_type();
        self.builder
            .build_store(storage.state, i32_type.const_zero())
            .map_err(builder_error)?;
        let dispatch = llvm.append_basic_block(self.function, "dispatch");
        self.builder
            .build_unconditional_branch(dispatch)
            .map_err(builder_error)?;
        self.builder.position_at_end(dispatch);
        let state = self
            .builder
            .build_load(i32_type, storage.state, "state")
            .map_err(builder_error)?
            .into_int_value();
        let cases: Vec<(IntValue, BasicBlock)> = (0..=regions.barriers)
            .map(|s| {
                (
                    i32_type.const_int(u64::from(s), false),
                    llvm.append_basic_block(self.function, &format!("region{s}")),
                )
            })
            .collect();
        self.builder
            .build_switch(state, done, &cases)
            .map_err(builder_error)?;
        for (s, (_, region)) in cases.iter().enumerate() {
            let call = RegionCall {
                state: s as u32,
                ..storage.call
            };
            self.builder.position_at_end(*region);
            self.clear_range(call.reached)?;
            let after = llvm.append_basic_block(self.function, "reached");
            let innermost = Innermost {
                function: regions.function,
                tid_read_elsewhere,
                region: Some(call),
            };
            self.nest(2, sizes, &mut Vec::new(), &innermost, *region, after)?;
            self.builder.position_at_end(after);
            let common = self.common_state(call.reached, storage.diverged, done)?;
            if regions.uniform_bytes > 0 {
                let bytes = llvm.i64_type().const_int(regions.uniform_bytes, false);
                self.builder
                    .build_memcpy(call.uniform_in, 16, call.uniform_out, 16, bytes)
                    .map_err(builder_error)?;
            }
            self.builder
                .build_store(storage.state, common)
                .map_err(builder_error)?;
            self.builder
                .build_unconditional_branch(dispatch)
                .map_err(builder_error)?;
        }
        self.report_divergence(storage)
    }

    /// The `diverged` block: the block's ids into the context for the error message, then the
    /// status.
    fn report_divergence(&self, storage: &RegionStorage<'ll>) -> Result<()> {
        let i32_type = self.job.llvm.i32_type();
        self.builder.position_at_end(storage.diverged);
        for slot in 6..9 {
            let id = self
                .builder
                .build_load(i32_type, self.id_slot(slot, false)?, "block_id")
                .map_err(builder_error)?;
            self.builder
                .build_store(self.id_slot(slot, true)?, id)
                .map_err(builder_error)?;
        }
        self.release(storage)?;
        let status = i32_type.const_int(u64::from(host_abi::STATUS_DIVERGENT_BARRIER), false);
        self.builder
            .build_return(Some(&status))
            .map_err(builder_error)?;
        Ok(())
    }

    /// One block of a kernel run by subgroup state (see `fission.rs`), from the builder's
    /// position: every subgroup starts at state 0; then, again and again, the lowest state after
    /// a subgroup barrier that some subgroup is at runs for the subgroups at it, or, when none
    /// is, the state every subgroup is at (after a block barrier) runs for all of them; when
    /// every subgroup is done, `done`. A state runs for a subgroup as a loop over its lanes
    /// (COX's hierarchical collapsing: a loop over the block's subgroups around a loop over
    /// lanes), and the lanes must reach one barrier together: lanes that reach different ones,
    /// or subgroups at different block barriers, end the call with `STATUS_DIVERGENT_BARRIER`.
    /// A subgroup's lanes always share their state (a lane at another barrier than its
    /// subgroup's fails the launch), so the state is kept per subgroup: each round is one pass
    /// over the subgroups, which runs those at the chosen state and, from every subgroup's state
    /// after that, finds the next one.
    fn regions_by_subgroup(
        &self,
        regions: &Regions<'ll>,
        storage: &RegionStorage<'ll>,
        table: GlobalValue<'ll>,
        tid_read_elsewhere: bool,
        sizes: &[IntValue<'ll>],
        done: BasicBlock<'ll>,
    ) -> Result<()> {
        use inkwell::IntPredicate::{EQ, NE, ULT};
        let llvm = self.job.llvm;
        let builder = &self.builder;
        let (i8_type, i32_type, i64_type) = (llvm.i8_type(), llvm.i32_type(), llvm.i64_type());
        let finished = i32_type.const_int(u64::from(DONE), false);
        let zero = i32_type.const_zero();
        let call = storage.call;
        // The states of all subgroups; the lowest state after a subgroup barrier any subgroup
        // is at (DONE for none); the state that runs.
        let (subgroups_at, subgroup_next) = (call.reached, storage.state);
        let chosen = self.entry_alloca(i32_type, "chosen")?;
        // The states the lanes of the running subgroup reached.
        let lanes_reached = self.state_range("lanes_reached")?;
        // Each subgroup's state.
        let most_subgroups = host_abi::MAX_THREADS.div_ceil(host_abi::SUBGROUP_SIZE);
        let states_type = i32_type.array_type(most_subgroups);
        let states = self.entry_alloca(states_type, "states")?;
        // The block's threads (at most MAX_THREADS), as the thread loops count them, and its
        // subgroups (the last one partial where the block is not a multiple of their size).
        let threads = builder
            .build_int_truncate(call.threads_per_block, i32_type, "threads")
            .map_err(builder_error)?;
        let lanes = i32_type.const_int(u64::from(host_abi::SUBGROUP_SIZE), false);
        let subgroups = builder
            .build_int_unsigned_div(
                builder
                    .build_int_add(threads, lanes.const_sub(i32_type.const_int(1, false)), "up")
                    .map_err(builder_error)?,
                lanes,
                "subgroups",
            )
            .map_err(builder_error)?;
        let state_of = |g: IntValue<'ll>| -> Result<PointerValue<'ll>> {
            // SAFETY: `g` is below the block's subgroup count, at most `most_subgroups`.
            unsafe {
                builder.build_in_bounds_gep(
                    states_type,
                    states,
                    &[i64_type.const_zero(), g],
                    "state_of",
                )
            }
            .map_err(builder_error)
        };
        let load = |pointer: PointerValue<'ll>, name: &str| -> Result<IntValue<'ll>> {
            builder
                .build_load(i32_type, pointer, name)
                .map(|v| v.into_int_value())
                .map_err(builder_error)
        };
        let store = |pointer: PointerValue<'ll>, value: IntValue<'ll>| -> Result<()> {
            builder
                .build_store(pointer, value)
                .map(|_| ())
                .map_err(builder_error)
        };
        let table_type = i8_type.array_type(regions.barriers + 1);
        // Whether `state` resumes after a subgroup barrier.
        let after_subgroup = |state: IntValue<'ll>| -> Result<IntValue<'ll>> {
            let running = builder
                .build_int_compare(NE, state, finished, "running")
                .map_err(builder_error)?;
            // A finished subgroup reads entry 0 (the start, after no subgroup barrier).
            let index = builder
                .build_select(running, state, zero, "index")
                .map_err(builder_error)?
                .into_int_value();
            let index = builder
                .build_int_z_extend(index, i64_type, "index")
                .map_err(builder_error)?;
            // SAFETY: `index` is a running subgroup's state (at most `regions.barriers`) or 0.
            let kind = unsafe {
                builder.build_in_bounds_gep(
                    table_type,
                    table.as_pointer_value(),
                    &[i64_type.const_zero(), index],
                    "kind",
                )
            }
            .map_err(builder_error)?;
            let kind = builder
                .build_load(i8_type, kind, "kind")
                .map_err(builder_error)?
                .into_int_value();
            builder
                .build_int_compare(NE, kind, i8_type.const_zero(), "after_subgroup")
                .map_err(builder_error)
        };
        // Keeps a subgroup's `state` in the round's bounds.
        let fold = |state: IntValue<'ll>| -> Result<()> {
            self.widen_range(subgroups_at, state)?;
            let current = load(subgroup_next, "subgroup_next")?;
            let lower = builder
                .build_int_compare(ULT, state, current, "lower")
                .map_err(builder_error)?;
            let take = builder
                .build_and(after_subgroup(state)?, lower, "take")
                .map_err(builder_error)?;
            let value = builder
                .build_select(take, state, current, "subgroup_next")
                .map_err(builder_error)?
                .into_int_value();
            store(subgroup_next, value)
        };

        let bytes = builder
            .build_int_mul(
                builder
                    .build_int_z_extend(subgroups, i64_type, "subgroups")
                    .map_err(builder_error)?,
                i64_type.const_int(4, false),
                "bytes",
            )
            .map_err(builder_error)?;
        builder
            .build_memset(states, 16, i8_type.const_zero(), bytes)
            .map_err(builder_error)?;
        store(chosen, zero)?;
        let round = llvm.append_basic_block(self.function, "round");
        builder
            .build_unconditional_branch(round)
            .map_err(builder_error)?;

        // The chosen state, for the subgroups at it: a loop per state, so that each calls the
        // region function with its state constant.
        builder.position_at_end(round);
        self.clear_range(subgroups_at)?;
        store(subgroup_next, finished)?;
        let state = load(chosen, "chosen")?;
        let ran = llvm.append_basic_block(self.function, "ran");
        let cases: Vec<(IntValue, BasicBlock)> = (0..=regions.barriers)
            .map(|s| {
                (
                    i32_type.const_int(u64::from(s), false),
                    llvm.append_basic_block(self.function, &format!("run{s}")),
                )
            })
            .collect();
        builder
            .build_switch(state, ran, &cases)
            .map_err(builder_error)?;
        for (state, case) in &cases {
            builder.position_at_end(*case);
            self.counted_loop(zero, subgroups, *case, ran, |g, _, latch| {
                let slot = state_of(g)?;
                let before = load(slot, "state")?;
                let here = builder
                    .build_int_compare(EQ, before, *state, "here")
                    .map_err(builder_error)?;
                let go = llvm.append_basic_block(self.function, "go");
                let next = llvm.append_basic_block(self.function, "next");
                builder
                    .build_conditional_branch(here, go, next)
                    .map_err(builder_error)?;
                builder.position_at_end(go);
                let first = builder
                    .build_int_nuw_mul(g, lanes, "first")
                    .map_err(builder_error)?;
                let past = builder
                    .build_int_nuw_add(first, lanes, "past")
                    .map_err(builder_error)?;
                let short = builder
                    .build_int_compare(ULT, threads, past, "short")
                    .map_err(builder_error)?;
                let end = builder
                    .build_select(short, threads, past, "end")
                    .map_err(builder_error)?
                    .into_int_value();
                self.clear_range(lanes_reached)?;
                let lanes_ran = llvm.append_basic_block(self.function, "lanes_ran");
                self.counted_loop(first, end, go, lanes_ran, |t, _, lane_latch| {
                    let ids = self.unravel(t, sizes[0], sizes[1])?;
                    if tid_read_elsewhere {
                        for (slot, id) in ids.iter().enumerate() {
                            builder
                                .build_store(self.id_slot(slot as u64, false)?, *id)
                                .map_err(builder_error)?;
                        }
                    }
                    let (_, reached) =
                        self.call_region(regions.function, *state, &ids, t, &call)?;
                    self.widen_range(lanes_reached, reached)?;
                    builder
                        .build_unconditional_branch(lane_latch)
                        .map_err(builder_error)?;
                    Ok(())
                })?;
                builder.position_at_end(lanes_ran);
                let reached = self.agreed_state(lanes_reached, storage.diverged)?;
                store(slot, reached)?;
                builder
                    .build_unconditional_branch(next)
                    .map_err(builder_error)?;
                builder.position_at_end(next);
                fold(load(slot, "now")?)?;
                builder
                    .build_unconditional_branch(latch)
                    .map_err(builder_error)?;
                Ok(())
            })?;
        }

        // The next round: a subgroup barrier's state if any subgroup is at one, else the block's
        // common state (all subgroups done: the block is).
        builder.position_at_end(ran);
        let next_subgroup = load(subgroup_next, "next_subgroup")?;
        let by_subgroup = builder
            .build_int_compare(NE, next_subgroup, finished, "by_subgroup")
            .map_err(builder_error)?;
        let subgroups_next = llvm.append_basic_block(self.function, "subgroups_next");
        let whole_block = llvm.append_basic_block(self.function, "whole_block");
        builder
            .build_conditional_branch(by_subgroup, subgroups_next, whole_block)
            .map_err(builder_error)?;
        builder.position_at_end(subgroups_next);
        store(chosen, next_subgroup)?;
        builder
            .build_unconditional_branch(round)
            .map_err(builder_error)?;
        builder.position_at_end(whole_block);
        let common = self.common_state(subgroups_at, storage.diverged, done)?;
        store(chosen, common)?;
        builder
            .build_unconditional_branch(round)
            .map_err(builder_error)?;
        self.report_divergence(storage)
    }

    /// The loop over dimension `dim` (2 = z, outermost), then the inner ones; continues at `after`.
    /// `before` is the block the builder is at, which enters the loop.
    fn nest(
        &self,
        dim: usize,
        sizes: &[IntValue<'ll>],
        outer: &mut Vec<IntValue<'ll>>,
        innermost: &Innermost<'ll>,
        before: BasicBlock<'ll>,
        after: BasicBlock<'ll>,
    ) -> Result<()> {
        let zero = self.job.llvm.i32_type().const_zero();
        let mut body_call = None;
        let back_edge =
            self.counted_loop(zero, sizes[dim], before, after, |value, body, latch| {
                if innermost.tid_read_elsewhere {
                    self.builder
                        .build_store(self.id_slot(dim as u64, false)?, value)
                        .map_err(builder_error)?;
                }
                outer.push(value);
                if dim == 0 {
                    // `outer` holds z, y, x; the body takes x, y, z.
                    let ids: Vec<IntValue> = outer.iter().rev().copied().collect();
                    body_call = Some(self.call_innermost(innermost, &ids, sizes)?);
                    self.builder
                        .build_unconditional_branch(latch)
                        .map_err(builder_error)?;
                } else {
                    self.nest(dim - 1, sizes, outer, innermost, body, latch)?;
                }
                outer.pop();
                Ok(())
            })?;
        // The threads of a block run concurrently between barriers, and a kernel whose result
        // depended on their order would race on a GPU: the x loop over a body that is the
        // kernel's own code (not a split kernel's bookkeeping, not thread ids kept in memory)
        // is a parallel loop, as PoCL marks its work-item loops. The vectorizer then needs no
        // run-time checks that the kernel's pointers do not overlap (each 16-thread row of a
        // stencil paid them). `optimize.cpp` turns these marks into LLVM's parallel-loop
        // metadata, which needs distinct nodes the C API cannot make.
        if let Some(call) =
            body_call.filter(|_| !innermost.tid_read_elsewhere && innermost.region.is_none())
        {
            let llvm = self.job.llvm;
            let mark = llvm.metadata_node(&[]);
            call.set_metadata(mark, llvm.get_kind_id(optimize::THREAD_BODY_MARK))
                .and_then(|_| {
                    back_edge.set_metadata(mark, llvm.get_kind_id(optimize::THREAD_LOOP_MARK))
                })
                .map_err(|e| Error::new(ErrorKind::Codegen, format!("thread loop mark: {e}")))?;
        }
        Ok(())
    }

    /// The call of the body (or region function) for thread `ids` (x, y, z).
    fn call_innermost(
        &self,
        innermost: &Innermost<'ll>,
        ids: &[IntValue<'ll>],
        sizes: &[IntValue<'ll>],
    ) -> Result<InstructionValue<'ll>> {
        let i32_type = self.job.llvm.i32_type();
        let mut arguments: Vec<BasicMetadataValueEnum> = Vec::new();
        let Some(region) = innermost.region else {
            arguments.extend(ids.iter().map(|v| BasicMetadataValueEnum::from(*v)));
            arguments.extend(self.arguments.iter().copied());
            let call = self
                .builder
                .build_call(innermost.function, &arguments, "")
                .map_err(builder_error)?;
            return call_instruction(call);
        };
        // The linear thread id: x + size_x * (y + size_y * z).
        let plane = self
            .builder
            .build_int_mul(ids[2], sizes[1], "plane")
            .map_err(builder_error)?;
        let row = self
            .builder
            .build_int_add(plane, ids[1], "row")
            .map_err(builder_error)?;
        let row = self
            .builder
            .build_int_mul(row, sizes[0], "row")
            .map_err(builder_error)?;
        let linear = self
            .builder
            .build_int_add(row, ids[0], "ltid")
            .map_err(builder_error)?;
        let state = i32_type.const_int(u64::from(region.state), false);
        let (call, reached) = self.call_region(innermost.function, state, ids, linear, &region)?;
        self.widen_range(region.reached, reached)?;
        Ok(call)
    }

    /// The call of a split kernel's region `function` from `state` for thread `ids` (x, y, z),
    /// linear id `linear`: the call, and the state the thread reached.
    fn call_region(
        &self,
        function: FunctionValue<'ll>,
        state: IntValue<'ll>,
        ids: &[IntValue<'ll>],
        linear: IntValue<'ll>,
        region: &RegionCall<'ll>,
    ) -> Result<(InstructionValue<'ll>, IntValue<'ll>)> {
        let mut arguments: Vec<BasicMetadataValueEnum> = vec![state.into()];
        arguments.extend(ids.iter().map(|v| BasicMetadataValueEnum::from(*v)));
        arguments.extend::<[BasicMetadataValueEnum; 5]>([
            linear.into(),
            region.threads_per_block.into(),
            region.uniform_in.into(),
            region.uniform_out.into(),
            region.threads.into(),
        ]);
        arguments.extend(self.arguments.iter().copied());
        let call = self
            .builder
            .build_call(function, &arguments, "reached")
            .map_err(builder_error)?;
        let reached = call
            .try_as_basic_value()
            .basic()
            .map(|v| v.into_int_value())
            .ok_or_else(|| Error::new(ErrorKind::Codegen, "a region function returns nothing"))?;
        Ok((call_instruction(call)?, reached))
    }

    /// Stores `value` in the i32 at `slot` when `value <predicate> slot` (a running minimum or
    /// maximum).
    fn keep_bound(
        &self,
        slot: PointerValue<'ll>,
        predicate: inkwell::IntPredicate,
        value: IntValue<'ll>,
    ) -> Result<()> {
        let current = self
            .builder
            .build_load(self.job.llvm.i32_type(), slot, "current")
            .map_err(builder_error)?
            .into_int_value();
        let replace = self
            .builder
            .build_int_compare(predicate, value, current, "replace")
            .map_err(builder_error)?;
        let bound = self
            .builder
            .build_select(replace, value, current, "bound")
            .map_err(builder_error)?;
        self.builder
            .build_store(slot, bound)
            .map_err(builder_error)?;
        Ok(())
    }

    /// A fresh [`StateRange`], its slots in the entry block.
    fn state_range(&self, name: &str) -> Result<StateRange<'ll>> {
        let i32_type = self.job.llvm.i32_type();
        Ok(StateRange {
            lowest: self.entry_alloca(i32_type, &format!("{name}_lowest"))?,
            highest: self.entry_alloca(i32_type, &format!("{name}_highest"))?,
        })
    }

    /// Empties `range` (lowest DONE, highest 0), before the states of a round come in.
    fn clear_range(&self, range: StateRange<'ll>) -> Result<()> {
        let i32_type = self.job.llvm.i32_type();
        for (slot, value) in [
            (range.lowest, i32_type.const_int(u64::from(DONE), false)),
            (range.highest, i32_type.const_zero()),
        ] {
            self.builder
                .build_store(slot, value)
                .map_err(builder_error)?;
        }
        Ok(())
    }

    /// Takes `state` into `range`.
    fn widen_range(&self, range: StateRange<'ll>, state: IntValue<'ll>) -> Result<()> {
        self.keep_bound(range.lowest, inkwell::IntPredicate::ULT, state)?;
        self.keep_bound(range.highest, inkwell::IntPredicate::UGT, state)
    }

    /// The one state of `range`, in a new block the builder is left in; to `diverged` when
    /// the states differ.
    fn agreed_state(
        &self,
        range: StateRange<'ll>,
        diverged: BasicBlock<'ll>,
    ) -> Result<IntValue<'ll>> {
        let i32_type = self.job.llvm.i32_type();
        let load = |slot, name| {
            self.builder
                .build_load(i32_type, slot, name)
                .map(|v| v.into_int_value())
                .map_err(builder_error)
        };
        let (lowest, highest) = (
            load(range.lowest, "lowest")?,
            load(range.highest, "highest")?,
        );
        let agree = self
            .builder
            .build_int_compare(inkwell::IntPredicate::EQ, lowest, highest, "agree")
            .map_err(builder_error)?;
        let agreed = self.job.llvm.append_basic_block(self.function, "agreed");
        self.builder
            .build_conditional_branch(agree, agreed, diverged)
            .map_err(builder_error)?;
        self.builder.position_at_end(agreed);
        Ok(lowest)
    }

    /// The state every thread of the block is at after a round, as [`agreed_state`]; to `done`
    /// when that is the end (the builder is left in a new block where it is not).
    ///
    /// [`agreed_state`]: Self::agreed_state
    fn common_state(
        &self,
        range: StateRange<'ll>,
        diverged: BasicBlock<'ll>,
        done: BasicBlock<'ll>,
    ) -> Result<IntValue<'ll>> {
        let common = self.agreed_state(range, diverged)?;
        let finished = self.job.llvm.i32_type().const_int(u64::from(DONE), false);
        let all_done = self
            .builder
            .build_int_compare(inkwell::IntPredicate::EQ, common, finished, "all_done")
            .map_err(builder_error)?;
        let resume = self.job.llvm.append_basic_block(self.function, "resume");
        self.builder
            .build_conditional_branch(all_done, done, resume)
            .map_err(builder_error)?;
        self.builder.position_at_end(resume);
        Ok(common)
    }

    /// x, y, z of `linear` in a box `size_x` by `size_y` wide (x fastest).
    fn unravel(
        &self,
        linear: IntValue<'ll>,
        size_x: IntValue<'ll>,
        size_y: IntValue<'ll>,
    ) -> Result<[IntValue<'ll>; 3]> {
        let builder = &self.builder;
        let x = builder
            .build_int_unsigned_rem(linear, size_x, "x")
            .map_err(builder_error)?;
        let rest = builder
            .build_int_unsigned_div(linear, size_x, "rest")
            .map_err(builder_error)?;
        let y = builder
            .build_int_unsigned_rem(rest, size_y, "y")
            .map_err(builder_error)?;
        let z = builder
            .build_int_unsigned_div(rest, size_y, "z")
            .map_err(builder_error)?;
        Ok([x, y, z])
    }

    /// An alloca in the entry block, whatever block the builder is in: LLVM makes those
    /// registers; one in a loop would take stack on every iteration.
    fn entry_alloca(&self, ty: impl BasicType<'ll>, name: &str) -> Result<PointerValue<'ll>> {
        let here = self.builder.get_insert_block();
        match self.entry.get_first_instruction() {
            Some(first) => self.builder.position_before(&first),
            None => self.builder.position_at_end(self.entry),
        }
        let alloca = self.builder.build_alloca(ty, name).map_err(builder_error);
        if let Some(here) = here {
            self.builder.position_at_end(here);
        }
        alloca
    }

    /// `for index in start..end` at the builder's position (in `before`), continuing at `after`:
    /// `emit` fills the body (the builder is in `body`) and ends it with a branch to `latch`.
    /// The increment never wraps unsigned (`index < end`); for thread loops (`i32`: a block has
    /// at most 1024 threads a side, which the launch checks) it does not wrap signed either, so
    /// LLVM may widen sign-extended thread ids into the loop's own induction.
    fn counted_loop(
        &self,
        start: IntValue<'ll>,
        end: IntValue<'ll>,
        before: BasicBlock<'ll>,
        after: BasicBlock<'ll>,
        emit: impl FnOnce(IntValue<'ll>, BasicBlock<'ll>, BasicBlock<'ll>) -> Result<()>,
    ) -> Result<InstructionValue<'ll>> {
        let llvm = self.job.llvm;
        let ty = start.get_type();
        let head = llvm.append_basic_block(self.function, "head");
        let body = llvm.append_basic_block(self.function, "body");
        let latch = llvm.append_basic_block(self.function, "latch");
        self.builder
            .build_unconditional_branch(head)
            .map_err(builder_error)?;
        self.builder.position_at_end(head);
        let phi = self.builder.build_phi(ty, "index").map_err(builder_error)?;
        let index = phi.as_basic_value().into_int_value();
        let more = self
            .builder
            .build_int_compare(inkwell::IntPredicate::ULT, index, end, "more")
            .map_err(builder_error)?;
        self.builder
            .build_conditional_branch(more, body, after)
            .map_err(builder_error)?;
        self.builder.position_at_end(body);
        emit(index, body, latch)?;
        self.builder.position_at_end(latch);
        let next = if ty.get_bit_width() == 32 {
            self.builder
                .build_int_nsw_add(index, ty.const_int(1, false), "next")
        } else {
            self.builder
                .build_int_add(index, ty.const_int(1, false), "next")
        }
        .map_err(builder_error)?;
        if let Some(increment) = next.as_instruction() {
            increment
                .set_no_unsigned_wrap_flag(true)
                .map_err(|e| Error::new(ErrorKind::Codegen, format!("loop increment: {e}")))?;
        }
        let back_edge = self
            .builder
            .build_unconditional_branch(head)
            .map_err(builder_error)?;
        phi.add_incoming(&[(&start, before), (&next, latch)]);
        Ok(back_edge)
    }
}
