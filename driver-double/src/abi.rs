//! The vendors' declarations, from the bindings gpu-embed generates from `cuda.h` and the HIP
//! headers: the double's entry points are checked against these types at compile time
//! (`cuda.rs`, `hip.rs`), so the double and the runtime cannot disagree about a signature.

#[path = "../../gpu-embed/src/driver/sys/cuda.rs"]
#[rustfmt::skip]
#[allow(clippy::all, unsafe_op_in_unsafe_fn)]
pub mod cuda;
#[path = "../../gpu-embed/src/driver/sys/hip.rs"]
#[rustfmt::skip]
#[allow(clippy::all, unsafe_op_in_unsafe_fn)]
pub mod hip;
#[path = "../../gpu-embed/src/driver/sys/hip_r0600.rs"]
#[rustfmt::skip]
#[allow(clippy::all, unsafe_op_in_unsafe_fn)]
pub mod hip_r0600;

use crate::world::{Code, Fault, Outcome};

/// Writes `value` through a caller's out-pointer.
///
/// # Safety
/// `out` is null or valid for a write of `T`.
pub unsafe fn put<T>(out: *mut T, value: T) -> Outcome<()> {
    if out.is_null() {
        return Err(Fault::violation(Code::InvalidValue, "a null out-pointer"));
    }
    // SAFETY: non-null, and valid for writes by the caller's promise.
    unsafe { out.write(value) };
    Ok(())
}

pub fn handle<T>(id: u64) -> *mut T {
    id as usize as *mut T
}

pub fn id<T>(handle: *mut T) -> u64 {
    handle as usize as u64
}

/// Fails to compile unless each named function has exactly the type of the same-named field
/// of the generated loader struct (the entry point as the header declares it).
macro_rules! check_signatures {
    ($loader:ty => $($name:ident),* $(,)?) => {
        const _: () = {
            #[allow(dead_code, unused_assignments)]
            fn signatures(loader: $loader) {
                $(
                    let mut entry = loader.$name;
                    entry = $name;
                    let _ = entry;
                )*
            }
        };
    };
}
pub(crate) use check_signatures;

/// Defines exported entry points returning `$result`: each records its arguments and runs its
/// body (which names the state `$w`) through `$wrapper`; all, and the `also` ones defined by
/// hand, are checked against `$loader`'s declarations.
macro_rules! entry_points {
    ($result:ty, $wrapper:path, $loader:ty, |$w:ident| also $($other:ident),*;
     $(fn $name:ident($($arg:ident: $ty:ty),* $(,)?) $body:block)*) => {
        $(
            #[no_mangle]
            /// # Safety
            /// What the vendor's header documents for the call.
            pub unsafe extern "C" fn $name($($arg: $ty),*) -> $result {
                let args: Vec<String> = vec![$(format!(concat!(stringify!($arg), "={:?}"), $arg)),*];
                $wrapper(stringify!($name), args.join(", "), |$w: &mut World| {
                    let _ = &$w;
                    $body
                })
            }
        )*
        crate::abi::check_signatures!($loader => $($other,)* $($name),*);
    };
}
pub(crate) use entry_points;
