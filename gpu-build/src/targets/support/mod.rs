//! What targets share, below every target: chip parsing, bitcode linking and the LLVM steps
//! (finding and running external tools is `crate::toolkit`, below the target interface).

pub(crate) mod chips;
pub(crate) mod link;
pub(crate) mod llvm;
