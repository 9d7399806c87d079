//! Reading MLIR operations where melior's safe API falls short; shared by the front end and the
//! targets' own MLIR rewrites.

use melior::ir::attribute::{AttributeLike, StringAttribute};
use melior::ir::operation::OperationLike;

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
