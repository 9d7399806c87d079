//! The retargeting `Host::to_object` starts with: in checked objects first the access checks
//! (`check.rs`), then the NVVM-lowered module's GPU pieces turned into CPU code (thread-local
//! ids and context, thread-local workgroup memory, barriers that call the scheduler, the
//! subgroup, MMA, assert and printf emulation, libdevice as the C math library), then the entry
//! points the runtime calls (`entry/`). One pass over the module, in the order the pieces
//! depend on each other.

use super::entry::add_entry_points;
use super::ir::{barrier_function, id_reader};
use super::{assert, block_reduce, check, mma, printf, subgroup};
use crate::error::{Error, ErrorKind, Result};
use crate::targets::interface::Job;
use gpu_manifest::targets::host as host_abi;
use inkwell::module::{Linkage, Module};
use inkwell::types::{BasicType, BasicTypeEnum};
use inkwell::values::{BasicValue, FunctionValue, GlobalValue};
use inkwell::AddressSpace;

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

/// What the runtime needs to know about the retargeted module.
pub(super) struct Retargeted {
    /// Kernels whose threads run as coroutines (barriers that fission cannot handle).
    pub(super) coroutine_kernels: Vec<String>,
    /// Functions the module now calls that stay undefined here: the C library's (the final
    /// link resolves them) and the checks' markers (the optimization pipeline lowers them).
    pub(super) allowed_undefined: Vec<String>,
}

/// The block-reduction helpers `block_reduce.rs` adds to a gpu.module (and the C-interface
/// wrappers MLIR's lowering gives every function) are the same for every module that reduces
/// the same way: internal, so that two host objects linked into one program do not define them
/// twice.
fn make_reduction_helpers_internal(module: &Module<'_>) {
    let mut next = module.get_first_function();
    while let Some(function) = next {
        next = function.get_next_function();
        let name = function.get_name().to_string_lossy();
        if function.count_basic_blocks() > 0
            && (name.starts_with(block_reduce::HELPER_PREFIX)
                || name
                    .strip_prefix("_mlir_ciface_")
                    .is_some_and(|n| n.starts_with(block_reduce::HELPER_PREFIX)))
        {
            function.set_linkage(Linkage::Internal);
        }
    }
}

pub(super) fn retarget<'ll>(
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

    if job.spec.checked {
        // First: the checks read the NVVM ids and tell workgroup memory by its address space.
        check::check_accesses(job, module, context)?;
    }
    make_workgroup_memory_thread_local(job, module)?;
    make_reduction_helpers_internal(module);
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
    let mut allowed_undefined = use_c_math_library(module)?;
    assert::report_assertions(job, module, context, ids)?;
    if printf::use_c_printf(job, module)? {
        // LLVM's optimizer turns a printf of a constant line into puts or putchar.
        allowed_undefined.extend(["printf", "puts", "putchar"].map(String::from));
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
    if job.spec.checked {
        // Lowered by the optimization pipeline, not linked.
        allowed_undefined.extend(check::MARKERS.map(String::from));
    }
    if entries.allocates {
        allowed_undefined.extend(["malloc".to_string(), "free".to_string()]);
    }
    Ok(Retargeted {
        coroutine_kernels: entries.coroutine_kernels,
        allowed_undefined,
    })
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
