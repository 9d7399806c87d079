//! Memrefs at the ABI: registering a memref's data, the device's view of registered memory, and
//! upstream's Vulkan runner helpers that fill a host memref.

use super::shims::{mgpuMemHostRegister, mgpuMemHostUnregister};
use super::state::with_runtime;
use super::{invalid, report};
use crate::error::Result;
use std::ffi::c_void;

/// A memref descriptor's first fields (`StridedMemRefType<char, N>`): then `rank` sizes and
/// `rank` strides.
#[repr(C)]
struct MemrefDescriptor {
    allocated: *mut u8,
    aligned: *mut u8,
    offset: i64,
    sizes_and_strides: [i64; 0],
}

/// The data pointer and byte size of a densely packed memref.
///
/// # Safety
/// `descriptor` is a memref descriptor of rank `rank`.
unsafe fn dense_memref(
    rank: i64,
    descriptor: *const MemrefDescriptor,
    element_bytes: i64,
) -> Result<(*mut c_void, u64)> {
    let rank = usize::try_from(rank).map_err(|_| invalid(format!("memref rank {rank}")))?;
    // SAFETY: the caller's guarantee.
    let descriptor = unsafe { &*descriptor };
    // SAFETY: a descriptor of rank `rank` has `2 rank` sizes and strides after its offset.
    let fields =
        unsafe { std::slice::from_raw_parts(descriptor.sizes_and_strides.as_ptr(), 2 * rank) };
    let (sizes, strides) = fields.split_at(rank);
    let mut dense = 1i64;
    for (i, (&size, &stride)) in sizes.iter().zip(strides).enumerate().rev() {
        if stride != dense && size > 1 {
            return Err(invalid(format!(
                "only densely packed memrefs can be registered (dimension {i} has stride \
                 {stride}, dense would be {dense})"
            )));
        }
        dense *= size;
    }
    let bytes = u64::try_from(dense * element_bytes)
        .map_err(|_| invalid(format!("a memref of {dense} elements")))?;
    let data = descriptor
        .aligned
        .wrapping_offset((descriptor.offset * element_bytes) as isize);
    Ok((data.cast(), bytes))
}

/// Registers a densely packed memref's data (`gpu.host_register`).
///
/// # Safety
/// `descriptor` is a memref descriptor of rank `rank` whose data stays allocated until
/// unregistered.
#[no_mangle]
pub unsafe extern "C" fn mgpuMemHostRegisterMemRef(
    rank: i64,
    descriptor: *const c_void,
    element_bytes: i64,
) {
    // SAFETY: the caller's guarantee.
    let memref = unsafe { dense_memref(rank, descriptor.cast(), element_bytes) };
    if let Some((data, bytes)) = report("mgpuMemHostRegisterMemRef", memref) {
        // SAFETY: as above.
        unsafe { mgpuMemHostRegister(data, bytes) };
    }
}

/// Unregisters a memref's data (`gpu.host_unregister`).
///
/// # Safety
/// The memref was registered and no queued work uses it.
#[no_mangle]
pub unsafe extern "C" fn mgpuMemHostUnregisterMemRef(
    rank: i64,
    descriptor: *const c_void,
    element_bytes: i64,
) {
    // SAFETY: the caller's guarantee.
    let memref = unsafe { dense_memref(rank, descriptor.cast(), element_bytes) };
    if let Some((data, _)) = report("mgpuMemHostUnregisterMemRef", memref) {
        // SAFETY: as above.
        unsafe { mgpuMemHostUnregister(data) };
    }
}

/// A rank-1 memref descriptor, as MLIR passes and returns one (`StridedMemRefType<T, 1>`).
#[repr(C)]
pub struct Memref1d<T> {
    allocated: *mut T,
    aligned: *mut T,
    offset: i64,
    sizes: [i64; 1],
    strides: [i64; 1],
}

/// The device's view of registered host memory (upstream's ROCm wrappers'
/// `mgpuMemGetDeviceMemRef1d*`, which the ROCm integration tests call after
/// `gpu.host_register`): the same address on the host device, under the unified addressing
/// every 64-bit CUDA device has on NVIDIA GPUs, and on Vulkan devices, whose launches stage
/// host memory (`Driver::registered_host_address`). On AMD GPUs the runtime may map it
/// elsewhere (`hipHostGetDevicePointer`), which is not bound here: reported, and null.
fn device_memref<T>(
    call: &str,
    aligned: *mut T,
    offset: i64,
    size: i64,
    stride: i64,
) -> Memref1d<T> {
    let pointer = with_runtime(|_, driver| {
        driver
            .registered_host_address(aligned.cast())
            .map(<*mut c_void>::cast)
    });
    let pointer = report(call, pointer).unwrap_or(std::ptr::null_mut());
    Memref1d {
        allocated: pointer,
        aligned: pointer,
        offset,
        sizes: [size],
        strides: [stride],
    }
}

/// The device's view of a registered rank-1 f32 memref.
#[no_mangle]
pub extern "C" fn mgpuMemGetDeviceMemRef1dFloat(
    _allocated: *mut f32,
    aligned: *mut f32,
    offset: i64,
    size: i64,
    stride: i64,
) -> Memref1d<f32> {
    device_memref(
        "mgpuMemGetDeviceMemRef1dFloat",
        aligned,
        offset,
        size,
        stride,
    )
}

/// The device's view of a registered rank-1 i32 memref.
#[no_mangle]
pub extern "C" fn mgpuMemGetDeviceMemRef1dInt32(
    _allocated: *mut i32,
    aligned: *mut i32,
    offset: i64,
    size: i64,
    stride: i64,
) -> Memref1d<i32> {
    device_memref(
        "mgpuMemGetDeviceMemRef1dInt32",
        aligned,
        offset,
        size,
        stride,
    )
}

/// Writes `value` to every element of a host view (upstream's Vulkan runner's `fillResource*`
/// helpers); a view the runtime cannot walk is reported, and left alone.
///
/// # Safety
/// `aligned + offset` with `sizes` and `strides` (in elements) addresses writable `T`s.
unsafe fn fill_host_view<T: Copy>(
    call: &str,
    aligned: *mut T,
    offset: i64,
    sizes: &[i64],
    strides: &[i64],
    value: T,
) {
    if sizes.contains(&0) {
        return;
    }
    if aligned.is_null() || offset < 0 || sizes.iter().any(|&s| s < 0) {
        report::<()>(
            call,
            Err(invalid(format!(
                "a memref at {aligned:?} with offset {offset} and sizes {sizes:?}"
            ))),
        );
        return;
    }
    let mut index = vec![0i64; sizes.len()];
    loop {
        let element = index.iter().zip(strides).fold(offset, |at, (&i, &stride)| {
            at.wrapping_add(i.wrapping_mul(stride))
        });
        // SAFETY: the caller's guarantee: an element of the view.
        unsafe {
            aligned
                .wrapping_offset(element as isize)
                .write_unaligned(value)
        };
        // The next index, the last dimension fastest.
        let mut d = sizes.len();
        loop {
            if d == 0 {
                return;
            }
            d -= 1;
            index[d] += 1;
            if index[d] < sizes[d] {
                break;
            }
            index[d] = 0;
        }
    }
}

/// An `i8` argument read from the 32 bits that carry it: the C calling convention leaves the
/// upper bits to the caller, and MLIR's calls do not extend them.
fn low_byte(value: i32) -> i8 {
    value as i8
}

fn same<T>(value: T) -> T {
    value
}

/// Upstream's Vulkan runner helpers (`fillResource1DFloat(memref<?xf32>, f32)` and its
/// siblings): fill a host memref with a value. Called as MLIR lowers a call to an external
/// function without `llvm.emit_c_interface`: the memref's descriptor fields (allocated and
/// aligned pointer, offset, sizes, strides), then the value.
macro_rules! fill_resource {
    ($name:ident, $element:ty, $value:ty, $convert:ident, [$($size:ident),+], [$($stride:ident),+]) => {
        #[doc = concat!("Upstream's Vulkan runner's `", stringify!($name), "`: fills a host memref.")]
        ///
        /// # Safety
        /// The descriptor fields describe a live memref of writable elements.
        #[no_mangle]
        #[allow(non_snake_case)]
        pub unsafe extern "C" fn $name(
            _allocated: *mut $element,
            aligned: *mut $element,
            offset: i64,
            $($size: i64,)+
            $($stride: i64,)+
            value: $value,
        ) {
            // SAFETY: the caller's guarantee.
            unsafe {
                fill_host_view(
                    stringify!($name),
                    aligned,
                    offset,
                    &[$($size),+],
                    &[$($stride),+],
                    $convert(value),
                )
            }
        }
    };
}

fill_resource!(fillResource1DFloat, f32, f32, same, [s0], [t0]);
fill_resource!(fillResource2DFloat, f32, f32, same, [s0, s1], [t0, t1]);
fill_resource!(
    fillResource3DFloat,
    f32,
    f32,
    same,
    [s0, s1, s2],
    [t0, t1, t2]
);
fill_resource!(fillResource1DInt, i32, i32, same, [s0], [t0]);
fill_resource!(fillResource2DInt, i32, i32, same, [s0, s1], [t0, t1]);
fill_resource!(
    fillResource3DInt,
    i32,
    i32,
    same,
    [s0, s1, s2],
    [t0, t1, t2]
);
fill_resource!(fillResource1DInt8, i8, i32, low_byte, [s0], [t0]);
fill_resource!(fillResource2DInt8, i8, i32, low_byte, [s0, s1], [t0, t1]);
fill_resource!(
    fillResource3DInt8,
    i8,
    i32,
    low_byte,
    [s0, s1, s2],
    [t0, t1, t2]
);
// The same helpers under the names upstream's SPIR-V CPU runner's runtime gives them
// (`mlir_spirv_cpu_runtime`, which MLIR's `GPU/SPIRV` integration tests call).
fill_resource!(fillI32Buffer, i32, i32, same, [s0], [t0]);
fill_resource!(fillF32Buffer1D, f32, f32, same, [s0], [t0]);
fill_resource!(fillF32Buffer2D, f32, f32, same, [s0, s1], [t0, t1]);
fill_resource!(fillF32Buffer3D, f32, f32, same, [s0, s1, s2], [t0, t1, t2]);
