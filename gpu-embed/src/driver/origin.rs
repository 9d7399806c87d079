//! Where an allocation comes from, as the code that asks a driver for memory says (the buffer
//! constructors, through `#[track_caller]`; the MLIR runtime's `mgpuMemAlloc`) and the driver
//! that makes it may record (the host device's checked runs name it in the leak check's
//! report). Drivers that record nothing ignore it.

use std::cell::RefCell;
use std::panic::Location;
use std::sync::Arc;

/// Where an allocation was made: the Rust code that asked for it (`#[track_caller]` through
/// the buffer constructors) or the op of an MLIR program (`gpu-build run`).
#[derive(Debug, Clone)]
pub(crate) enum Origin {
    Caller(&'static Location<'static>),
    /// `gpu-build run`'s programs (the `mgpu` runtime).
    #[cfg_attr(not(feature = "mgpu"), allow(dead_code))]
    Op(Arc<str>),
}

impl std::fmt::Display for Origin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Origin::Caller(location) => write!(f, "{location}"),
            Origin::Op(text) => f.write_str(text),
        }
    }
}

/// What this thread said of the allocation it is about to make (`Allocating`).
#[derive(Default)]
struct Next {
    origin: Option<Origin>,
    host_visible: bool,
}

thread_local! {
    static NEXT: RefCell<Next> = RefCell::new(Next::default());
}

/// While it lives, the allocations this thread makes are said to come from its origin.
pub(crate) struct Allocating(());

impl Allocating {
    /// Allocations from `origin`.
    pub(crate) fn at(origin: Origin) -> Allocating {
        NEXT.with_borrow_mut(|next| next.origin = Some(origin));
        Allocating(())
    }

    /// ... which the host program writes directly (host-shared memory).
    #[cfg_attr(not(feature = "mgpu"), allow(dead_code))]
    pub(crate) fn host_visible(self) -> Allocating {
        NEXT.with_borrow_mut(|next| next.host_visible = true);
        self
    }
}

impl Drop for Allocating {
    fn drop(&mut self) {
        NEXT.with_borrow_mut(|next| *next = Next::default());
    }
}

/// What this thread said of the allocation it is making: its origin, and whether the host
/// program writes it directly.
pub(crate) fn said() -> (Option<Origin>, bool) {
    NEXT.with_borrow(|next| (next.origin.clone(), next.host_visible))
}
