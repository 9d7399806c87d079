//! The words of the checks' reports: what an access was, where it was made, by which thread.

use super::Site;
use gpu_manifest::targets::host as host_abi;
use std::ffi::CStr;

/// What an access of a site's `kind` (`host_abi::CHECK_LOAD`...) does, for reports.
pub(super) fn access_name(kind: u32) -> &'static str {
    match kind {
        host_abi::CHECK_LOAD => "load",
        host_abi::CHECK_STORE => "store",
        host_abi::CHECK_ATOMIC => "atomic access",
        host_abi::CHECK_COPY_READ => "copy reading",
        _ => "copy writing",
    }
}

/// Where a report's access was made: "at file:line:col, block (…), thread (…)".
pub(super) fn at(site: *const Site, [tx, ty, tz]: [u32; 3], [bx, by, bz]: [u32; 3]) -> String {
    format!(
        "at {}, block ({bx}, {by}, {bz}), thread ({tx}, {ty}, {tz})",
        location(site)
    )
}

/// `file:line:col` of a site.
pub(super) fn location(site: *const Site) -> String {
    // SAFETY: null or a constant of the checked object.
    match unsafe { site.as_ref() } {
        Some(site) if !site.location.is_null() => {
            // SAFETY: the object's locations are NUL-terminated constants.
            unsafe { CStr::from_ptr(site.location) }
                .to_string_lossy()
                .into_owned()
        }
        _ => "(unknown location)".to_string(),
    }
}

/// The thread `linear` of a block of `dims` (or block of a grid), as `(x, y, z)`.
pub(super) fn thread_of(linear: u32, dims: [u32; 3]) -> String {
    let [x, y, z] = coordinates(linear, dims);
    format!("({x}, {y}, {z})")
}

/// The thread `linear` of a block of `dims` (or block of a grid), as `[x, y, z]`.
pub(super) fn coordinates(linear: u32, dims: [u32; 3]) -> [u32; 3] {
    let (x, y) = (dims[0].max(1), dims[1].max(1));
    [linear % x, linear / x % y, linear / (x * y)]
}
