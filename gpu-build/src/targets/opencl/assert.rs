//! `cf.assert` on OpenCL, which MLIR 22 does not lower: where the condition fails, the thread
//! prints CUDA's message through OpenCL's `printf` (a `gpu.printf`, which MLIR lowers to
//! OpenCL's) and stops at the assertion, as on a GPU (`support/assert.rs`). Unlike CUDA and
//! the Vulkan target (whose log buffer the runtime reads), the launch itself does not fail: the
//! OpenCL driver has no channel from a kernel yet.

use crate::error::Result;
use crate::targets::support::assert::{failure, stop_failing_threads, Failure};
use crate::targets::support::mlir::splice_text;
use crate::targets::support::spirv::{failed, ops_named};
use melior::ir::operation::{OperationLike, OperationRef};
use melior::Context;

/// Rewrites every `cf.assert` of `function` (a `gpu.func` of the OpenCL copy, kernel `kernel`).
pub(super) fn assert_by_printf<'c: 'a, 'a>(
    context: &'c Context,
    function: &impl OperationLike<'c, 'a>,
    kernel: &str,
) -> Result<()> {
    for raw in ops_named(function, "cf.assert") {
        // SAFETY: a live op of the function; each is rewritten once, and rewriting one moves or
        // removes no other assertion.
        let op = unsafe { OperationRef::from_raw(raw) };
        let condition = op.operand(0).map_err(|_| failed("reading an assertion"))?;
        splice_text(
            context,
            &report_text(&failure(&op, kernel)),
            &op,
            &[condition],
        )
        .ok_or_else(|| failed("splicing an assertion's report"))?;
        stop_failing_threads(&op)?;
        // SAFETY: the assertion has no results; nothing refers to it afterwards.
        unsafe { mlir_sys::mlirOperationDestroy(raw) };
    }
    Ok(())
}

/// What a failing thread prints, CUDA's words (as the other targets print them), as a function
/// of the condition.
fn report_text(failure: &Failure) -> String {
    // Text from the kernel file is printed as it is: `%` doubled for printf, and escaped for an
    // MLIR string.
    let literal = |text: &str| {
        text.replace('%', "%%")
            .replace('\\', "\\5C")
            .replace('"', "\\22")
            .replace('\n', "\\0A")
    };
    let format = format!(
        "{}:{}: {}: block: [%d,%d,%d], thread: [%d,%d,%d] Assertion `{}` failed.\\0A",
        literal(&failure.file),
        failure.line,
        literal(&failure.function),
        literal(&failure.message)
    );
    let ids: String = [
        "block_id x",
        "block_id y",
        "block_id z",
        "thread_id x",
        "thread_id y",
        "thread_id z",
    ]
    .iter()
    .enumerate()
    .map(|(k, id)| {
        format!("    %i{k} = gpu.{id}\n    %v{k} = arith.index_cast %i{k} : index to i32\n")
    })
    .collect();
    format!(
        r#"func.func @f(%holds: i1) {{
  %true = arith.constant true
  %failed = arith.xori %holds, %true : i1
  scf.if %failed {{
{ids}    gpu.printf "{format}", %v0, %v1, %v2, %v3, %v4, %v5 : i32, i32, i32, i32, i32, i32
  }}
  return
}}
"#
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_report_prints_the_kernel_files_text_as_it_is() {
        let text = report_text(&Failure {
            message: "100% \"sure\"".into(),
            file: "a%b.mlir".into(),
            line: 7,
            function: "k".into(),
        });
        assert!(text.contains("a%%b.mlir:7: k: block: [%d,%d,%d]"), "{text}");
        assert!(
            text.contains("Assertion `100%% \\22sure\\22` failed.\\0A"),
            "{text}"
        );
    }
}
