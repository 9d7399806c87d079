//! Page-aligned host memory, handed out as page-locked by drivers whose copies need no locked
//! memory (Vulkan's stage through buffers of their own; OpenCL's take any host memory): the
//! allocator's memory, with each allocation's layout kept so that `free_pinned` of an address
//! it did not hand out does nothing.

use crate::error::{Error, ErrorKind, Result};
use std::alloc::Layout;
use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, PoisonError};

/// Sizes of the page-aligned host allocations handed out, by address.
static PINNED: Mutex<Option<HashMap<usize, Layout>>> = Mutex::new(None);

const PAGE: usize = 4096;

pub(crate) fn alloc_pinned(bytes: usize) -> Result<*mut std::ffi::c_void> {
    let layout = Layout::from_size_align(bytes.max(1), PAGE).map_err(|_| {
        Error::new(
            ErrorKind::OutOfMemory,
            format!(
                "cannot allocate {bytes} bytes of host memory: more than the address space holds"
            ),
        )
    })?;
    // SAFETY: a layout of non-zero size.
    let pointer = unsafe { std::alloc::alloc(layout) };
    if pointer.is_null() {
        return Err(Error::new(
            ErrorKind::OutOfMemory,
            format!("out of host memory allocating {bytes} bytes"),
        ));
    }
    pinned()
        .get_or_insert_with(HashMap::new)
        .insert(pointer as usize, layout);
    Ok(pointer.cast())
}

pub(crate) fn free_pinned(pointer: *mut std::ffi::c_void) {
    let layout = pinned()
        .as_mut()
        .and_then(|sizes| sizes.remove(&(pointer as usize)));
    if let Some(layout) = layout {
        // SAFETY: allocated by `alloc_pinned` with this layout, freed once (its entry is gone).
        unsafe { std::alloc::dealloc(pointer.cast(), layout) };
    }
}

/// The table; a panic while it was held left it consistent (each change is one insert or
/// remove), so a poisoned lock is taken as it is.
fn pinned() -> MutexGuard<'static, Option<HashMap<usize, Layout>>> {
    PINNED.lock().unwrap_or_else(PoisonError::into_inner)
}
