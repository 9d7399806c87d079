//! Vendor drivers, loaded at run time.

pub(crate) mod cuda;
