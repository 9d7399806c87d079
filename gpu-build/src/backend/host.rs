//! Host hooks: the NVVM-lowered module turned into CPU code the runtime's block scheduler calls.
//!
//! - Thread, block, block-size and grid-size ids (`llvm.nvvm.read.ptx.sreg.*`) read a
//!   thread-local copy of the ids the scheduler passes in a context; `gpu.barrier` calls back
//!   into the scheduler through that context. Entry points fill the thread-local copy (and a
//!   thread-local pointer to the context); a barrier restores both when the thread resumes,
//!   since other GPU threads of the block ran on the same OS thread meanwhile. A thread-local
//!   array whose address never escapes lets LLVM keep ids in registers across the kernel's
//!   memory accesses.
//! - Workgroup memory (address space 3) becomes thread-local: a scheduler thread runs one block
//!   at a time, with all of that block's GPU threads on it, so each block sees its own copy and
//!   its threads share it. Dynamic shared memory is a thread-local array of
//!   `host_abi::DYNAMIC_SHARED_BYTES`.
//! - libdevice math (`__nv_expf`) becomes the C math library (`expf`).
//! - Each kernel gets two entry points, so the runtime calls every kernel the same way:
//!   `<prefix><kernel>(void **params, void *context)` runs one GPU thread (the scheduler runs
//!   one per coroutine when the kernel has barriers), `<prefix><kernel>.blocks(params, context,
//!   first, count)` runs every thread of a range of blocks in loops (kernels without barriers).
//!   There the kernel's body takes the thread ids as parameters (`<kernel>.ids`), so once inlined
//!   they are the loops' induction variables, not thread-local loads: LLVM optimizes and
//!   vectorizes the nest like a plain loop nest (PoCL's work-item loops), and one call amortizes
//!   its set-up over a whole chunk of blocks.
//!
//! The context's layout and the entry points' names are shared with `gpu-embed`'s host scheduler
//! through `gpu_manifest::host_abi`: twelve `u32` ids at byte 0, then the barrier function
//! pointer.

use super::{emit_object, Backend, PreLinked};
use crate::error::{Error, ErrorKind, Result};
use crate::module_to_object::{Artifact, Dumps, Job};
use crate::target_spec::host_triple;
use crate::toolkit::Toolkits;
use gpu_manifest::host_abi;
use gpu_manifest::Format;
use inkwell::attributes::AttributeLoc;
use inkwell::basic_block::BasicBlock;
use inkwell::module::{Linkage, Module};
use inkwell::targets::{RelocMode, TargetMachine};
use inkwell::types::{BasicType, BasicTypeEnum};
use inkwell::values::{
    AsValueRef, BasicMetadataValueEnum, BasicValue, FunctionValue, GlobalValue, IntValue,
    PointerValue,
};
use inkwell::AddressSpace;

/// NVPTX's shared address space.
const WORKGROUP_ADDRESS_SPACE: u16 = 3;
const BARRIER_OFFSET: u64 = host_abi::BARRIER_OFFSET as u64;
const IDS_BYTES: u64 = (host_abi::ID_SLOTS * 4) as u64;
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

impl Backend for Host {
    /// The host's chip is its target triple.
    fn triple(&self, chip: &str) -> String {
        chip.to_string()
    }

    fn default_chip(&self) -> String {
        host_triple()
    }

    /// The host starts from the NVVM lowering; `retarget` then turns its GPU intrinsics into CPU
    /// code.
    fn lowering_pass(&self, _processor: &str) -> String {
        "convert-gpu-to-nvvm".to_string()
    }

    fn kernel_attribute(&self) -> &'static str {
        "nvvm.kernel"
    }

    /// Host objects end up in the crate's program, possibly a shared library.
    fn reloc_mode(&self) -> RelocMode {
        RelocMode::PIC
    }

    fn pre_link<'ll>(&self, job: &Job<'_, 'll>, module: &Module<'ll>) -> Result<PreLinked> {
        let retargeted = retarget(job, module, job.host_symbol_prefix)?;
        Ok(PreLinked {
            allowed_undefined: retargeted.libm_calls,
            host: Some(gpu_manifest::HostEntries {
                symbol_prefix: job.host_symbol_prefix.to_string(),
                uses_barrier: retargeted.uses_barrier,
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

    fn toolkit_identity(&self, _toolkits: &Toolkits) -> String {
        "none (LLVM only)".to_string()
    }

    fn names_symbols_after_the_crate(&self) -> bool {
        true
    }
}

/// What the runtime needs to know about the retargeted module.
struct Retargeted {
    pub uses_barrier: bool,
    /// C library functions the module now calls (allowed to stay undefined: the final link
    /// resolves them).
    pub libm_calls: Vec<String>,
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
    let builder = job.llvm.create_builder();
    for (name, slot) in ID_INTRINSICS {
        if let Some(intrinsic) = module.get_function(name) {
            let function = module.add_function(
                &format!("__gpu_host_id_{slot}"),
                intrinsic.get_type(),
                Some(Linkage::Internal),
            );
            always_inline(job, function);
            builder.position_at_end(job.llvm.append_basic_block(function, "entry"));
            let i32_type = job.llvm.i32_type();
            // SAFETY: the array holds twelve u32 ids.
            let id_pointer = unsafe {
                builder.build_in_bounds_gep(
                    i32_type,
                    ids.as_pointer_value(),
                    &[job.llvm.i64_type().const_int(slot, false)],
                    "id",
                )
            }
            .map_err(codegen)?;
            let id = builder
                .build_load(i32_type, id_pointer, "value")
                .map_err(codegen)?;
            builder.build_return(Some(&id)).map_err(codegen)?;
            replace_function(intrinsic, function);
        }
    }
    let mut uses_barrier = false;
    for name in BARRIER_INTRINSICS {
        if let Some(intrinsic) = module.get_function(name) {
            uses_barrier = true;
            let function = module.add_function(
                &format!("__gpu_host_{}", name.replace('.', "_")),
                intrinsic.get_type(),
                Some(Linkage::Internal),
            );
            builder.position_at_end(job.llvm.append_basic_block(function, "entry"));
            let context_pointer = builder
                .build_load(ptr, context.as_pointer_value(), "context")
                .map_err(codegen)?
                .into_pointer_value();
            // SAFETY: the barrier pointer sits at BARRIER_OFFSET in the context.
            let slot = unsafe {
                builder.build_in_bounds_gep(
                    job.llvm.i8_type(),
                    context_pointer,
                    &[job.llvm.i64_type().const_int(BARRIER_OFFSET, false)],
                    "slot",
                )
            }
            .map_err(codegen)?;
            let barrier = builder
                .build_load(ptr, slot, "barrier")
                .map_err(codegen)?
                .into_pointer_value();
            let barrier_type = job.llvm.void_type().fn_type(&[ptr.into()], false);
            builder
                .build_indirect_call(barrier_type, barrier, &[context_pointer.into()], "")
                .map_err(codegen)?;
            // Other GPU threads of the block ran on this OS thread while this one waited.
            builder
                .build_store(context.as_pointer_value(), context_pointer)
                .map_err(codegen)?;
            let bytes = job.llvm.i64_type().const_int(IDS_BYTES, false);
            builder
                .build_memcpy(ids.as_pointer_value(), 16, context_pointer, 4, bytes)
                .map_err(codegen)?;
            builder.build_return(None).map_err(codegen)?;
            replace_function(intrinsic, function);
        }
    }
    let libm_calls = use_c_math_library(module)?;
    reject_other_intrinsics(module)?;
    add_entry_points(job, module, symbol_prefix, context, ids)?;
    Ok(Retargeted {
        uses_barrier,
        libm_calls,
    })
}

fn codegen(e: inkwell::builder::BuilderError) -> Error {
    Error::new(ErrorKind::Codegen, format!("building host entry code: {e}"))
}

fn always_inline(job: &Job, function: FunctionValue) {
    let kind = inkwell::attributes::Attribute::get_named_enum_kind_id("alwaysinline");
    function.add_attribute(
        AttributeLoc::Function,
        job.llvm.create_enum_attribute(kind, 0),
    );
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
        let dynamic = old.is_declaration() || name == "__dynamic_shmem__";
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

/// Kernels become internal functions, called by the two entry points of each.
fn add_entry_points<'ll>(
    job: &Job<'_, 'll>,
    module: &Module<'ll>,
    prefix: &str,
    context: GlobalValue<'ll>,
    ids: GlobalValue<'ll>,
) -> Result<()> {
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
        EntryBuilder::new(
            job,
            module,
            context,
            ids,
            kernel,
            &host_abi::blocks_entry(prefix, &name),
            true,
        )?
        .blocks(body, tid_read_elsewhere)?;
    }
    Ok(())
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
        let mut calls = Vec::new();
        for block in body.get_basic_blocks() {
            for instruction in block.get_instructions() {
                let calls_reader = instruction.get_opcode() == inkwell::values::InstructionOpcode::Call
                    // SAFETY: a call instruction has a called value.
                    && unsafe { inkwell::llvm_sys::core::LLVMGetCalledValue(instruction.as_value_ref()) }
                        == reader.as_value_ref();
                if calls_reader {
                    calls.push(instruction);
                }
            }
        }
        for call in calls {
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
        .map_err(codegen)?;
        arguments.push(
            builder
                .build_load(i32_type, pointer, "tid")
                .map_err(codegen)?
                .into(),
        );
    }
    arguments.extend(kernel.get_param_iter().map(BasicMetadataValueEnum::from));
    builder.build_call(body, &arguments, "").map_err(codegen)?;
    builder.build_return(None).map_err(codegen)?;
    Ok(body)
}

/// What the block entry's innermost loop calls.
struct Looping<'ll> {
    /// The kernel with the thread ids as parameters.
    body: FunctionValue<'ll>,
    /// Whether the thread-local ids must follow the loops too.
    tid_read_elsewhere: bool,
}

/// One entry point: sets the context and the ids, loads the kernel's parameters, calls it.
struct EntryBuilder<'a, 'll> {
    job: &'a Job<'a, 'll>,
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
        module: &Module<'ll>,
        context: GlobalValue<'ll>,
        ids: GlobalValue<'ll>,
        kernel: FunctionValue<'ll>,
        symbol: &str,
        block_range: bool,
    ) -> Result<Self> {
        let ptr = job.llvm.ptr_type(AddressSpace::default());
        let i64_type = job.llvm.i64_type();
        let entry_type = if block_range {
            job.llvm.void_type().fn_type(
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
            .map_err(codegen)?;
        let bytes = job.llvm.i64_type().const_int(IDS_BYTES, false);
        builder
            .build_memcpy(ids.as_pointer_value(), 16, context_argument, 4, bytes)
            .map_err(codegen)?;
        let mut arguments = Vec::new();
        for (index, ty) in kernel.get_type().get_param_types().into_iter().enumerate() {
            let index = job.llvm.i64_type().const_int(index as u64, false);
            // SAFETY: `params` holds one pointer per kernel parameter.
            let slot = unsafe { builder.build_in_bounds_gep(ptr, params, &[index], "slot") }
                .map_err(codegen)?;
            let pointer = builder
                .build_load(ptr, slot, "param")
                .map_err(codegen)?
                .into_pointer_value();
            let ty: BasicTypeEnum = ty.try_into().map_err(|_| {
                Error::new(ErrorKind::Codegen, "a kernel parameter without storage")
            })?;
            arguments.push(
                builder
                    .build_load(ty, pointer, "value")
                    .map_err(codegen)?
                    .into(),
            );
        }
        Ok(EntryBuilder {
            job,
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
            .map_err(codegen)?;
        self.builder.build_return(None).map_err(codegen)?;
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
        .map_err(codegen)
    }

    /// Every thread of blocks `first..first + count`: a loop over the blocks (their ids into the
    /// thread-local ids), and in it z, y, x loops over the block's threads calling the body.
    fn blocks(self, body: FunctionValue<'ll>, tid_read_elsewhere: bool) -> Result<()> {
        let llvm = self.job.llvm;
        let (i32_type, i64_type) = (llvm.i32_type(), llvm.i64_type());
        let load = |slot: u64, name: &str| -> Result<IntValue<'ll>> {
            Ok(self
                .builder
                .build_load(i32_type, self.id_slot(slot, true)?, name)
                .map_err(codegen)?
                .into_int_value())
        };
        let mut sizes = Vec::new();
        for slot in 3..6 {
            sizes.push(load(slot, "size")?);
        }
        let widen = |value| {
            self.builder
                .build_int_z_extend(value, i64_type, "wide")
                .map_err(codegen)
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
            .map_err(codegen)?;

        let exit = llvm.append_basic_block(self.function, "exit");
        let looping = Looping {
            body,
            tid_read_elsewhere,
        };
        self.counted_loop(first, end, self.entry, exit, |block, each, latch| {
            let x = self
                .builder
                .build_int_unsigned_rem(block, grid_x, "x")
                .map_err(codegen)?;
            let rest = self
                .builder
                .build_int_unsigned_div(block, grid_x, "rest")
                .map_err(codegen)?;
            let y = self
                .builder
                .build_int_unsigned_rem(rest, grid_y, "y")
                .map_err(codegen)?;
            let z = self
                .builder
                .build_int_unsigned_div(rest, grid_y, "z")
                .map_err(codegen)?;
            for (slot, id) in [(6, x), (7, y), (8, z)] {
                let id = self
                    .builder
                    .build_int_truncate(id, i32_type, "block_id")
                    .map_err(codegen)?;
                self.builder
                    .build_store(self.id_slot(slot, false)?, id)
                    .map_err(codegen)?;
            }
            self.nest(2, &sizes, &mut Vec::new(), &looping, each, latch)
        })?;
        self.builder.position_at_end(exit);
        self.builder.build_return(None).map_err(codegen)?;
        Ok(())
    }

    /// The loop over dimension `dim` (2 = z, outermost), then the inner ones; continues at `after`.
    /// `before` is the block the builder is at, which enters the loop.
    fn nest(
        &self,
        dim: usize,
        sizes: &[IntValue<'ll>],
        outer: &mut Vec<IntValue<'ll>>,
        looping: &Looping<'ll>,
        before: BasicBlock<'ll>,
        after: BasicBlock<'ll>,
    ) -> Result<()> {
        let zero = self.job.llvm.i32_type().const_zero();
        self.counted_loop(zero, sizes[dim], before, after, |value, body, latch| {
            if looping.tid_read_elsewhere {
                self.builder
                    .build_store(self.id_slot(dim as u64, false)?, value)
                    .map_err(codegen)?;
            }
            outer.push(value);
            if dim == 0 {
                // `outer` holds z, y, x; the body takes x, y, z.
                let mut arguments: Vec<BasicMetadataValueEnum> =
                    outer.iter().rev().map(|v| (*v).into()).collect();
                arguments.extend(self.arguments.iter().copied());
                self.builder
                    .build_call(looping.body, &arguments, "")
                    .map_err(codegen)?;
                self.builder
                    .build_unconditional_branch(latch)
                    .map_err(codegen)?;
            } else {
                self.nest(dim - 1, sizes, outer, looping, body, latch)?;
            }
            outer.pop();
            Ok(())
        })
    }

    /// `for index in start..end` at the builder's position (in `before`), continuing at `after`:
    /// `emit` fills the body (the builder is in `body`) and ends it with a branch to `latch`.
    fn counted_loop(
        &self,
        start: IntValue<'ll>,
        end: IntValue<'ll>,
        before: BasicBlock<'ll>,
        after: BasicBlock<'ll>,
        emit: impl FnOnce(IntValue<'ll>, BasicBlock<'ll>, BasicBlock<'ll>) -> Result<()>,
    ) -> Result<()> {
        let llvm = self.job.llvm;
        let ty = start.get_type();
        let head = llvm.append_basic_block(self.function, "head");
        let body = llvm.append_basic_block(self.function, "body");
        let latch = llvm.append_basic_block(self.function, "latch");
        self.builder
            .build_unconditional_branch(head)
            .map_err(codegen)?;
        self.builder.position_at_end(head);
        let phi = self.builder.build_phi(ty, "index").map_err(codegen)?;
        let index = phi.as_basic_value().into_int_value();
        let more = self
            .builder
            .build_int_compare(inkwell::IntPredicate::ULT, index, end, "more")
            .map_err(codegen)?;
        self.builder
            .build_conditional_branch(more, body, after)
            .map_err(codegen)?;
        self.builder.position_at_end(body);
        emit(index, body, latch)?;
        self.builder.position_at_end(latch);
        let next = self
            .builder
            .build_int_add(index, ty.const_int(1, false), "next")
            .map_err(codegen)?;
        self.builder
            .build_unconditional_branch(head)
            .map_err(codegen)?;
        phi.add_incoming(&[(&start, before), (&next, latch)]);
        Ok(())
    }
}
