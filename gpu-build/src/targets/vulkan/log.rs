//! `gpu.printf` and `cf.assert` on Vulkan (issue 39), which a compute shader has no instruction
//! for: a kernel that has them gets a hidden log buffer (`memref<?xi32>`, bound last), and
//! each becomes a record written to it (`gpu_manifest::targets::vulkan::VulkanLogEntry` has the layout), which
//! the runtime reads once the launch has run: it prints the `printf`s as C would and reports a
//! failed assertion as a kernel fault, with CUDA's words on stderr.
//!
//! A failing thread stops at its assertion as on a GPU (`support/assert.rs`).

use crate::error::Result;
use crate::targets::support::assert::{failure, stop_failing_threads, Failure};
use crate::targets::support::memref_sizes::set_inputs;
use crate::targets::support::mlir::splice_text;
use crate::targets::support::spirv::{failed, ops_named, signature};
use gpu_manifest::targets::vulkan::{VulkanLogEntry, VulkanLogValue};
use melior::ir::attribute::StringAttribute;
use melior::ir::operation::{OperationLike, OperationRef, OperationRefMut};
use melior::ir::{BlockLike, RegionLike, Type, Value, ValueLike};
use melior::Context;

/// Gives `function` (a `gpu.func` of the Vulkan copy, hidden sizes already added) a log buffer
/// when it prints or asserts, and rewrites those ops into records; returns the records' kinds.
pub(super) fn write_log<'c>(
    context: &'c Context,
    function: &mut OperationRefMut<'c, '_>,
    kernel: &str,
) -> Result<Vec<VulkanLogEntry>> {
    let mut ops = ops_named(function, "gpu.printf");
    ops.extend(ops_named(function, "cf.assert"));
    if ops.is_empty() {
        return Ok(Vec::new());
    }
    let (mut inputs, results) = signature(function)?;
    let body = function
        .region(0)
        .ok()
        .and_then(|region| region.first_block())
        .ok_or_else(|| failed("finding the kernel's body"))?;
    let log_type = Type::parse(context, "memref<?xi32>").ok_or_else(|| failed("a log type"))?;
    let log = body.add_argument(log_type, function.location());
    inputs.push(log_type);
    set_inputs(context, function, &inputs, &results, 1)?;

    let mut entries = Vec::new();
    for raw in ops {
        // SAFETY: a live op of the function; each is rewritten once, and rewriting one moves
        // or removes no other printf or assert.
        let op = unsafe { OperationRef::from_raw(raw) };
        let number = entries.len();
        if op.name().as_string_ref().as_str() == Ok("gpu.printf") {
            let format = op
                .attribute("format")
                .ok()
                .and_then(|a| StringAttribute::try_from(a).ok())
                .map(|a| a.value().to_string())
                .ok_or_else(|| failed("reading a printf's format"))?;
            let arguments: Vec<Value> = (0..op.operand_count())
                .filter_map(|i| op.operand(i).ok())
                .collect();
            let kinds = arguments
                .iter()
                .map(|a| value_kind(&a.r#type().to_string()))
                .collect::<Option<Vec<_>>>()
                .ok_or_else(|| failed("reading a printf argument's type"))?;
            let text = printf_record(number, &arguments, &kinds);
            let mut spliced = vec![log];
            spliced.extend(arguments);
            splice_text(context, &text, &op, &spliced)
                .ok_or_else(|| failed("splicing a log record"))?;
            entries.push(VulkanLogEntry::Printf {
                format,
                arguments: kinds,
            });
            // SAFETY: the printf has no results; nothing refers to it afterwards.
            unsafe { mlir_sys::mlirOperationDestroy(raw) };
        } else {
            let Failure {
                message,
                file,
                line,
                function,
            } = failure(&op, kernel);
            let condition = op.operand(0).map_err(|_| failed("reading an assertion"))?;
            splice_text(context, &assert_record(number), &op, &[condition, log])
                .ok_or_else(|| failed("splicing a log record"))?;
            stop_failing_threads(&op)?;
            entries.push(VulkanLogEntry::Assertion {
                message,
                file,
                line,
                function,
            });
            // SAFETY: the assertion has no results; nothing refers to it afterwards.
            unsafe { mlir_sys::mlirOperationDestroy(raw) };
        }
    }
    Ok(entries)
}

/// The kind a printf argument of type `ty` is logged as.
fn value_kind(ty: &str) -> Option<VulkanLogValue> {
    match ty {
        "f16" | "bf16" | "f32" | "f64" => Some(VulkanLogValue::Float),
        "index" => Some(VulkanLogValue::Integer),
        ty if ty.starts_with('i') && ty[1..].parse::<u32>().is_ok_and(|b| b <= 64) => {
            Some(VulkanLogValue::Integer)
        }
        _ => None,
    }
}

/// Text that claims `words` words of `%log` and, where they fit, writes `%number` and then
/// what `write` writes at `%base` (the claimed words' first index).
fn record(words: usize, number: usize, parameters: &str, write: &str) -> String {
    format!(
        r#"func.func @f(%log: memref<?xi32>{parameters}) -> i32 {{
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %zero = arith.constant 0 : i32
  %two = arith.constant 2 : i32
  %size = arith.constant {words} : i32
  %start = memref.atomic_rmw addi %size, %log[%c0] : (i32, memref<?xi32>) -> i32
  %capacity = memref.load %log[%c1] : memref<?xi32>
  %end = arith.addi %start, %size : i32
  %room = arith.subi %capacity, %two : i32
  %not_wrapped = arith.cmpi sge, %start, %zero : i32
  %grew = arith.cmpi sgt, %end, %start : i32
  %inside = arith.cmpi sle, %end, %room : i32
  %ok = arith.andi %not_wrapped, %grew : i1
  %fits = arith.andi %ok, %inside : i1
  scf.if %fits {{
    %first = arith.addi %start, %two : i32
    %base = arith.index_cast %first : i32 to index
    %number = arith.constant {number} : i32
    memref.store %number, %log[%base] : memref<?xi32>
{write}  }}
  return %zero : i32
}}
"#
    )
}

/// Stores `value` (an i32) at `%base + offset`.
fn store_at(offset: usize, value: &str) -> String {
    format!(
        "    %o{offset} = arith.constant {offset} : index\n    %a{offset} = arith.addi %base, \
         %o{offset} : index\n    memref.store {value}, %log[%a{offset}] : memref<?xi32>\n"
    )
}

/// The record of printf number `number` with `arguments`.
fn printf_record(number: usize, arguments: &[Value], kinds: &[VulkanLogValue]) -> String {
    let mut parameters = String::new();
    let mut write = String::new();
    for (j, (argument, kind)) in arguments.iter().zip(kinds).enumerate() {
        let ty = argument.r#type().to_string();
        parameters.push_str(&format!(", %p{j}: {ty}"));
        let widened = match (kind, ty.as_str()) {
            (VulkanLogValue::Float, "f64") => format!("    %w{j} = arith.bitcast %p{j} : f64 to i64\n"),
            (VulkanLogValue::Float, _) => format!(
                "    %d{j} = arith.extf %p{j} : {ty} to f64\n    %w{j} = arith.bitcast %d{j} : f64 to i64\n"
            ),
            (VulkanLogValue::Integer, "index") => {
                format!("    %w{j} = arith.index_cast %p{j} : index to i64\n")
            }
            (VulkanLogValue::Integer, "i64") => String::new(),
            (VulkanLogValue::Integer, "i1") => format!("    %w{j} = arith.extui %p{j} : i1 to i64\n"),
            (VulkanLogValue::Integer, _) => format!("    %w{j} = arith.extsi %p{j} : {ty} to i64\n"),
        };
        write.push_str(&widened);
        let wide = if ty == "i64" {
            format!("%p{j}")
        } else {
            format!("%w{j}")
        };
        write.push_str(&format!(
            "    %s{j} = arith.constant 32 : i64\n    %h{j} = arith.shrui {wide}, %s{j} : i64\n    \
             %lo{j} = arith.trunci {wide} : i64 to i32\n    %hi{j} = arith.trunci %h{j} : i64 to i32\n"
        ));
        write.push_str(&store_at(1 + 2 * j, &format!("%lo{j}")));
        write.push_str(&store_at(2 + 2 * j, &format!("%hi{j}")));
    }
    record(1 + 2 * arguments.len(), number, &parameters, &write)
}

/// The record of a failed assertion number `number`, written where `%holds` is false: the
/// thread's and block's ids.
fn assert_record(number: usize) -> String {
    let mut write = String::new();
    for (k, id) in [
        "thread_id x",
        "thread_id y",
        "thread_id z",
        "block_id x",
        "block_id y",
        "block_id z",
    ]
    .iter()
    .enumerate()
    {
        write.push_str(&format!(
            "    %id{k} = gpu.{id}\n    %v{k} = arith.index_cast %id{k} : index to i32\n"
        ));
        write.push_str(&store_at(1 + k, &format!("%v{k}")));
    }
    let claim = record(7, number, "", &write);
    // Only where the assertion fails: the claim goes inside `scf.if %failed`.
    let body = claim
        .split_once("-> i32 {\n")
        .map(|(_, body)| body)
        .unwrap_or_default()
        .rsplit_once("  return %zero : i32\n")
        .map(|(body, _)| body)
        .unwrap_or_default();
    format!(
        r#"func.func @f(%holds: i1, %log: memref<?xi32>) -> i32 {{
  %true = arith.constant true
  %failed = arith.xori %holds, %true : i1
  scf.if %failed {{
{body}  }}
  %result = arith.constant 0 : i32
  return %result : i32
}}
"#
    )
}
