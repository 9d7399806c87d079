//! Typed driver handles: one type per kind of driver object (device, module, function, stream,
//! event, graph), so a stream cannot be passed where an event is wanted. What a handle holds is
//! private to the drivers, and each driver takes back only what it made: a vendor API's own
//! handle (a `CUstream`, a HIP device ordinal) is tagged with its vendor and refused by any
//! other, and an object a driver keeps itself (the host's and Vulkan's streams) comes back
//! through a checked downcast to the driver's own type. A handle of the wrong driver or kind is
//! an error, never a reinterpreted pointer.

use crate::binary::Vendor;
use crate::error::{Error, ErrorKind, Result};
use std::any::Any;
use std::ffi::c_void;
use std::sync::Arc;

/// What a handle holds.
#[derive(Clone)]
enum Payload {
    /// Nothing: the default stream, the host device.
    Empty,
    /// A vendor API's own handle, a pointer or an ordinal only `owner`'s calls take.
    Vendor { owner: Vendor, value: usize },
    /// An object a driver keeps itself; a clone of the handle keeps it alive.
    Object(Arc<dyn Any + Send + Sync>),
}

macro_rules! handle_kinds {
    ($($(#[$doc:meta])* $name:ident: $kind:literal;)+) => {$(
        $(#[$doc])*
        #[derive(Clone)]
        pub(crate) struct $name(Payload);

        // Not every kind is made or taken back every way (no driver keeps its own graphs).
        #[allow(dead_code)]
        impl $name {
            /// A vendor API's own handle, which only `owner`'s driver takes back.
            pub(in crate::driver) fn from_vendor(owner: Vendor, value: usize) -> Self {
                Self(Payload::Vendor { owner, value })
            }

            /// An object the driver keeps itself.
            pub(in crate::driver) fn from_object<T: Any + Send + Sync>(object: Arc<T>) -> Self {
                Self(Payload::Object(object))
            }

            /// The vendor API's handle, when `owner` made it.
            pub(in crate::driver) fn vendor_value(&self, owner: Vendor) -> Result<usize> {
                match self.0 {
                    Payload::Vendor { owner: made_by, value } if made_by == owner => Ok(value),
                    _ => Err(foreign($kind, owner)),
                }
            }

            /// The driver's own object, when the handle holds a `T`.
            pub(in crate::driver) fn object<T: Any + Send + Sync>(&self) -> Result<&T> {
                match &self.0 {
                    Payload::Object(object) => object.downcast_ref::<T>(),
                    _ => None,
                }
                .ok_or_else(|| foreign($kind, std::any::type_name::<T>()))
            }

            /// A new reference to the driver's own object, when the handle holds a `T`.
            pub(in crate::driver) fn shared_object<T: Any + Send + Sync>(&self) -> Result<Arc<T>> {
                match &self.0 {
                    Payload::Object(object) => Arc::clone(object).downcast::<T>().ok(),
                    _ => None,
                }
                .ok_or_else(|| foreign($kind, std::any::type_name::<T>()))
            }

            /// The address other libraries know the object by (the public `raw_handle`s): the
            /// vendor's handle, the driver's object, or null.
            pub(crate) fn interop_pointer(&self) -> *mut c_void {
                match &self.0 {
                    Payload::Empty => std::ptr::null_mut(),
                    Payload::Vendor { value, .. } => *value as *mut c_void,
                    Payload::Object(object) => Arc::as_ptr(object).cast::<()>().cast_mut().cast(),
                }
            }
        }

        impl std::fmt::Debug for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                write!(f, concat!(stringify!($name), "({:?})"), self.interop_pointer())
            }
        }
    )+};
}

handle_kinds! {
    /// A device as its driver addresses it: CUDA's primary context, a HIP ordinal, Vulkan's
    /// device state; empty for the host.
    DeviceHandle: "device";
    /// A loaded module.
    ModuleHandle: "module";
    /// A kernel of a loaded module.
    FunctionHandle: "function";
    /// A stream, or the device's default stream ([`StreamHandle::DEFAULT`]).
    StreamHandle: "stream";
    /// An event.
    EventHandle: "event";
    /// An instantiated graph.
    GraphHandle: "graph";
}

impl StreamHandle {
    /// The device's default stream (CUDA's and HIP's null stream).
    pub(crate) const DEFAULT: StreamHandle = StreamHandle(Payload::Empty);

    /// Whether this is the default stream.
    pub(in crate::driver) fn is_default(&self) -> bool {
        matches!(self.0, Payload::Empty)
    }
}

impl DeviceHandle {
    /// A device its driver needs no handle for (the host).
    pub(in crate::driver) const EMPTY: DeviceHandle = DeviceHandle(Payload::Empty);
}

fn foreign(kind: &str, owner: impl std::fmt::Debug) -> Error {
    Error::new(
        ErrorKind::InvalidArgument,
        format!("a {kind} handle that {owner:?} did not make"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_handle_goes_back_only_to_the_driver_and_type_that_made_it() {
        let stream = StreamHandle::from_vendor(Vendor::Nvptx, 0x1000);
        assert_eq!(stream.vendor_value(Vendor::Nvptx), Ok(0x1000));
        assert!(stream.vendor_value(Vendor::Amdgpu).is_err());
        assert!(stream.object::<u32>().is_err());
        let event = EventHandle::from_object(Arc::new(7u32));
        assert_eq!(event.object::<u32>(), Ok(&7));
        assert!(event.object::<u64>().is_err());
        assert!(event.vendor_value(Vendor::Host).is_err());
        assert!(StreamHandle::DEFAULT.is_default());
        assert!(StreamHandle::DEFAULT.vendor_value(Vendor::Nvptx).is_err());
    }
}
