//! Workspace-level tests live in `tests/`; this crate has no library code of its own.
