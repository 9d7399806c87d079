//! MLIR's GPU runtime ABI, the `mgpu*` functions that MLIR 22's `gpu-to-llvm` and its
//! `gpu.binary` embedding (`#gpu.select_object`) emit calls to, over this crate's drivers: a
//! program MLIR lowered runs on whatever device this crate drives, the host included (upstream
//! has one library per vendor: `CudaRuntimeWrappers.cpp`, `RocmRuntimeWrappers.cpp`).
//!
//! Exported as C symbols with the `mgpu` feature: the `gpu-mgpu` library (for `mlir-runner
//! --shared-libs`), and `gpu-build run`, which registers them with its JIT. As upstream's
//! wrappers do, a failed call prints what failed on stderr and returns null (or nothing):
//! the ABI has no error results.
//!
//! Memory: `mgpuMemAlloc` allocates device memory (host memory on the host device, where
//! host-shared memory is any allocation); `mgpuMemcpy` tells device from host memory by the
//! allocations made here, as CUDA's unified addressing does. Host launches on a stream copy the
//! parameter values, whose sizes a host image's manifest gives.
//!
//! Vulkan and OpenCL devices: a `gpu.binary`'s SPIR-V does not say how its kernels' arguments
//! are bound, so the program's runner registers each object's kernel ABI first
//! ([`register_object`], from the gpu-build manifest); `mgpuModuleLoad` finds it by the bytes.
//! A Vulkan launch may pass host memory (`memref.alloc`) as upstream's Vulkan runner allows:
//! each memref argument whose aligned pointer is not memory `mgpuMemAlloc` returned is staged
//! through device memory around the launch (copied in, the descriptor's pointers and
//! offset rewritten to it, copied back and freed once the launch has run), so such a launch is
//! synchronous. The `fillResource*` functions are upstream's Vulkan runner helpers that fill a
//! host memref with a value (`fillI32Buffer` and `fillF32Buffer*D` the same, as upstream's
//! SPIR-V CPU runner names them).
//!
//! Timing: with `GPU_MGPU_LAUNCH_TIMES=1` every launch waits for its kernel and prints, on
//! stdout, the lines upstream's Vulkan runtime prints after each dispatch (`Compute shader
//! execution time: ...us` between events around the kernel, `Command buffer submit time` for
//! the launch call, `Wait idle time` for the wait that follows).

//!
//! Layout: `shims.rs`, the exported functions for modules, launches, streams, events and memory;
//! `state.rs`, the runtime's state and the tables that turn the program's opaque pointers back
//! into typed driver handles; `memref.rs`, memrefs at the ABI; `registered.rs`, the objects
//! registered with their ABI; `vulkan.rs`, Vulkan launches that stage host memory; `timing.rs`,
//! launch times.

mod memref;
mod registered;
mod shims;
mod state;
mod timing;
mod vulkan;

pub use memref::*;
pub use registered::register_object;
pub use shims::*;
pub use state::{device, use_device};

use crate::error::{Error, ErrorKind, Result};
use std::ffi::c_void;
use std::sync::Mutex;

/// How many errors the checked run of this process found: accesses outside their bounds or
/// dimensions, misaligned accesses, races and uninitialized reads, divergent barriers, and the
/// leaks [`report_leaks`] found (`gpu-build run --check` fails when there were any; each was
/// printed on stderr).
#[doc(hidden)]
pub fn check_errors() -> u64 {
    crate::driver::host::check_errors()
}

/// The leak check's report, now: every host-device allocation the program has not freed, on
/// stderr, counted in [`check_errors`]; how many there were. Made once (a later call, and the
/// report at exit, print nothing).
#[doc(hidden)]
pub fn report_leaks() -> u64 {
    crate::driver::host::report_leaks()
}

/// Where the program's `gpu.alloc` ops are (`file:line:col`, by number): the leak check names
/// the one that made a leaked allocation. A program calls [`mgpuCheckAllocationSite`] with the
/// number before each `gpu.alloc`.
#[doc(hidden)]
pub fn set_allocation_sites(sites: Vec<String>) {
    *shims::ALLOCATION_SITES
        .write()
        .unwrap_or_else(|p| p.into_inner()) = sites.into_iter().map(Into::into).collect();
}

/// The value, or the failure printed (`'mgpuMemAlloc' failed: ...`) and `None`.
fn report<T>(call: &str, result: Result<T>) -> Option<T> {
    match result {
        Ok(value) => Some(value),
        Err(error) => {
            eprintln!("'{call}' failed: {}", error.message());
            None
        }
    }
}

fn invalid(why: String) -> Error {
    Error::new(ErrorKind::InvalidArgument, why)
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

/// Every exported function by name, for JITs that resolve symbols from a table
/// (`gpu-build run` registers these with MLIR's ExecutionEngine).
pub fn symbols() -> Vec<(&'static str, *mut c_void)> {
    vec![
        ("mgpuModuleLoad", mgpuModuleLoad as *mut c_void),
        ("mgpuModuleLoadJIT", mgpuModuleLoadJIT as *mut c_void),
        ("mgpuModuleUnload", mgpuModuleUnload as *mut c_void),
        (
            "mgpuModuleGetFunction",
            mgpuModuleGetFunction as *mut c_void,
        ),
        ("mgpuLaunchKernel", mgpuLaunchKernel as *mut c_void),
        (
            "mgpuLaunchClusterKernel",
            mgpuLaunchClusterKernel as *mut c_void,
        ),
        ("mgpuStreamCreate", mgpuStreamCreate as *mut c_void),
        ("mgpuStreamDestroy", mgpuStreamDestroy as *mut c_void),
        (
            "mgpuStreamSynchronize",
            mgpuStreamSynchronize as *mut c_void,
        ),
        ("mgpuStreamWaitEvent", mgpuStreamWaitEvent as *mut c_void),
        ("mgpuEventCreate", mgpuEventCreate as *mut c_void),
        ("mgpuEventDestroy", mgpuEventDestroy as *mut c_void),
        ("mgpuEventSynchronize", mgpuEventSynchronize as *mut c_void),
        ("mgpuEventRecord", mgpuEventRecord as *mut c_void),
        ("mgpuMemAlloc", mgpuMemAlloc as *mut c_void),
        (
            "mgpuCheckAllocationSite",
            mgpuCheckAllocationSite as *mut c_void,
        ),
        ("mgpuMemFree", mgpuMemFree as *mut c_void),
        ("mgpuMemcpy", mgpuMemcpy as *mut c_void),
        ("mgpuMemset32", mgpuMemset32 as *mut c_void),
        ("mgpuMemset16", mgpuMemset16 as *mut c_void),
        ("mgpuMemHostRegister", mgpuMemHostRegister as *mut c_void),
        (
            "mgpuMemHostUnregister",
            mgpuMemHostUnregister as *mut c_void,
        ),
        (
            "mgpuMemHostRegisterMemRef",
            mgpuMemHostRegisterMemRef as *mut c_void,
        ),
        (
            "mgpuMemHostUnregisterMemRef",
            mgpuMemHostUnregisterMemRef as *mut c_void,
        ),
        (
            "mgpuMemGetDeviceMemRef1dFloat",
            mgpuMemGetDeviceMemRef1dFloat as *mut c_void,
        ),
        (
            "mgpuMemGetDeviceMemRef1dInt32",
            mgpuMemGetDeviceMemRef1dInt32 as *mut c_void,
        ),
        ("mgpuSetDefaultDevice", mgpuSetDefaultDevice as *mut c_void),
        ("fillResource1DFloat", fillResource1DFloat as *mut c_void),
        ("fillResource2DFloat", fillResource2DFloat as *mut c_void),
        ("fillResource3DFloat", fillResource3DFloat as *mut c_void),
        ("fillResource1DInt", fillResource1DInt as *mut c_void),
        ("fillResource2DInt", fillResource2DInt as *mut c_void),
        ("fillResource3DInt", fillResource3DInt as *mut c_void),
        ("fillResource1DInt8", fillResource1DInt8 as *mut c_void),
        ("fillResource2DInt8", fillResource2DInt8 as *mut c_void),
        ("fillResource3DInt8", fillResource3DInt8 as *mut c_void),
        ("fillI32Buffer", fillI32Buffer as *mut c_void),
        ("fillF32Buffer1D", fillF32Buffer1D as *mut c_void),
        ("fillF32Buffer2D", fillF32Buffer2D as *mut c_void),
        ("fillF32Buffer3D", fillF32Buffer3D as *mut c_void),
    ]
}

#[cfg(test)]
mod tests {
    use super::state::with_runtime;
    use super::*;
    use crate::device::Device;

    #[test]
    fn fill_resource_fills_a_strided_view_only() {
        // A 2x3 view with row stride 4 and offset 1 inside 9 elements.
        let mut data = [0i32; 9];
        let base = data.as_mut_ptr();
        // SAFETY: the view's elements (1..4, 5..8) lie in `data`.
        unsafe { fillResource2DInt(base, base, 1, 2, 3, 4, 1, 7) };
        assert_eq!(data, [0, 7, 7, 7, 0, 7, 7, 7, 0]);
        let mut bytes = [0i8; 4];
        let base = bytes.as_mut_ptr();
        // The value arrives in 32 bits whose upper ones are not the caller's to set.
        // SAFETY: 4 elements of `bytes`.
        unsafe { fillResource1DInt8(base, base, 0, 4, 1, 0x1234_56fe) };
        assert_eq!(bytes, [-2; 4]);
    }

    #[test]
    fn an_object_is_registered_once_and_only_with_an_abi_for_its_driver() {
        use crate::binary::Vendor;
        use gpu_manifest::targets::opencl::OpenClAbi;
        use gpu_manifest::ObjectAbi;
        let bytes = [7u8, 1, 2, 3, 4, 5, 6, 7];
        let count = || {
            lock(&registered::REGISTERED_OBJECTS)
                .iter()
                .filter(|r| r.object.bytes() == bytes)
                .count()
        };
        register_object(
            Vendor::Nvptx,
            "sm_80",
            &bytes,
            &[],
            &ObjectAbi::LoweredParams,
        );
        assert_eq!(count(), 0, "its bytes say everything");
        let written = OpenClAbi {
            spirv_version: "1.0".into(),
            capabilities: Vec::new(),
            extensions: Vec::new(),
            kernels: Vec::new(),
        };
        let abi = ObjectAbi::encode(&written).unwrap();
        register_object(Vendor::OpenCl, "spirv1.0", &bytes, &[], &abi);
        register_object(Vendor::OpenCl, "spirv1.0", &bytes, &[], &abi);
        assert_eq!(count(), 1);
        let registered = lock(&registered::REGISTERED_OBJECTS);
        let object = registered
            .iter()
            .find(|r| r.object.bytes() == bytes)
            .unwrap();
        assert_eq!(object.object.vendor(), Vendor::OpenCl);
        let decoded: OpenClAbi = object.object.decode_abi().unwrap();
        assert_eq!(decoded, written);
    }

    #[test]
    fn choosing_the_same_device_again_keeps_the_runtimes_state() {
        use_device(Device::host()).unwrap();
        let pointer = mgpuMemAlloc(64, std::ptr::null_mut(), false);
        assert!(!pointer.is_null());
        use_device(Device::host()).unwrap();
        let known = with_runtime(|runtime, _| Ok(runtime.is_device_memory(pointer as u64)));
        assert_eq!(
            known,
            Ok(true),
            "the allocation is still known after use_device"
        );
        // SAFETY: allocated above, used by nothing.
        unsafe { mgpuMemFree(pointer, std::ptr::null_mut()) };
        let known = with_runtime(|runtime, _| Ok(runtime.is_device_memory(pointer as u64)));
        assert_eq!(known, Ok(false));
    }
}
