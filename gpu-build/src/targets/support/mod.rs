//! What targets share, below every target: chip parsing, bitcode linking, the LLVM steps, and
//! finding and running external tools.

pub(crate) mod chips;
pub(crate) mod link;
pub(crate) mod llvm;
pub(crate) mod toolkit;
