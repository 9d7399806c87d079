//! What both SPIR-V targets do with a failed `cf.assert` (Vulkan records it in its log
//! buffer, `vulkan/log.rs`; OpenCL prints it, `opencl/assert.rs`): the failing thread stops at
//! its assertion as on a GPU: the rest of the block holding the assertion runs only where it
//! held (at the kernel's top level, the rest of the kernel). An assertion inside a region that
//! yields values (a loop's carried values) lets the thread go on. And where the assertion is,
//! as CUDA reports it.

use super::spirv::failed;
use crate::error::Result;
use melior::ir::attribute::StringAttribute;
use melior::ir::operation::{OperationLike, OperationRef};
use melior::ir::{BlockLike, Location, RegionLike};
use mlir_sys::MlirLocation;

/// What a failed assertion reports, as CUDA does: its message, and where it is.
pub(crate) struct Failure {
    pub message: String,
    pub file: String,
    pub line: u32,
    pub function: String,
}

/// The report of `cf.assert` `op` in kernel `kernel` ([`place`] says where).
pub(crate) fn failure(op: &OperationRef, kernel: &str) -> Failure {
    let message = op
        .attribute("msg")
        .ok()
        .and_then(|a| StringAttribute::try_from(a).ok())
        .map(|a| a.value().to_string())
        .unwrap_or_default();
    let (file, line, function) = place(op.location(), kernel);
    Failure {
        message,
        file,
        line,
        function,
    }
}

/// Makes the ops after the assertion `op` in its block run only where it held: they move
/// into an `scf.if` on its condition (when the block's terminator takes no values).
pub(crate) fn stop_failing_threads(op: &OperationRef) -> Result<()> {
    let block = op
        .block()
        .ok_or_else(|| failed("finding an assertion's block"))?;
    let terminator = block
        .terminator()
        .ok_or_else(|| failed("finding an assertion's block's end"))?;
    let mut after = Vec::new();
    let mut next = op.next_in_block();
    while let Some(following) = next {
        if following.to_raw().ptr == terminator.to_raw().ptr {
            break;
        }
        next = following.next_in_block();
        after.push(following);
    }
    if after.is_empty() || terminator.operand_count() > 0 {
        return Ok(());
    }
    // An escaping value (used after the block's end) would lose its definition: leave it.
    let condition = op.operand(0).map_err(|_| failed("reading an assertion"))?;
    let guard = melior::dialect::scf::r#if(
        condition,
        &[],
        {
            let region = melior::ir::Region::new();
            let then = melior::ir::Block::new(&[]);
            then.append_operation(melior::dialect::scf::r#yield(&[], op.location()));
            region.append_block(then);
            region
        },
        melior::ir::Region::new(),
        op.location(),
    );
    let guard = block.insert_operation_after(*op, guard);
    let then = guard
        .region(0)
        .ok()
        .and_then(|r| r.first_block())
        .and_then(|b| b.terminator())
        .ok_or_else(|| failed("making an assertion's guard"))?;
    for moved in after {
        // SAFETY: ops of the assertion's block, after it, moved in order into a block nested
        // right where they were: what they use is still defined before them, and nothing after
        // the block's end uses them (its terminator takes no values).
        unsafe { mlir_sys::mlirOperationMoveBefore(moved.to_raw(), then.to_raw()) };
    }
    Ok(())
}

/// The file, line and function of an assertion at `location`, as MLIR's NVVM lowering reads
/// them: through call sites to the callee, a name for the function, and a file position
/// (`kernel` and "(unknown)" where the location has none).
fn place(location: Location, kernel: &str) -> (String, u32, String) {
    let mut file = "(unknown)".to_string();
    let mut line = 0;
    let mut function = kernel.to_string();
    let mut current: MlirLocation = location.to_raw();
    // SAFETY (every call below): `current` is a live location of the op's context, and each
    // accessor is called only on a location of its kind.
    unsafe {
        for _ in 0..16 {
            if mlir_sys::mlirLocationIsACallSite(current) {
                current = mlir_sys::mlirLocationCallSiteGetCallee(current);
            } else if mlir_sys::mlirLocationIsAName(current) {
                let name = mlir_sys::mlirIdentifierStr(mlir_sys::mlirLocationNameGetName(current));
                function = string(name);
                current = mlir_sys::mlirLocationNameGetChildLoc(current);
            } else if mlir_sys::mlirLocationIsAFileLineColRange(current) {
                file = string(mlir_sys::mlirIdentifierStr(
                    mlir_sys::mlirLocationFileLineColRangeGetFilename(current),
                ));
                line = mlir_sys::mlirLocationFileLineColRangeGetStartLine(current).max(0) as u32;
                break;
            } else {
                break;
            }
        }
    }
    (file, line, function)
}

/// The text of an MLIR string reference.
///
/// # Safety
/// `text` points at `length` readable bytes (or is empty).
unsafe fn string(text: mlir_sys::MlirStringRef) -> String {
    if text.length == 0 || text.data.is_null() {
        return String::new();
    }
    // SAFETY: the caller guarantees the bytes.
    let bytes = unsafe { std::slice::from_raw_parts(text.data.cast::<u8>(), text.length) };
    String::from_utf8_lossy(bytes).into_owned()
}
