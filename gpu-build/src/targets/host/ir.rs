//! The IR helpers every part of the host target uses (the retargeting in `retarget.rs`, the
//! entry points in `entry/`, and the assert, printf, subgroup and MMA emulation): reading
//! thread ids, calling back into the scheduler through the context, finding calls and the
//! instructions they are, builder errors. At the bottom of the host folder: it imports none of
//! its siblings.

use crate::error::{Error, ErrorKind, Result};
use crate::targets::interface::Job;
use gpu_manifest::targets::host as host_abi;
use inkwell::attributes::AttributeLoc;
use inkwell::module::{Linkage, Module};
use inkwell::values::{
    AsValueRef, BasicValue, FunctionValue, GlobalValue, InstructionValue, IntValue, PointerValue,
};
use inkwell::AddressSpace;

/// The ids' bytes in the context: `host_abi::ID_SLOTS` `u32`s.
pub(crate) const IDS_BYTES: u64 = (host_abi::ID_SLOTS * 4) as u64;

/// An IR builder failure, as a build error.
pub(crate) fn builder_error(e: inkwell::builder::BuilderError) -> Error {
    Error::new(ErrorKind::Codegen, format!("building host code: {e}"))
}

/// At the builder's position: the thread-local context pointer, and the function pointer at
/// `offset` in the context (`host_abi::*_OFFSET`).
pub(crate) fn context_callback<'ll>(
    job: &Job<'_, 'll>,
    builder: &inkwell::builder::Builder<'ll>,
    context: GlobalValue<'ll>,
    offset: usize,
) -> Result<(PointerValue<'ll>, PointerValue<'ll>)> {
    let ptr = job.llvm.ptr_type(AddressSpace::default());
    let context_pointer = builder
        .build_load(ptr, context.as_pointer_value(), "context")
        .map_err(builder_error)?
        .into_pointer_value();
    // SAFETY: the function pointers sit at the host_abi offsets in the context.
    let slot = unsafe {
        builder.build_in_bounds_gep(
            job.llvm.i8_type(),
            context_pointer,
            &[job.llvm.i64_type().const_int(offset as u64, false)],
            "slot",
        )
    }
    .map_err(builder_error)?;
    let callback = builder
        .build_load(ptr, slot, "callback")
        .map_err(builder_error)?
        .into_pointer_value();
    Ok((context_pointer, callback))
}

/// At the builder's position: id `slot` (`ID_INTRINSICS`) through its reader.
pub(crate) fn read_id<'ll>(
    job: &Job<'_, 'll>,
    module: &Module<'ll>,
    ids: GlobalValue<'ll>,
    builder: &inkwell::builder::Builder<'ll>,
    slot: u64,
) -> Result<IntValue<'ll>> {
    let reader = id_reader(job, module, ids, slot)?;
    builder
        .build_call(reader, &[], "id")
        .map_err(builder_error)?
        .try_as_basic_value()
        .basic()
        .map(|v| v.into_int_value())
        .ok_or_else(|| Error::new(ErrorKind::Codegen, "an id reader without a result"))
}

/// `__gpu_host_id_<slot>()`: id `slot` (`ID_INTRINSICS`) from the thread-local ids, created
/// once.
pub(crate) fn id_reader<'ll>(
    job: &Job<'_, 'll>,
    module: &Module<'ll>,
    ids: GlobalValue<'ll>,
    slot: u64,
) -> Result<FunctionValue<'ll>> {
    let name = format!("__gpu_host_id_{slot}");
    if let Some(existing) = module.get_function(&name) {
        return Ok(existing);
    }
    let i32_type = job.llvm.i32_type();
    let function =
        module.add_function(&name, i32_type.fn_type(&[], false), Some(Linkage::Internal));
    always_inline(job, function);
    let builder = job.llvm.create_builder();
    builder.position_at_end(job.llvm.append_basic_block(function, "entry"));
    // SAFETY: the array holds twelve u32 ids.
    let id_pointer = unsafe {
        builder.build_in_bounds_gep(
            i32_type,
            ids.as_pointer_value(),
            &[job.llvm.i64_type().const_int(slot, false)],
            "id",
        )
    }
    .map_err(builder_error)?;
    let id = builder
        .build_load(i32_type, id_pointer, "value")
        .map_err(builder_error)?;
    if let Some(load) = id.as_instruction_value() {
        mark_id_range(job, load, slot)?;
    }
    builder.build_return(Some(&id)).map_err(builder_error)?;
    Ok(function)
}

/// The block size `kernel` declares, x, y, z: MLIR lowers `known_block_size` to the function
/// attribute `nvvm.maxntid` ("16,16,1"); `nvvm.reqntid` says the same. A bound, as far as the IR
/// tells (`maxntid` may be written as one): the block entry uses it only for launches of exactly
/// this size.
pub(crate) fn declared_block_size(kernel: FunctionValue) -> Option<[u32; 3]> {
    let attribute = ["nvvm.reqntid", "nvvm.maxntid"]
        .iter()
        .find_map(|name| kernel.get_string_attribute(AttributeLoc::Function, name))?;
    let text = attribute.get_string_value().to_str().ok()?;
    let mut size = [1u32; 3];
    let parts: Vec<&str> = text.split(',').map(str::trim).collect();
    if parts.is_empty() || parts.len() > 3 {
        return None;
    }
    for (axis, part) in parts.iter().enumerate() {
        size[axis] = part
            .parse()
            .ok()
            .filter(|n| (1..=host_abi::MAX_THREADS).contains(n))?;
    }
    Some(size)
}

/// Marks `load`, a read of id `slot` of the context, with the range the runtime guarantees
/// (`host_abi`: its launches are checked against these limits), for LLVM: thread ids, block
/// sizes, block ids, grid sizes. A size known not to be zero lets LLVM compute with the
/// divisions that turn a linear block index into block ids outside the loops that need them.
pub(crate) fn mark_id_range<'ll>(
    job: &Job<'_, 'll>,
    load: InstructionValue<'ll>,
    slot: u64,
) -> Result<()> {
    let (low, high) = match slot {
        0..=2 => (0u32, host_abi::MAX_THREADS),
        3..=5 => (1, host_abi::MAX_THREADS + 1),
        6..=8 => (0, host_abi::MAX_GRID),
        _ => (1, host_abi::MAX_GRID + 1),
    };
    let i32_type = job.llvm.i32_type();
    let range = job.llvm.metadata_node(&[
        i32_type.const_int(u64::from(low), false).into(),
        i32_type.const_int(u64::from(high), false).into(),
    ]);
    load.set_metadata(range, job.llvm.get_kind_id("range"))
        .map_err(|e| Error::new(ErrorKind::Codegen, format!("marking an id's range: {e:?}")))
}

/// A barrier of type `ty` named `name`: a call back into the scheduler through the function
/// pointer at `offset` in the context (`host_abi::BARRIER_OFFSET` for the block's barrier,
/// `SUBGROUP_BARRIER_OFFSET` for a subgroup exchange; coroutine kernels), after which the
/// thread-local context and ids are restored, since other GPU threads of the block ran on this
/// OS thread meanwhile. Kernels split at their barriers (`fission.rs`) no longer call it.
pub(crate) fn barrier_function<'ll>(
    job: &Job<'_, 'll>,
    module: &Module<'ll>,
    context: GlobalValue<'ll>,
    ids: GlobalValue<'ll>,
    name: &str,
    ty: inkwell::types::FunctionType<'ll>,
    offset: usize,
) -> Result<FunctionValue<'ll>> {
    let ptr = job.llvm.ptr_type(AddressSpace::default());
    let function = module.add_function(name, ty, Some(Linkage::Internal));
    let builder = job.llvm.create_builder();
    builder.position_at_end(job.llvm.append_basic_block(function, "entry"));
    let (context_pointer, barrier) = context_callback(job, &builder, context, offset)?;
    let barrier_type = job.llvm.void_type().fn_type(&[ptr.into()], false);
    builder
        .build_indirect_call(barrier_type, barrier, &[context_pointer.into()], "")
        .map_err(builder_error)?;
    builder
        .build_store(context.as_pointer_value(), context_pointer)
        .map_err(builder_error)?;
    let bytes = job.llvm.i64_type().const_int(IDS_BYTES, false);
    builder
        .build_memcpy(ids.as_pointer_value(), 16, context_pointer, 4, bytes)
        .map_err(builder_error)?;
    builder.build_return(None).map_err(builder_error)?;
    Ok(function)
}

/// The calls of `function` in `module`.
pub(crate) fn calls_of<'ll>(
    module: &Module<'ll>,
    function: FunctionValue<'ll>,
) -> Vec<inkwell::values::InstructionValue<'ll>> {
    let mut calls = Vec::new();
    for caller in module.get_functions() {
        for block in caller.get_basic_blocks() {
            for instruction in block.get_instructions() {
                let calls_it = instruction.get_opcode() == inkwell::values::InstructionOpcode::Call
                    // SAFETY: a call instruction has a called value.
                    && unsafe { inkwell::llvm_sys::core::LLVMGetCalledValue(instruction.as_value_ref()) }
                        == function.as_value_ref();
                if calls_it {
                    calls.push(instruction);
                }
            }
        }
    }
    calls
}

/// Whether running `function` may call one of `callees`: directly, through functions it calls,
/// or through a call of a pointer (which could be anything).
pub(crate) fn may_call<'ll>(function: FunctionValue<'ll>, callees: &[FunctionValue<'ll>]) -> bool {
    let mut seen = vec![function];
    let mut stack = vec![function];
    while let Some(caller) = stack.pop() {
        for block in caller.get_basic_blocks() {
            for instruction in block.get_instructions() {
                if instruction.get_opcode() != inkwell::values::InstructionOpcode::Call {
                    continue;
                }
                use inkwell::llvm_sys::core::{
                    LLVMGetCalledValue, LLVMIsAFunction, LLVMIsAInlineAsm,
                };
                // SAFETY: a call instruction has a called value.
                let called = unsafe { LLVMGetCalledValue(instruction.as_value_ref()) };
                // SAFETY: `called` is a live value; each returns it when it is of that kind,
                // null otherwise.
                let (as_function, as_assembly) =
                    unsafe { (LLVMIsAFunction(called), LLVMIsAInlineAsm(called)) };
                if !as_assembly.is_null() {
                    continue;
                }
                // SAFETY: null, or a function of the module.
                let Some(callee) = (unsafe { FunctionValue::new(as_function) }) else {
                    // A pointer: any function.
                    if callees.is_empty() {
                        continue;
                    }
                    return true;
                };
                if callees.contains(&callee) {
                    return true;
                }
                if !seen.contains(&callee) {
                    seen.push(callee);
                    stack.push(callee);
                }
            }
        }
    }
    false
}

/// The functions whose code refers to one of `globals`, directly or through constant
/// expressions (a workgroup variable's address-space cast).
pub(crate) fn functions_using<'ll>(globals: &[GlobalValue<'ll>]) -> Vec<FunctionValue<'ll>> {
    use inkwell::llvm_sys::core::{
        LLVMGetBasicBlockParent, LLVMGetFirstUse, LLVMGetInstructionParent, LLVMGetNextUse,
        LLVMGetUser, LLVMIsAConstantExpr, LLVMIsAInstruction,
    };
    let mut functions = Vec::new();
    let mut values: Vec<_> = globals.iter().map(|g| g.as_value_ref()).collect();
    while let Some(value) = values.pop() {
        // SAFETY: `value` is a live value of the module (a global or a constant expression using
        // one); its use list is walked without changing the module.
        let mut next = unsafe { LLVMGetFirstUse(value) };
        while !next.is_null() {
            // SAFETY: `next` is a live use of `value`; its user is a live value, and each `IsA`
            // returns it when it is of that kind, null otherwise.
            unsafe {
                let user = LLVMGetUser(next);
                if !LLVMIsAInstruction(user).is_null() {
                    let block = LLVMGetInstructionParent(user);
                    let function = (!block.is_null())
                        .then(|| FunctionValue::new(LLVMGetBasicBlockParent(block)))
                        .flatten();
                    if let Some(function) = function.filter(|f| !functions.contains(f)) {
                        functions.push(function);
                    }
                } else if !LLVMIsAConstantExpr(user).is_null() {
                    values.push(user);
                }
                next = LLVMGetNextUse(next);
            }
        }
    }
    functions
}

pub(crate) fn always_inline(job: &Job, function: FunctionValue) {
    let kind = inkwell::attributes::Attribute::get_named_enum_kind_id("alwaysinline");
    function.add_attribute(
        AttributeLoc::Function,
        job.llvm.create_enum_attribute(kind, 0),
    );
}

/// A call as the instruction it is (to put metadata on it).
pub(crate) fn call_instruction(call: inkwell::values::CallSiteValue) -> Result<InstructionValue> {
    match call.try_as_basic_value() {
        inkwell::values::ValueKind::Basic(value) => value.as_instruction_value(),
        inkwell::values::ValueKind::Instruction(instruction) => Some(instruction),
    }
    .ok_or_else(|| Error::new(ErrorKind::Codegen, "a call that is no instruction"))
}
