//! Reading MLIR operations where melior's safe API falls short; shared by the front end and the
//! targets' own MLIR rewrites.

use melior::ir::attribute::{AttributeLike, StringAttribute};
use melior::ir::operation::{OperationLike, OperationRef, WalkOrder, WalkResult};
use melior::ir::{BlockLike, BlockRef, RegionLike, Value, ValueLike};

/// The op's `sym_name`. Read through the C API: melior's `StringRef::as_str` makes a slice from
/// the null pointer MLIR returns for an empty string, which is undefined behaviour.
pub(crate) fn symbol_name<'c: 'a, 'a>(op: &impl OperationLike<'c, 'a>) -> Option<String> {
    let attribute = StringAttribute::try_from(op.attribute("sym_name").ok()?).ok()?;
    // SAFETY: a string attribute of a live operation; its bytes live as long as the context.
    let value = unsafe { mlir_sys::mlirStringAttrGetValue(attribute.to_raw()) };
    if value.length == 0 || value.data.is_null() {
        return Some(String::new());
    }
    // SAFETY: MLIR's string ref: `length` bytes at `data`.
    let bytes = unsafe { std::slice::from_raw_parts(value.data.cast::<u8>(), value.length) };
    Some(String::from_utf8_lossy(bytes).into_owned())
}

/// The op's name (`arith.addf`), owned.
pub(crate) fn op_name<'c: 'a, 'a>(op: &impl OperationLike<'c, 'a>) -> String {
    op.name()
        .as_string_ref()
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// Moves every op of `block` but its terminator before `anchor`, its arguments replaced by
/// `arguments`, each moved op (nested ones too) given the anchor's location, so that anything
/// said about them later points at the source op; returns the value the terminator returned
/// (`func.return`, `gpu.yield`). `None`, with nothing moved, when the block does not fit.
pub(crate) fn splice<'c: 'a, 'a>(
    block: BlockRef<'c, 'a>,
    anchor: &OperationRef<'c, 'a>,
    arguments: &[Value<'c, 'a>],
) -> Option<Value<'c, 'a>> {
    splice_values(block, anchor, arguments)?.into_iter().next()
}

/// [`splice`], returning every value the terminator returned.
pub(crate) fn splice_values<'c: 'a, 'a>(
    block: BlockRef<'c, 'a>,
    anchor: &OperationRef<'c, 'a>,
    arguments: &[Value<'c, 'a>],
) -> Option<Vec<Value<'c, 'a>>> {
    if block.argument_count() != arguments.len() {
        return None;
    }
    let terminator = block.terminator()?;
    let returned: Vec<Value<'c, 'a>> = (0..terminator.operand_count())
        .map(|i| terminator.operand(i).ok())
        .collect::<Option<_>>()?;
    for (index, argument) in arguments.iter().enumerate() {
        let parameter = block.argument(index).ok()?;
        if parameter.r#type() != argument.r#type() {
            return None;
        }
        // SAFETY: the block's ops move before `anchor`, where `argument` is defined (an
        // operand of the anchor or of an op before it); same types (checked).
        unsafe { mlir_sys::mlirValueReplaceAllUsesOfWith(parameter.to_raw(), argument.to_raw()) };
    }
    let mut next = block.first_operation();
    while let Some(op) = next {
        next = op.next_in_block();
        if op.to_raw().ptr == terminator.to_raw().ptr {
            break;
        }
        // SAFETY: an op of `block`, moved once, to a block of the same context.
        unsafe { mlir_sys::mlirOperationMoveBefore(op.to_raw(), anchor.to_raw()) };
        let location = anchor.location().to_raw();
        op.walk(WalkOrder::PreOrder, |nested| {
            // SAFETY: a live op (the moved one or one nested in it) and a location of the same
            // context.
            unsafe { mlir_sys::mlirOperationSetLocation(nested.to_raw(), location) };
            WalkResult::Advance
        });
    }
    Some(returned)
}

/// Parses `text` (a `func.func` of one block) and splices its body before `anchor` (see
/// [`splice_values`]), its arguments replaced by `arguments`; returns what it returned.
/// `None` when the text does not parse or does not fit.
pub(crate) fn splice_text<'c: 'a, 'a>(
    context: &'c melior::Context,
    text: &str,
    anchor: &OperationRef<'c, 'a>,
    arguments: &[Value<'c, 'a>],
) -> Option<Vec<mlir_sys::MlirValue>> {
    let parsed = melior::ir::Module::parse(context, text)?;
    let body = parsed
        .body()
        .first_operation()?
        .region(0)
        .ok()?
        .first_block()?;
    // SAFETY: the template's block lives as long as `parsed`, which outlives the splice; its
    // ops move out into `anchor`'s block, and what is returned is their values, as raw handles
    // that outlive `parsed`.
    let body = unsafe { BlockRef::from_raw(body.to_raw()) };
    let values = splice_values(body, anchor, arguments)?;
    Some(values.iter().map(|v| v.to_raw()).collect())
}

/// Where `op` is, as `file:line:col` (its location's text without `loc(…)` and quotes).
pub(crate) fn source_position(op: &OperationRef) -> String {
    op.location()
        .to_string()
        .trim_start_matches("loc(")
        .trim_end_matches(')')
        .replace('"', "")
}

/// [`source_position`] of an op in a copy of a kernel that was printed and read back (whose ops
/// name the file "-"): the file is that of `kernel_location`, the kernel's own `path:line:col`.
pub(crate) fn source_position_in(kernel_location: &str, op: &OperationRef) -> String {
    let place = source_position(op);
    let file = kernel_location
        .rsplitn(3, ':')
        .last()
        .unwrap_or(kernel_location);
    match place.strip_prefix("-:") {
        Some(position) => format!("{file}:{position}"),
        None if place.contains(':') => place,
        None => kernel_location.to_string(),
    }
}
