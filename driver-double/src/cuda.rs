//! The CUDA driver API's entry points, as `cuda.h` declares them (checked at compile time against
//! gpu-embed's generated bindings), over the shared state (`world/`). CUDA's rules added here:
//! `cuInit` first, a current context for every call that works in one, primary-context reference
//! counts, and each `CUresult`.

use crate::abi::cuda::*;
use crate::abi::{handle, id, put};
use crate::config::config;
use crate::world::{self, Code, Fault, LaunchRequest, MemoryKind, Outcome, Pattern, Vendor, World};
use std::ffi::{c_char, c_int, c_uint, c_ulonglong, c_void, CStr};
use std::sync::atomic::{AtomicBool, Ordering};

static INITIALIZED: AtomicBool = AtomicBool::new(false);

fn code(fault: &Fault) -> CUresult {
    if let Some(injected) = fault.injected {
        return injected as CUresult;
    }
    match fault.code {
        Code::InvalidValue => CUDA_ERROR_INVALID_VALUE,
        Code::InvalidHandle => CUDA_ERROR_INVALID_HANDLE,
        Code::InvalidContext => CUDA_ERROR_INVALID_CONTEXT,
        Code::InvalidDevice => CUDA_ERROR_INVALID_DEVICE,
        Code::OutOfMemory => CUDA_ERROR_OUT_OF_MEMORY,
        Code::NotReady => CUDA_ERROR_NOT_READY,
        Code::NoBinary => CUDA_ERROR_NO_BINARY_FOR_GPU,
        Code::InvalidImage => CUDA_ERROR_INVALID_IMAGE,
        Code::UnsupportedPtx => CUDA_ERROR_UNSUPPORTED_PTX_VERSION,
        Code::InvalidPtx => CUDA_ERROR_INVALID_PTX,
        Code::IllegalAddress => CUDA_ERROR_ILLEGAL_ADDRESS,
        Code::CaptureUnsupported => CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED,
        Code::CaptureInvalidated => CUDA_ERROR_STREAM_CAPTURE_INVALIDATED,
        Code::CaptureWrongThread => CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD,
        Code::NotFound => CUDA_ERROR_NOT_FOUND,
        Code::PeerAlreadyEnabled => CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED,
        Code::HostAlreadyRegistered => CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED,
        Code::HostNotRegistered => CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED,
        Code::NotInitialized => CUDA_ERROR_NOT_INITIALIZED,
        // `cuda.h`'s CUDA_ERROR_DEVICES_UNAVAILABLE.
        Code::DevicesUnavailable => 46,
    }
}

/// One entry point: `body` runs under the double's lock, after `cuInit` was called.
fn cuda(name: &str, args: String, body: impl FnOnce(&mut World) -> Outcome<()>) -> CUresult {
    let result = world::call(name, args, |world| {
        if !INITIALIZED.load(Ordering::Acquire) {
            return Err(Fault::violation(
                Code::NotInitialized,
                "called before cuInit",
            ));
        }
        body(world)
    });
    match result {
        Ok(()) => CUDA_SUCCESS,
        Err(fault) => code(&fault),
    }
}

#[no_mangle]
/// # Safety
/// `name` is null or valid for a write of a pointer.
pub unsafe extern "C" fn cuGetErrorName(error: CUresult, name: *mut *const c_char) -> CUresult {
    let text: &'static CStr = match error {
        CUDA_SUCCESS => c"CUDA_SUCCESS",
        CUDA_ERROR_INVALID_VALUE => c"CUDA_ERROR_INVALID_VALUE",
        CUDA_ERROR_OUT_OF_MEMORY => c"CUDA_ERROR_OUT_OF_MEMORY",
        CUDA_ERROR_NOT_INITIALIZED => c"CUDA_ERROR_NOT_INITIALIZED",
        CUDA_ERROR_INVALID_CONTEXT => c"CUDA_ERROR_INVALID_CONTEXT",
        CUDA_ERROR_INVALID_DEVICE => c"CUDA_ERROR_INVALID_DEVICE",
        CUDA_ERROR_INVALID_IMAGE => c"CUDA_ERROR_INVALID_IMAGE",
        CUDA_ERROR_INVALID_HANDLE => c"CUDA_ERROR_INVALID_HANDLE",
        CUDA_ERROR_NOT_FOUND => c"CUDA_ERROR_NOT_FOUND",
        CUDA_ERROR_NOT_READY => c"CUDA_ERROR_NOT_READY",
        CUDA_ERROR_ILLEGAL_ADDRESS => c"CUDA_ERROR_ILLEGAL_ADDRESS",
        CUDA_ERROR_LAUNCH_FAILED => c"CUDA_ERROR_LAUNCH_FAILED",
        CUDA_ERROR_NO_BINARY_FOR_GPU => c"CUDA_ERROR_NO_BINARY_FOR_GPU",
        CUDA_ERROR_UNSUPPORTED_PTX_VERSION => c"CUDA_ERROR_UNSUPPORTED_PTX_VERSION",
        CUDA_ERROR_INVALID_PTX => c"CUDA_ERROR_INVALID_PTX",
        CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED => c"CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED",
        CUDA_ERROR_STREAM_CAPTURE_INVALIDATED => c"CUDA_ERROR_STREAM_CAPTURE_INVALIDATED",
        CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED => c"CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED",
        46 => c"CUDA_ERROR_DEVICES_UNAVAILABLE",
        _ => c"CUDA_ERROR_UNKNOWN",
    };
    // SAFETY: the caller's out-pointer; a static string.
    match unsafe { put(name, text.as_ptr()) } {
        Ok(()) => CUDA_SUCCESS,
        Err(_) => CUDA_ERROR_INVALID_VALUE,
    }
}

#[no_mangle]
/// # Safety
/// None beyond `cuda.h`'s.
pub unsafe extern "C" fn cuInit(flags: c_uint) -> CUresult {
    INITIALIZED.store(true, Ordering::Release);
    cuda("cuInit", format!("flags={flags}"), |_| Ok(()))
}

fn device_attribute(world: &World, device: usize, attribute: CUdevice_attribute) -> c_int {
    let state = &world.devices[device];
    let (major, minor, _) = crate::image::sm_of(&state.chip).unwrap_or((0, 0, false));
    let (shared, optin) = state.shared_per_block();
    match attribute {
        CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK => 1024,
        CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X | CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y => 1024,
        CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z => 64,
        CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X => i32::MAX,
        CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y | CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z => 65535,
        CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK => shared as c_int,
        CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN => optin as c_int,
        CU_DEVICE_ATTRIBUTE_WARP_SIZE => 32,
        CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT => state.multiprocessors() as c_int,
        CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR => major as c_int,
        CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR => minor as c_int,
        // CU_COMPUTEMODE_PROHIBITED, CU_COMPUTEMODE_EXCLUSIVE_PROCESS.
        CU_DEVICE_ATTRIBUTE_COMPUTE_MODE if config().cuda_prohibited.contains(&state.ordinal) => 2,
        CU_DEVICE_ATTRIBUTE_COMPUTE_MODE if config().cuda_busy.contains(&state.ordinal) => 3,
        CU_DEVICE_ATTRIBUTE_CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM => {
            c_int::from(!config().mapped_registrations.contains(&Vendor::Cuda))
        }
        CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY
        | CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS
        | CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING
        | CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY => 1,
        _ => 0,
    }
}

fn ordinal(world: &World, device: CUdevice) -> Outcome<usize> {
    world.device_index(Vendor::Cuda, i64::from(device))
}

/// Async copies: memory the double knows is read when the copy runs; pageable host memory is
/// staged now (host to device) or copied once the stream reaches it (device to host), as the
/// driver does with pageable memory.
fn copy_async(
    world: &mut World,
    to: u64,
    from: u64,
    bytes: usize,
    stream: CUstream,
) -> Outcome<()> {
    let context = world.current_context()?;
    let stream = world.stream_in(id(stream), context)?;
    let (to, from) = (world.place(to), world.place(from));
    world.queue_copy(stream, to, from, bytes)
}

/// `cuModuleLoadData` and `cuModuleLoadDataEx`'s load.
fn load(world: &mut World, module: *mut CUmodule, image: *const c_void) -> Outcome<()> {
    let context = world.current_context()?;
    // SAFETY: the caller passes a complete image, as cuModuleLoadData requires.
    let bytes = unsafe { crate::image::image_bytes(image.cast()) }
        .map_err(|e| Fault::violation(Code::InvalidImage, e))?;
    let (loaded, kind) = world.load_module(context, bytes, Vendor::Cuda)?;
    crate::record::line(&format!("loaded module {loaded:#x}: {kind}"));
    // SAFETY: the caller's out-pointer.
    unsafe { put(module, handle(loaded)) }
}

fn copy_sync(world: &mut World, to: u64, from: u64, bytes: usize) -> Outcome<()> {
    world.refuse_during_capture("a synchronous copy")?;
    let context = world.current_context()?;
    let stream = world.stream_in(0, context)?;
    let (to, from) = (world.place(to), world.place(from));
    world.queue_copy(stream, to, from, bytes)?;
    world.synchronize_stream(stream)
}

fn fill(
    world: &mut World,
    to: CUdeviceptr,
    pattern: Pattern,
    count: usize,
    stream: Option<CUstream>,
) -> Outcome<()> {
    let context = world.current_context()?;
    if stream.is_none() {
        world.refuse_during_capture("a synchronous fill")?;
    }
    let queue = world.stream_in(stream.map_or(0, id), context)?;
    world.queue_fill(queue, to, pattern, count)?;
    if stream.is_none() {
        world.synchronize_stream(queue)?;
    }
    Ok(())
}

crate::abi::entry_points! {
    CUresult, cuda, CudaDriver, |w| also cuGetErrorName, cuInit;
    fn cuDriverGetVersion(version: *mut c_int) {
        // SAFETY: the caller's out-pointer.
        unsafe { put(version, config().cuda_version) }
    }
    fn cuDeviceGet(device: *mut CUdevice, ordinal_: c_int) {
        ordinal(w, ordinal_)?;
        // SAFETY: the caller's out-pointer.
        unsafe { put(device, ordinal_) }
    }
    fn cuDeviceGetCount(count: *mut c_int) {
        // SAFETY: the caller's out-pointer.
        unsafe { put(count, w.device_count(Vendor::Cuda) as c_int) }
    }
    fn cuDeviceGetName(name: *mut c_char, length: c_int, device: CUdevice) {
        let index = ordinal(w, device)?;
        let text = format!("GPU driver double ({})\0", w.devices[index].chip);
        if name.is_null() || (length as usize) < text.len() {
            return Err(Fault::violation(Code::InvalidValue, "a name buffer too small"));
        }
        // SAFETY: the caller's buffer holds `length` bytes, at least the text's.
        unsafe { std::ptr::copy_nonoverlapping(text.as_ptr(), name.cast::<u8>(), text.len()) };
        Ok(())
    }
    fn cuDeviceGetUuid_v2(uuid: *mut CUuuid, device: CUdevice) {
        let index = ordinal(w, device)?;
        let mut bytes = [0 as c_char; 16];
        bytes[0] = 0x5c;
        bytes[15] = index as c_char;
        // SAFETY: the caller's out-pointer.
        unsafe { put(uuid, CUuuid { bytes }) }
    }
    fn cuDeviceTotalMem_v2(bytes: *mut usize, device: CUdevice) {
        let index = ordinal(w, device)?;
        // SAFETY: the caller's out-pointer.
        unsafe { put(bytes, w.memory_info(index).1 as usize) }
    }
    fn cuDeviceGetAttribute(value: *mut c_int, attribute: CUdevice_attribute, device: CUdevice) {
        let index = ordinal(w, device)?;
        // SAFETY: the caller's out-pointer.
        unsafe { put(value, device_attribute(w, index, attribute)) }
    }
    fn cuDevicePrimaryCtxRetain(context: *mut CUcontext, device: CUdevice) {
        let index = ordinal(w, device)?;
        if context.is_null() {
            return Err(Fault::violation(Code::InvalidValue, "a null out-pointer"));
        }
        let state = &w.devices[index];
        if config().cuda_prohibited.contains(&state.ordinal) || config().cuda_busy.contains(&state.ordinal) {
            return Err(Fault::expected(Code::DevicesUnavailable, format!("device {device}'s compute mode lets this process make no context")));
        }
        let retained = w.retain_primary(index);
        // SAFETY: the caller's out-pointer, checked non-null.
        unsafe { put(context, handle(retained)) }
    }
    fn cuDevicePrimaryCtxRelease_v2(device: CUdevice) {
        let index = ordinal(w, device)?;
        w.release_primary(index)
    }
    fn cuCtxCreate_v2(context: *mut CUcontext, flags: c_uint, device: CUdevice) {
        let index = ordinal(w, device)?;
        if context.is_null() {
            return Err(Fault::violation(Code::InvalidValue, "a null out-pointer"));
        }
        let created = w.create_context(index);
        w.set_current_context(created)?;
        // SAFETY: the caller's out-pointer, checked non-null.
        unsafe { put(context, handle(created)) }
    }
    fn cuCtxDestroy_v2(context: CUcontext) {
        let target = id(context);
        if w.devices.iter().any(|d| d.primary == Some(target)) {
            return Err(Fault::violation(Code::InvalidContext, "cuCtxDestroy of a primary context (release it instead)"));
        }
        w.destroy_context(target)?;
        if World::current_context_raw() == target {
            w.set_current_context(0)?;
        }
        Ok(())
    }
    fn cuCtxSetCurrent(context: CUcontext) {
        w.set_current_context(id(context))
    }
    fn cuCtxGetCurrent(context: *mut CUcontext) {
        // SAFETY: the caller's out-pointer.
        unsafe { put(context, handle(World::current_context_raw())) }
    }
    fn cuCtxSynchronize() {
        w.refuse_during_capture("cuCtxSynchronize")?;
        let context = w.current_context()?;
        w.synchronize_context(context);
        Ok(())
    }
    fn cuModuleLoadData(module: *mut CUmodule, image: *const c_void) {
        load(w, module, image)
    }
    fn cuModuleLoadDataEx(module: *mut CUmodule, image: *const c_void, count: c_uint, options: *mut CUjit_option, values: *mut *mut c_void) {
        // The JIT options the double honours: the error log buffer and its size, which the
        // driver writes back as the bytes it used (the rest are accepted and ignored).
        let (mut log, mut size, mut size_slot): (*mut u8, usize, Option<usize>) = (std::ptr::null_mut(), 0, None);
        for i in 0..count as usize {
            // SAFETY: `count` options and as many values, as the call requires.
            let (option, value) = unsafe { (*options.add(i), *values.add(i)) };
            match option {
                CU_JIT_ERROR_LOG_BUFFER => log = value.cast(),
                CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES => (size, size_slot) = (value as usize, Some(i)),
                _ => {}
            }
        }
        let loaded = load(w, module, image);
        let text = match &loaded {
            Ok(()) => String::new(),
            Err(fault) => format!("ptxas fatal   : {}", fault.message),
        };
        if !log.is_null() && size > 0 {
            let used = text.len().min(size - 1);
            // SAFETY: the caller's log buffer of `size` bytes; `used` + 1 fit.
            unsafe {
                std::ptr::copy_nonoverlapping(text.as_ptr(), log, used);
                *log.add(used) = 0;
            }
            if let Some(i) = size_slot {
                // SAFETY: the option's value slot, which the driver writes the bytes used to.
                unsafe { *values.add(i) = std::ptr::without_provenance_mut(used + 1) };
            }
        }
        loaded
    }
    fn cuModuleUnload(module: CUmodule) {
        w.unload_module(id(module))
    }
    fn cuModuleGetFunction(function: *mut CUfunction, module: CUmodule, name: *const c_char) {
        if name.is_null() {
            return Err(Fault::violation(Code::InvalidValue, "a null kernel name"));
        }
        // SAFETY: a NUL-terminated name, as the call requires.
        let name = unsafe { CStr::from_ptr(name) }.to_string_lossy().into_owned();
        let found = w.function(id(module), &name)?;
        // SAFETY: the caller's out-pointer.
        unsafe { put(function, handle(found)) }
    }
    fn cuMemGetInfo_v2(free: *mut usize, total: *mut usize) {
        let device = w.device_of_context(w.current_context()?)?;
        let (available, all) = w.memory_info(device);
        // SAFETY: the caller's out-pointers.
        unsafe { put(free, available as usize)?; put(total, all as usize) }
    }
    fn cuMemAlloc_v2(pointer: *mut CUdeviceptr, bytes: usize) {
        let device = w.device_of_context(w.current_context()?)?;
        let base = w.allocate(device, bytes, MemoryKind::Device)?;
        // SAFETY: the caller's out-pointer.
        unsafe { put(pointer, base) }
    }
    fn cuMemFree_v2(pointer: CUdeviceptr) {
        w.current_context()?;
        w.free(pointer, &[MemoryKind::Device, MemoryKind::Managed])
    }
    fn cuMemAllocHost_v2(pointer: *mut *mut c_void, bytes: usize) {
        let device = w.device_of_context(w.current_context()?)?;
        let base = w.allocate(device, bytes, MemoryKind::Pinned)?;
        // SAFETY: the caller's out-pointer.
        unsafe { put(pointer, base as usize as *mut c_void) }
    }
    fn cuMemFreeHost(pointer: *mut c_void) {
        w.free(pointer as usize as u64, &[MemoryKind::Pinned])
    }
    fn cuMemAllocManaged(pointer: *mut CUdeviceptr, bytes: usize, flags: c_uint) {
        if flags != CU_MEM_ATTACH_GLOBAL && flags != CU_MEM_ATTACH_HOST {
            return Err(Fault::violation(Code::InvalidValue, format!("cuMemAllocManaged flags {flags}")));
        }
        let device = w.device_of_context(w.current_context()?)?;
        let base = w.allocate(device, bytes, MemoryKind::Managed)?;
        // SAFETY: the caller's out-pointer.
        unsafe { put(pointer, base) }
    }
    fn cuMemHostRegister_v2(pointer: *mut c_void, bytes: usize, flags: c_uint) {
        w.current_context()?;
        // CU_MEMHOSTREGISTER_DEVICEMAP (0x02) maps it for devices.
        w.register(Vendor::Cuda, pointer as usize as u64, bytes, flags & 0x02 != 0)
    }
    fn cuMemHostGetDevicePointer_v2(device: *mut CUdeviceptr, pointer: *mut c_void, flags: c_uint) {
        if flags != 0 {
            return Err(Fault::violation(Code::InvalidValue, format!("cuMemHostGetDevicePointer flags {flags} (must be 0)")));
        }
        let address = w.device_address(pointer as usize as u64)?;
        // SAFETY: the caller's out-pointer.
        unsafe { put(device, address) }
    }
    fn cuMemHostUnregister(pointer: *mut c_void) {
        w.current_context()?;
        w.unregister(pointer as usize as u64)
    }
    fn cuMemcpyHtoD_v2(to: CUdeviceptr, from: *const c_void, bytes: usize) {
        w.host_pointer(from as usize as u64, "the source of a host-to-device copy")?;
        copy_sync(w, to, from as usize as u64, bytes)
    }
    fn cuMemcpyDtoH_v2(to: *mut c_void, from: CUdeviceptr, bytes: usize) {
        w.host_pointer(to as usize as u64, "the target of a device-to-host copy")?;
        copy_sync(w, to as usize as u64, from, bytes)
    }
    fn cuMemcpyDtoD_v2(to: CUdeviceptr, from: CUdeviceptr, bytes: usize) {
        copy_sync(w, to, from, bytes)
    }
    fn cuMemcpyPeerAsync(to: CUdeviceptr, to_context: CUcontext, from: CUdeviceptr, from_context: CUcontext, bytes: usize, stream: CUstream) {
        let context = w.current_context()?;
        let (to_device, from_device) = (w.device_of_context(id(to_context))?, w.device_of_context(id(from_context))?);
        w.check_on_device(to, bytes, to_device)?;
        w.check_on_device(from, bytes, from_device)?;
        let queue = w.stream_in(id(stream), context)?;
        w.queue_peer_copy(queue, to, from, bytes)
    }
    fn cuMemcpyHtoDAsync_v2(to: CUdeviceptr, from: *const c_void, bytes: usize, stream: CUstream) {
        w.host_pointer(from as usize as u64, "the source of a host-to-device copy")?;
        copy_async(w, to, from as usize as u64, bytes, stream)
    }
    fn cuMemcpyDtoHAsync_v2(to: *mut c_void, from: CUdeviceptr, bytes: usize, stream: CUstream) {
        w.host_pointer(to as usize as u64, "the target of a device-to-host copy")?;
        copy_async(w, to as usize as u64, from, bytes, stream)
    }
    fn cuMemcpyDtoDAsync_v2(to: CUdeviceptr, from: CUdeviceptr, bytes: usize, stream: CUstream) {
        copy_async(w, to, from, bytes, stream)
    }
    fn cuMemsetD8_v2(to: CUdeviceptr, value: u8, count: usize) {
        fill(w, to, Pattern::U8(value), count, None)
    }
    fn cuMemsetD16_v2(to: CUdeviceptr, value: u16, count: usize) {
        fill(w, to, Pattern::U16(value), count, None)
    }
    fn cuMemsetD32_v2(to: CUdeviceptr, value: c_uint, count: usize) {
        fill(w, to, Pattern::U32(value), count, None)
    }
    fn cuMemsetD8Async(to: CUdeviceptr, value: u8, count: usize, stream: CUstream) {
        fill(w, to, Pattern::U8(value), count, Some(stream))
    }
    fn cuMemsetD16Async(to: CUdeviceptr, value: u16, count: usize, stream: CUstream) {
        fill(w, to, Pattern::U16(value), count, Some(stream))
    }
    fn cuMemsetD32Async(to: CUdeviceptr, value: c_uint, count: usize, stream: CUstream) {
        fill(w, to, Pattern::U32(value), count, Some(stream))
    }
    fn cuStreamCreate(stream: *mut CUstream, flags: c_uint) {
        let context = w.current_context()?;
        let created = w.create_stream(context, flags & CU_STREAM_NON_BLOCKING == 0)?;
        // SAFETY: the caller's out-pointer.
        unsafe { put(stream, handle(created)) }
    }
    fn cuStreamWaitEvent(stream: CUstream, event: CUevent, flags: c_uint) {
        let context = w.current_context()?;
        w.stream_wait_event(id(stream), id(event), context)
    }
    fn cuStreamBeginCapture_v2(stream: CUstream, mode: CUstreamCaptureMode) {
        if mode != CU_STREAM_CAPTURE_MODE_THREAD_LOCAL {
            return Err(Fault::violation(Code::InvalidValue, format!("capture mode {mode}: the double models thread-local capture only")));
        }
        let context = w.current_context()?;
        let stream = w.stream_in(id(stream), context)?;
        w.begin_capture(stream)
    }
    fn cuStreamEndCapture(stream: CUstream, graph: *mut CUgraph) {
        if graph.is_null() {
            return Err(Fault::violation(Code::InvalidValue, "a null out-pointer"));
        }
        let ended = w.end_capture(id(stream));
        // SAFETY: the caller's out-pointer, checked non-null: null when the capture failed.
        unsafe { put(graph, handle(*ended.as_ref().unwrap_or(&0)))? };
        ended.map(|_| ())
    }
    fn cuStreamSynchronize(stream: CUstream) {
        let context = w.current_context()?;
        let queue = w.stream_in(id(stream), context)?;
        if id(stream) == 0 {
            w.refuse_during_capture("synchronizing the legacy default stream")?;
        }
        w.synchronize_stream(queue)
    }
    fn cuStreamDestroy_v2(stream: CUstream) {
        w.destroy_stream(id(stream))
    }
    fn cuEventCreate(event: *mut CUevent, flags: c_uint) {
        let context = w.current_context()?;
        let created = w.create_event(context, flags & CU_EVENT_DISABLE_TIMING == 0)?;
        // SAFETY: the caller's out-pointer.
        unsafe { put(event, handle(created)) }
    }
    fn cuEventRecord(event: CUevent, stream: CUstream) {
        w.record_event(id(event), id(stream))
    }
    fn cuEventQuery(event: CUevent) {
        w.synchronize_event(id(event))
    }
    fn cuEventSynchronize(event: CUevent) {
        w.synchronize_event(id(event))
    }
    fn cuEventDestroy_v2(event: CUevent) {
        w.destroy_event(id(event))
    }
    fn cuEventElapsedTime(milliseconds: *mut f32, start: CUevent, end: CUevent) {
        let elapsed = w.elapsed_ms(id(start), id(end))?;
        // SAFETY: the caller's out-pointer.
        unsafe { put(milliseconds, elapsed) }
    }
    fn cuFuncGetAttribute(value: *mut c_int, attribute: CUfunction_attribute, function: CUfunction) {
        let kernel = w.kernel(id(function))?;
        let answer = match attribute {
            CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK => kernel.max_threads as c_int,
            CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES => kernel.static_shared as c_int,
            CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES => kernel.local_bytes as c_int,
            CU_FUNC_ATTRIBUTE_NUM_REGS => kernel.registers as c_int,
            other => return Err(Fault::violation(Code::InvalidValue, format!("function attribute {other} is not modelled"))),
        };
        // SAFETY: the caller's out-pointer.
        unsafe { put(value, answer) }
    }
    fn cuFuncSetAttribute(function: CUfunction, attribute: CUfunction_attribute, value: c_int) {
        if attribute != CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES || value < 0 {
            return Err(Fault::violation(Code::InvalidValue, format!("setting function attribute {attribute} to {value}")));
        }
        w.allow_dynamic_shared(id(function), value as u64)
    }
    fn cuLaunchKernel(function: CUfunction, grid_x: c_uint, grid_y: c_uint, grid_z: c_uint, block_x: c_uint, block_y: c_uint, block_z: c_uint, shared: c_uint, stream: CUstream, params: *mut *mut c_void, extra: *mut *mut c_void) {
        let context = w.current_context()?;
        let request = LaunchRequest { function: id(function), grid: [grid_x, grid_y, grid_z], block: [block_x, block_y, block_z], shared, stream: id(stream), params, extra };
        // SAFETY: `params` as cuLaunchKernel requires of its caller.
        let launched = unsafe { w.launch(context, &request) }?;
        crate::record::line(&format!("launch {launched}"));
        Ok(())
    }
    fn cuGraphInstantiateWithFlags(executable: *mut CUgraphExec, graph: CUgraph, flags: c_ulonglong) {
        let made = w.instantiate(id(graph))?;
        // SAFETY: the caller's out-pointer.
        unsafe { put(executable, handle(made)) }
    }
    fn cuGraphLaunch(executable: CUgraphExec, stream: CUstream) {
        let nodes = w.launch_graph(id(executable), id(stream))?;
        crate::record::line(&format!("graph launch of {nodes} nodes"));
        Ok(())
    }
    fn cuGraphExecDestroy(executable: CUgraphExec) {
        w.destroy_executable(id(executable))
    }
    fn cuGraphDestroy(graph: CUgraph) {
        w.destroy_graph(id(graph))
    }
    fn cuOccupancyMaxPotentialBlockSize(grid: *mut c_int, block: *mut c_int, function: CUfunction, shared_of_block: CUoccupancyB2DSize, dynamic_shared: usize, block_limit: c_int) {
        if shared_of_block.is_some() {
            return Err(Fault::violation(Code::InvalidValue, "a block-size-to-shared-memory callback is not modelled"));
        }
        let (mut size, minimum) = w.potential_block_size(id(function), dynamic_shared as u64)?;
        if block_limit > 0 {
            size = size.min(block_limit);
        }
        // SAFETY: the caller's out-pointers.
        unsafe { put(grid, minimum)?; put(block, size) }
    }
    fn cuCtxEnablePeerAccess(peer: CUcontext, flags: c_uint) {
        let device = w.device_of_context(w.current_context()?)?;
        let peer_device = w.device_of_context(id(peer))?;
        w.enable_peer(device, peer_device)
    }
}
