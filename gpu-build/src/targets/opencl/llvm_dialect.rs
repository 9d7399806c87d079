//! Kernels written in the LLVM dialect (`llvm.func` with `gpu.kernel`, taking `!llvm.ptr`
//! arguments), which MLIR 22's SPIR-V conversion cannot take, through LLVM's own SPIR-V back end
//! instead (the XeVM path's last step), in process:
//!
//! 1. a copy of the gpu.module in which every generic pointer (`!llvm.ptr`) is a global one
//!    (`!llvm.ptr<1>`, OpenCL's `CrossWorkgroup`: a kernel's pointer arguments must be, and what
//!    is derived from them stays so) and each kernel takes the `spir_kernel` convention;
//! 2. `convert-gpu-to-llvm-spv`: the gpu dialect's ids and barriers become OpenCL built-in calls;
//! 3. the module translated to LLVM IR and compiled by LLVM's SPIR-V back end for
//!    `spirv64v<version>` (the chip's SPIR-V version).
//!
//! Arguments are what the kernel declares: a pointer is passed as the address it holds, a
//! scalar by value. A kernel with private memory (`llvm.alloca`, whose pointers are not global)
//! is refused, as is a module mixing `gpu.func` and `llvm.func` kernels (one path per module).

use super::abi::argument_at;
use crate::error::{Error, ErrorKind, Result};
use crate::targets::interface::Compiled;
use crate::targets::support::spirv::{failed, ops_named, run, spirv_object};
use gpu_manifest::targets::opencl::{OpenClAbi, OpenClArgument, OpenClArgumentKind, OpenClKernel};
use gpu_manifest::{ArgumentKind, Kernel};
use inkwell::targets::{CodeModel, FileType, RelocMode, Target, TargetTriple};
use inkwell::OptimizationLevel;
use melior::ir::operation::{OperationLike, OperationPrintingFlags};
use melior::ir::{BlockLike, Module, OperationRef, RegionLike};
use melior::Context;
use std::sync::{Mutex, Once, PoisonError};

/// Whether `gpu_module`'s kernels are LLVM-dialect functions (this path), and an error when it
/// mixes them with `gpu.func` kernels.
pub(super) fn kernels_in_llvm_dialect(
    gpu_module: &OperationRef,
    kernels: &[Kernel],
    locations: &[String],
) -> Result<bool> {
    let kind_of = |name: &str| {
        ["llvm.func", "gpu.func"].into_iter().find(|op| {
            ops_named(gpu_module, op).into_iter().any(|raw| {
                // SAFETY: a live op of the gpu.module.
                let function = unsafe { OperationRef::from_raw(raw) };
                crate::targets::support::mlir::symbol_name(&function).as_deref() == Some(name)
            })
        })
    };
    let in_llvm: Vec<bool> = kernels
        .iter()
        .map(|kernel| kind_of(&kernel.name) == Some("llvm.func"))
        .collect();
    if in_llvm.iter().any(|&llvm| llvm) && !in_llvm.iter().all(|&llvm| llvm) {
        let location = locations.first().map_or("", String::as_str);
        return Err(Error::new(
            ErrorKind::Unsupported,
            format!(
                "{location}: error: this gpu.module mixes `gpu.func` and `llvm.func` kernels, \
                 which the opencl target builds in two different ways; put them in two \
                 gpu.modules"
            ),
        ));
    }
    Ok(in_llvm.first().copied().unwrap_or(false))
}

/// The gpu.module's SPIR-V object for SPIR-V `version` (`(1, 0)`), and its ABI.
pub(super) fn serialize(
    context: &Context,
    gpu_module: &OperationRef,
    kernels: &[Kernel],
    locations: &[String],
    version: (u32, u32),
) -> Result<Compiled> {
    let arguments = kernels
        .iter()
        .zip(locations)
        .map(|(kernel, location)| arguments(kernel, location))
        .collect::<Result<Vec<_>>>()?;
    let flags = OperationPrintingFlags::new().enable_debug_info(true, false);
    let text = gpu_module
        .to_string_with_flags(flags)
        .map_err(|e| Error::new(ErrorKind::Lowering, format!("printing the module: {e}")))?;
    if text.contains("llvm.alloca") {
        let location = locations.first().map_or("", String::as_str);
        return Err(Error::new(
            ErrorKind::Unsupported,
            format!(
                "{location}: error: an LLVM-dialect kernel built for opencl cannot use \
                 `llvm.alloca` (private memory, whose pointers are not global); use registers, \
                 or a gpu.func with a private memref"
            ),
        ));
    }
    let mut text = global_pointers(&text);
    for kernel in kernels {
        text = text.replace(
            &format!("llvm.func @{}(", kernel.name),
            &format!("llvm.func spir_kernelcc @{}(", kernel.name),
        );
    }
    let wrapped = format!("module attributes {{gpu.container_module}} {{\n{text}\n}}");
    let mut module =
        Module::parse(context, &wrapped).ok_or_else(|| failed("copying the module"))?;
    run(
        context,
        &mut module,
        "builtin.module(gpu.module(convert-gpu-to-llvm-spv{use-64bit-index=true},\
         convert-arith-to-llvm,reconcile-unrealized-casts))",
        "lowering the gpu dialect to OpenCL built-ins",
    )?;
    let bytes = integer_nulls_as_constants(&compile(context, &module, version)?);
    let abi = OpenClAbi {
        spirv_version: format!("{}.{}", version.0, version.1),
        capabilities: capabilities(&bytes),
        extensions: Vec::new(),
        kernels: kernels
            .iter()
            .zip(arguments)
            .map(|(kernel, arguments)| OpenClKernel {
                name: kernel.name.clone(),
                workgroup_memory: 0,
                max_block_threads: None,
                required_block: None,
                arguments,
            })
            .collect(),
    };
    spirv_object(bytes, &abi)
}

/// What each argument of an LLVM-dialect kernel is (a pointer or a scalar), and where a launch
/// finds it.
fn arguments(kernel: &Kernel, location: &str) -> Result<Vec<OpenClArgument>> {
    kernel
        .arguments
        .iter()
        .enumerate()
        .map(|(index, argument)| {
            let kind = match &argument.kind {
                ArgumentKind::Pointer => OpenClArgumentKind::Address,
                ArgumentKind::Scalar { element } if *element != gpu_manifest::Element::I1 => {
                    OpenClArgumentKind::Scalar {
                        bytes: element.bytes(),
                    }
                }
                _ => {
                    return Err(Error::new(
                        ErrorKind::Unsupported,
                        format!(
                            "{location}: error: kernel `{}` cannot be built for opencl: \
                             argument {index} ({}): an LLVM-dialect kernel takes pointers and \
                             scalars (not i1)",
                            kernel.name, argument.ty
                        ),
                    ))
                }
            };
            argument_at(kernel, index, kind).map_err(|why| {
                Error::new(
                    ErrorKind::Lowering,
                    format!("internal error: kernel `{}`: {why}", kernel.name),
                )
            })
        })
        .collect()
}

/// `text` with every generic pointer type (`!llvm.ptr` without an address space) made global
/// (`!llvm.ptr<1>`).
fn global_pointers(text: &str) -> String {
    const GENERIC: &str = "!llvm.ptr";
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(GENERIC) {
        let after = &rest[at + GENERIC.len()..];
        out.push_str(&rest[..at + GENERIC.len()]);
        if !after.starts_with('<') {
            out.push_str("<1>");
        }
        rest = after;
    }
    out.push_str(rest);
    out
}

/// LLVM's SPIR-V back end, registered once (inkwell has no initializer for it).
fn initialize_spirv() {
    extern "C" {
        fn LLVMInitializeSPIRVTargetInfo();
        fn LLVMInitializeSPIRVTarget();
        fn LLVMInitializeSPIRVTargetMC();
        fn LLVMInitializeSPIRVAsmPrinter();
    }
    static INIT: Once = Once::new();
    // SAFETY: LLVM's target registration functions, which take no arguments and are run once.
    INIT.call_once(|| unsafe {
        LLVMInitializeSPIRVTargetInfo();
        LLVMInitializeSPIRVTarget();
        LLVMInitializeSPIRVTargetMC();
        LLVMInitializeSPIRVAsmPrinter();
    });
}

/// The lowered module's gpu.module translated to LLVM IR and compiled to SPIR-V `version`.
fn compile(context: &Context, module: &Module, version: (u32, u32)) -> Result<Vec<u8>> {
    // The gpu.module's body as a builtin module, which is what translates to LLVM IR.
    let gpu_module = *ops_named(&module.as_operation(), "gpu.module")
        .first()
        .ok_or_else(|| failed("finding the lowered module"))?;
    // SAFETY: a live op of `module`.
    let gpu_module = unsafe { OperationRef::from_raw(gpu_module) };
    let body = gpu_module
        .region(0)
        .ok()
        .and_then(|region| region.first_block())
        .ok_or_else(|| failed("reading the lowered module"))?;
    let mut text = String::from("module {\n");
    let mut next = body.first_operation();
    while let Some(op) = next {
        next = op.next_in_block();
        text.push_str(&op.to_string());
        text.push('\n');
    }
    text.push('}');
    let module = Module::parse(context, &text).ok_or_else(|| failed("extracting the module"))?;
    let llvm = inkwell::context::Context::create();
    // SAFETY: the two crates wrap the same `llvm::LLVMContext*`; MLIR creates the module in it
    // and inkwell takes ownership of the returned module.
    let translated = unsafe {
        mlir_sys::mlirTranslateModuleToLLVMIR(
            module.as_operation().to_raw(),
            llvm.raw() as mlir_sys::LLVMContextRef,
        )
    };
    if translated.is_null() {
        return Err(failed("translating to LLVM IR"));
    }
    // SAFETY: a valid module of `llvm`, now owned by the value.
    let translated = unsafe {
        inkwell::module::Module::new(translated as inkwell::llvm_sys::prelude::LLVMModuleRef)
    };
    initialize_spirv();
    let triple = TargetTriple::create(&format!(
        "spirv64v{}.{}-unknown-unknown",
        version.0, version.1
    ));
    translated.set_triple(&triple);
    let target = Target::from_triple(&triple).map_err(|e| {
        Error::new(
            ErrorKind::Codegen,
            format!("LLVM has no SPIR-V back end: {e}"),
        )
    })?;
    let machine = target
        .create_target_machine(
            &triple,
            "",
            "",
            OptimizationLevel::Default,
            RelocMode::Default,
            CodeModel::Default,
        )
        .ok_or_else(|| failed("making LLVM's SPIR-V target machine"))?;
    translated.set_data_layout(&machine.get_target_data().get_data_layout());
    // LLVM's SPIR-V back end keeps its module analysis in a static (`SPIRVModuleAnalysis::MAI`),
    // so two modules compiled at once in one process corrupt each other ("All v-regs must have
    // been mapped to global id's", seen when a build compiled saxpy for three SPIR-V versions
    // in parallel): one SPIR-V compilation at a time.
    static SPIRV_CODEGEN: Mutex<()> = Mutex::new(());
    let _one_at_a_time = SPIRV_CODEGEN.lock().unwrap_or_else(PoisonError::into_inner);
    crate::targets::support::llvm::emit(&machine, &translated, FileType::Object)
}

/// `bytes` (a SPIR-V module) with every integer `OpConstantNull` an `OpConstant` 0. LLVM 22's
/// SPIR-V back end writes a GEP's field index 0 into a struct as `OpConstantNull`, which
/// `spirv-val` refuses ("The <id> passed to OpPtrAccessChain to index into a structure must be
/// an OpConstant"); the value is the same.
fn integer_nulls_as_constants(bytes: &[u8]) -> Vec<u8> {
    const TYPE_INT: u32 = 21;
    const CONSTANT: u32 = 43;
    const CONSTANT_NULL: u32 = 46;
    let words: Vec<u32> = bytes
        .chunks_exact(4)
        .map(|w| u32::from_le_bytes([w[0], w[1], w[2], w[3]]))
        .collect();
    // Integer type ids, with their widths in words.
    let mut integers: Vec<(u32, usize)> = Vec::new();
    let mut out: Vec<u32> = words.iter().take(5).copied().collect();
    let mut at = 5;
    while at < words.len() {
        let (count, opcode) = ((words[at] >> 16) as usize, words[at] & 0xffff);
        let Some(instruction) = words.get(at..at + count).filter(|_| count > 0) else {
            // A malformed tail is left as it is, for the validator to name.
            out.extend_from_slice(&words[at..]);
            break;
        };
        match (opcode, instruction) {
            (TYPE_INT, [_, id, width, _]) => {
                integers.push((*id, if *width > 32 { 2 } else { 1 }));
                out.extend_from_slice(instruction);
            }
            (CONSTANT_NULL, [_, ty, id]) => match integers.iter().find(|(t, _)| t == ty) {
                Some(&(_, value_words)) => {
                    out.push(((3 + value_words as u32) << 16) | CONSTANT);
                    out.extend_from_slice(&[*ty, *id]);
                    out.extend(std::iter::repeat_n(0, value_words));
                }
                None => out.extend_from_slice(instruction),
            },
            _ => out.extend_from_slice(instruction),
        }
        at += count;
    }
    out.iter().flat_map(|w| w.to_le_bytes()).collect()
}

/// The capabilities a SPIR-V binary declares (`OpCapability`), by name where this table knows
/// it: what a device is checked for before the module loads.
fn capabilities(bytes: &[u8]) -> Vec<String> {
    const NAMES: &[(u32, &str)] = &[
        (4, "Addresses"),
        (5, "Linkage"),
        (6, "Kernel"),
        (9, "Float16"),
        (10, "Float64"),
        (11, "Int64"),
        (22, "Int16"),
        (39, "Int8"),
        (8, "Float16Buffer"),
        (12, "Int64Atomics"),
        (61, "GroupNonUniform"),
    ];
    let words: Vec<u32> = bytes
        .chunks_exact(4)
        .map(|w| u32::from_le_bytes([w[0], w[1], w[2], w[3]]))
        .collect();
    let mut found = Vec::new();
    let mut at = 5;
    while at < words.len() {
        let (count, opcode) = ((words[at] >> 16) as usize, words[at] & 0xffff);
        if count == 0 {
            break;
        }
        // OpCapability is 17; capabilities come first in a module.
        if opcode == 17 {
            if let Some(&(_, name)) = words
                .get(at + 1)
                .and_then(|c| NAMES.iter().find(|(code, _)| code == c))
            {
                found.push(name.to_string());
            }
        }
        at += count;
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integer_nulls_become_zero_constants_of_their_width() {
        let header = [0x0723_0203u32, 0x0001_0000, 0, 100, 0];
        let module: [&[u32]; 6] = [
            &[(4 << 16) | 21, 1, 32, 0], // %1 = OpTypeInt 32 0
            &[(4 << 16) | 21, 2, 64, 0], // %2 = OpTypeInt 64 0
            &[(3 << 16) | 22, 3, 32],    // %3 = OpTypeFloat 32
            &[(3 << 16) | 46, 1, 10],    // %10 = OpConstantNull %1
            &[(3 << 16) | 46, 2, 11],    // %11 = OpConstantNull %2
            &[(3 << 16) | 46, 3, 12],    // %12 = OpConstantNull %3: not an integer, stays
        ];
        let bytes: Vec<u8> = header
            .iter()
            .chain(module.iter().copied().flatten())
            .flat_map(|w| w.to_le_bytes())
            .collect();
        let words: Vec<u32> = integer_nulls_as_constants(&bytes)
            .chunks_exact(4)
            .map(|w| u32::from_le_bytes([w[0], w[1], w[2], w[3]]))
            .collect();
        let expected: [&[u32]; 6] = [
            module[0],
            module[1],
            module[2],
            &[(4 << 16) | 43, 1, 10, 0],    // %10 = OpConstant %1 0
            &[(5 << 16) | 43, 2, 11, 0, 0], // %11 = OpConstant %2 0
            module[5],
        ];
        assert_eq!(words[5..], expected.concat());
    }

    #[test]
    fn generic_pointers_become_global_and_others_stay() {
        assert_eq!(
            global_pointers("(%x: !llvm.ptr, %y: !llvm.ptr<3>) -> !llvm.ptr"),
            "(%x: !llvm.ptr<1>, %y: !llvm.ptr<3>) -> !llvm.ptr<1>"
        );
    }
}
