//! The HIP runtime's entry points, as the HIP headers declare them (checked at compile time
//! against gpu-embed's generated bindings; `hipGetDevicePropertiesR0600` against ROCm 6's), over
//! the shared state (`world/`). HIP's rules added here: a current device per thread (device 0
//! until `hipSetDevice`), whose context every call works in, and each `hipError_t`.

#![allow(non_upper_case_globals)] // HIP's own names

use crate::abi::hip::*;
use crate::abi::hip_r0600::{hipDeviceProp_tR0600, HipR0600};
use crate::abi::{handle, id, put};
use crate::world::{self, Code, Fault, LaunchRequest, MemoryKind, Outcome, Pattern, Vendor, World};
use std::ffi::{c_char, c_int, c_uint, c_void, CStr};

fn code(fault: &Fault) -> hipError_t {
    if let Some(injected) = fault.injected {
        return injected as hipError_t;
    }
    match fault.code {
        Code::InvalidValue => hipErrorInvalidValue,
        Code::InvalidHandle => hipErrorInvalidHandle,
        Code::InvalidContext => hipErrorInvalidContext,
        Code::InvalidDevice => hipErrorInvalidDevice,
        Code::OutOfMemory => hipErrorOutOfMemory,
        Code::NotReady => hipErrorNotReady,
        Code::NoBinary => hipErrorNoBinaryForGpu,
        Code::InvalidImage | Code::UnsupportedPtx | Code::InvalidPtx => hipErrorInvalidImage,
        Code::IllegalAddress => hipErrorIllegalAddress,
        Code::CaptureUnsupported => hipErrorStreamCaptureUnsupported,
        Code::CaptureInvalidated => hipErrorStreamCaptureInvalidated,
        Code::CaptureWrongThread => hipErrorStreamCaptureWrongThread,
        Code::NotFound => hipErrorNotFound,
        Code::PeerAlreadyEnabled => hipErrorPeerAccessAlreadyEnabled,
        Code::HostAlreadyRegistered => hipErrorHostMemoryAlreadyRegistered,
        Code::HostNotRegistered => hipErrorHostMemoryNotRegistered,
        Code::NotInitialized => hipErrorNotInitialized,
        Code::DevicesUnavailable => hipErrorNoDevice,
    }
}

fn hip(name: &str, args: String, body: impl FnOnce(&mut World) -> Outcome<()>) -> hipError_t {
    match world::call(name, args, body) {
        Ok(()) => hipSuccess,
        Err(fault) => code(&fault),
    }
}

#[no_mangle]
/// # Safety
/// None: any code gets a static string.
pub unsafe extern "C" fn hipGetErrorName(error: hipError_t) -> *const c_char {
    let text: &'static CStr = match error {
        hipSuccess => c"hipSuccess",
        hipErrorInvalidValue => c"hipErrorInvalidValue",
        hipErrorOutOfMemory => c"hipErrorOutOfMemory",
        hipErrorInvalidDevice => c"hipErrorInvalidDevice",
        hipErrorInvalidImage => c"hipErrorInvalidImage",
        hipErrorInvalidHandle => c"hipErrorInvalidHandle",
        hipErrorNotFound => c"hipErrorNotFound",
        hipErrorNotReady => c"hipErrorNotReady",
        hipErrorIllegalAddress => c"hipErrorIllegalAddress",
        hipErrorLaunchFailure => c"hipErrorLaunchFailure",
        hipErrorNoBinaryForGpu => c"hipErrorNoBinaryForGpu",
        hipErrorStreamCaptureUnsupported => c"hipErrorStreamCaptureUnsupported",
        hipErrorStreamCaptureInvalidated => c"hipErrorStreamCaptureInvalidated",
        hipErrorPeerAccessAlreadyEnabled => c"hipErrorPeerAccessAlreadyEnabled",
        _ => c"hipErrorUnknown",
    };
    text.as_ptr()
}

/// The properties both layouts share, by name.
macro_rules! fill_properties {
    ($properties:expr, $world:expr, $index:expr) => {{
        let device = &$world.devices[$index];
        let p = &mut $properties;
        let name = format!("GPU driver double ({})", device.chip);
        for (slot, byte) in p.name.iter_mut().zip(name.bytes().chain([0])) {
            *slot = byte as c_char;
        }
        for (slot, byte) in p.gcnArchName.iter_mut().zip(device.chip.bytes().chain([0])) {
            *slot = byte as c_char;
        }
        p.totalGlobalMem = $world.memory_info($index).1 as usize;
        p.sharedMemPerBlock = device.shared_per_block().0 as usize;
        p.warpSize = device.warp_size() as c_int;
        p.maxThreadsPerBlock = 1024;
        p.maxThreadsDim = [1024, 1024, 1024];
        p.maxGridSize = [i32::MAX, 65535, 65535];
        p.multiProcessorCount = device.multiprocessors() as c_int;
        p.managedMemory = 1;
        p.concurrentManagedAccess = 1;
    }};
}

#[no_mangle]
/// # Safety
/// `properties` is null or valid for a write of ROCm 6's `hipDeviceProp_tR0600`.
pub unsafe extern "C" fn hipGetDevicePropertiesR0600(
    properties: *mut hipDeviceProp_tR0600,
    device: c_int,
) -> hipError_t {
    hip(
        "hipGetDevicePropertiesR0600",
        format!("device={device}"),
        |w| {
            let index = w.device_index(Vendor::Hip, i64::from(device))?;
            let mut filled = hipDeviceProp_tR0600::default();
            fill_properties!(filled, w, index);
            // SAFETY: the caller's out-pointer.
            unsafe { put(properties, filled) }
        },
    )
}
crate::abi::check_signatures!(HipR0600 => hipGetDevicePropertiesR0600);

/// The stream a caller names, in the current device's context.
fn stream_of(world: &World, stream: hipStream_t) -> Outcome<(u64, u64)> {
    let current = world.hip_context()?;
    let context = world.stream_context(id(stream), current)?;
    Ok((context, world.stream_in(id(stream), context)?))
}

fn copy(
    world: &mut World,
    to: u64,
    from: u64,
    bytes: usize,
    stream: Option<hipStream_t>,
) -> Outcome<()> {
    if stream.is_none() {
        world.refuse_during_capture("a synchronous copy")?;
    }
    let (_, queue) = stream_of(world, stream.unwrap_or(std::ptr::null_mut()))?;
    let (to, from) = (world.place(to), world.place(from));
    world.queue_copy(queue, to, from, bytes)?;
    if stream.is_none() {
        world.synchronize_stream(queue)?;
    }
    Ok(())
}

fn fill(
    world: &mut World,
    to: hipDeviceptr_t,
    pattern: Pattern,
    count: usize,
    stream: Option<hipStream_t>,
) -> Outcome<()> {
    if stream.is_none() {
        world.refuse_during_capture("a synchronous fill")?;
    }
    let (_, queue) = stream_of(world, stream.unwrap_or(std::ptr::null_mut()))?;
    world.queue_fill(queue, id(to), pattern, count)?;
    if stream.is_none() {
        world.synchronize_stream(queue)?;
    }
    Ok(())
}

fn current_device(world: &World) -> Outcome<usize> {
    world.device_of_context(world.hip_context()?)
}

crate::abi::entry_points! {
    hipError_t, hip, HipRuntime, |w| also hipGetErrorName;
    fn hipInit(flags: c_uint) {
        Ok(())
    }
    fn hipRuntimeGetVersion(version: *mut c_int) {
        // SAFETY: the caller's out-pointer.
        unsafe { put(version, crate::config::config().hip_version) }
    }
    fn hipDeviceGetUuid(uuid: *mut hipUUID, device: hipDevice_t) {
        let index = w.device_index(Vendor::Hip, i64::from(device))?;
        let mut bytes = [0 as c_char; 16];
        bytes[0] = 0x4d;
        bytes[15] = index as c_char;
        // SAFETY: the caller's out-pointer.
        unsafe { put(uuid, hipUUID { bytes }) }
    }
    fn hipDeviceSynchronize() {
        w.refuse_during_capture("hipDeviceSynchronize")?;
        let context = w.hip_context()?;
        w.synchronize_context(context);
        Ok(())
    }
    fn hipSetDevice(device: c_int) {
        w.set_hip_device(i64::from(device))
    }
    fn hipGetDevice(device: *mut c_int) {
        // SAFETY: the caller's out-pointer.
        unsafe { put(device, World::hip_current_device() as c_int) }
    }
    fn hipGetDeviceCount(count: *mut c_int) {
        // SAFETY: the caller's out-pointer.
        unsafe { put(count, w.device_count(Vendor::Hip) as c_int) }
    }
    fn hipGetDeviceProperties(properties: *mut hipDeviceProp_t, device: c_int) {
        let index = w.device_index(Vendor::Hip, i64::from(device))?;
        let mut filled = hipDeviceProp_t::default();
        fill_properties!(filled, w, index);
        // SAFETY: the caller's out-pointer.
        unsafe { put(properties, filled) }
    }
    fn hipStreamCreate(stream: *mut hipStream_t) {
        let created = w.create_stream(w.hip_context()?, true)?;
        // SAFETY: the caller's out-pointer.
        unsafe { put(stream, handle(created)) }
    }
    fn hipStreamCreateWithFlags(stream: *mut hipStream_t, flags: c_uint) {
        let created = w.create_stream(w.hip_context()?, flags & hipStreamNonBlocking == 0)?;
        // SAFETY: the caller's out-pointer.
        unsafe { put(stream, handle(created)) }
    }
    fn hipStreamDestroy(stream: hipStream_t) {
        w.destroy_stream(id(stream))
    }
    fn hipStreamSynchronize(stream: hipStream_t) {
        if id(stream) == 0 {
            w.refuse_during_capture("synchronizing the null stream")?;
        }
        let (_, queue) = stream_of(w, stream)?;
        w.synchronize_stream(queue)
    }
    fn hipStreamWaitEvent(stream: hipStream_t, event: hipEvent_t, flags: c_uint) {
        let (context, _) = stream_of(w, stream)?;
        w.stream_wait_event(id(stream), id(event), context)
    }
    fn hipEventCreateWithFlags(event: *mut hipEvent_t, flags: c_uint) {
        let created = w.create_event(w.hip_context()?, flags & hipEventDisableTiming == 0)?;
        // SAFETY: the caller's out-pointer.
        unsafe { put(event, handle(created)) }
    }
    fn hipEventCreate(event: *mut hipEvent_t) {
        let created = w.create_event(w.hip_context()?, true)?;
        // SAFETY: the caller's out-pointer.
        unsafe { put(event, handle(created)) }
    }
    fn hipEventRecord(event: hipEvent_t, stream: hipStream_t) {
        w.record_event(id(event), id(stream))
    }
    fn hipEventDestroy(event: hipEvent_t) {
        w.destroy_event(id(event))
    }
    fn hipEventSynchronize(event: hipEvent_t) {
        w.synchronize_event(id(event))
    }
    fn hipEventElapsedTime(milliseconds: *mut f32, start: hipEvent_t, stop: hipEvent_t) {
        let elapsed = w.elapsed_ms(id(start), id(stop))?;
        // SAFETY: the caller's out-pointer.
        unsafe { put(milliseconds, elapsed) }
    }
    fn hipEventQuery(event: hipEvent_t) {
        w.synchronize_event(id(event))
    }
    fn hipMalloc(pointer: *mut *mut c_void, bytes: usize) {
        let base = w.allocate(current_device(w)?, bytes, MemoryKind::Device)?;
        // SAFETY: the caller's out-pointer.
        unsafe { put(pointer, handle(base)) }
    }
    fn hipHostMalloc(pointer: *mut *mut c_void, bytes: usize, flags: c_uint) {
        let base = w.allocate(current_device(w)?, bytes, MemoryKind::Pinned)?;
        // SAFETY: the caller's out-pointer.
        unsafe { put(pointer, handle(base)) }
    }
    fn hipMallocManaged(pointer: *mut *mut c_void, bytes: usize, flags: c_uint) {
        if flags != hipMemAttachGlobal {
            return Err(Fault::violation(Code::InvalidValue, format!("hipMallocManaged flags {flags}")));
        }
        let base = w.allocate(current_device(w)?, bytes, MemoryKind::Managed)?;
        // SAFETY: the caller's out-pointer.
        unsafe { put(pointer, handle(base)) }
    }
    fn hipHostRegister(pointer: *mut c_void, bytes: usize, flags: c_uint) {
        // hipHostRegisterMapped (0x02) maps it for devices.
        w.register(Vendor::Hip, id(pointer), bytes, flags & 0x02 != 0)
    }
    fn hipHostGetDevicePointer(device: *mut *mut c_void, pointer: *mut c_void, flags: c_uint) {
        if flags != 0 {
            return Err(Fault::violation(Code::InvalidValue, format!("hipHostGetDevicePointer flags {flags} (must be 0)")));
        }
        let address = w.device_address(id(pointer))?;
        // SAFETY: the caller's out-pointer.
        unsafe { put(device, handle(address)) }
    }
    fn hipHostUnregister(pointer: *mut c_void) {
        w.unregister(id(pointer))
    }
    fn hipFree(pointer: *mut c_void) {
        if pointer.is_null() {
            return Ok(());
        }
        w.free(id(pointer), &[MemoryKind::Device, MemoryKind::Managed])
    }
    fn hipHostFree(pointer: *mut c_void) {
        w.free(id(pointer), &[MemoryKind::Pinned])
    }
    fn hipMemcpyHtoD(to: hipDeviceptr_t, from: *mut c_void, bytes: usize) {
        w.host_pointer(id(from), "the source of a host-to-device copy")?;
        copy(w, id(to), id(from), bytes, None)
    }
    fn hipMemcpyDtoH(to: *mut c_void, from: hipDeviceptr_t, bytes: usize) {
        w.host_pointer(id(to), "the target of a device-to-host copy")?;
        copy(w, id(to), id(from), bytes, None)
    }
    fn hipMemcpyDtoD(to: hipDeviceptr_t, from: hipDeviceptr_t, bytes: usize) {
        copy(w, id(to), id(from), bytes, None)
    }
    fn hipMemcpyHtoDAsync(to: hipDeviceptr_t, from: *mut c_void, bytes: usize, stream: hipStream_t) {
        w.host_pointer(id(from), "the source of a host-to-device copy")?;
        copy(w, id(to), id(from), bytes, Some(stream))
    }
    fn hipMemcpyDtoHAsync(to: *mut c_void, from: hipDeviceptr_t, bytes: usize, stream: hipStream_t) {
        w.host_pointer(id(to), "the target of a device-to-host copy")?;
        copy(w, id(to), id(from), bytes, Some(stream))
    }
    fn hipMemcpyDtoDAsync(to: hipDeviceptr_t, from: hipDeviceptr_t, bytes: usize, stream: hipStream_t) {
        copy(w, id(to), id(from), bytes, Some(stream))
    }
    fn hipMemsetD8(to: hipDeviceptr_t, value: u8, count: usize) {
        fill(w, to, Pattern::U8(value), count, None)
    }
    fn hipMemsetD8Async(to: hipDeviceptr_t, value: u8, count: usize, stream: hipStream_t) {
        fill(w, to, Pattern::U8(value), count, Some(stream))
    }
    fn hipMemsetD16(to: hipDeviceptr_t, value: u16, count: usize) {
        fill(w, to, Pattern::U16(value), count, None)
    }
    fn hipMemsetD16Async(to: hipDeviceptr_t, value: u16, count: usize, stream: hipStream_t) {
        fill(w, to, Pattern::U16(value), count, Some(stream))
    }
    fn hipMemsetD32(to: hipDeviceptr_t, value: c_int, count: usize) {
        fill(w, to, Pattern::U32(value as u32), count, None)
    }
    fn hipMemsetD32Async(to: hipDeviceptr_t, value: c_int, count: usize, stream: hipStream_t) {
        fill(w, to, Pattern::U32(value as u32), count, Some(stream))
    }
    fn hipMemGetInfo(free: *mut usize, total: *mut usize) {
        let (available, all) = w.memory_info(current_device(w)?);
        // SAFETY: the caller's out-pointers.
        unsafe { put(free, available as usize)?; put(total, all as usize) }
    }
    fn hipDeviceEnablePeerAccess(peer: c_int, flags: c_uint) {
        let peer = w.device_index(Vendor::Hip, i64::from(peer))?;
        w.enable_peer(current_device(w)?, peer)
    }
    fn hipMemcpyPeerAsync(to: *mut c_void, to_device: c_int, from: *const c_void, from_device: c_int, bytes: usize, stream: hipStream_t) {
        let to_index = w.device_index(Vendor::Hip, i64::from(to_device))?;
        let from_index = w.device_index(Vendor::Hip, i64::from(from_device))?;
        w.check_on_device(id(to), bytes, to_index)?;
        w.check_on_device(from as usize as u64, bytes, from_index)?;
        let (_, queue) = stream_of(w, stream)?;
        w.queue_peer_copy(queue, id(to), from as usize as u64, bytes)
    }
    fn hipModuleUnload(module: hipModule_t) {
        w.unload_module(id(module))
    }
    fn hipModuleGetFunction(function: *mut hipFunction_t, module: hipModule_t, name: *const c_char) {
        if name.is_null() {
            return Err(Fault::violation(Code::InvalidValue, "a null kernel name"));
        }
        // SAFETY: a NUL-terminated name, as the call requires.
        let name = unsafe { CStr::from_ptr(name) }.to_string_lossy().into_owned();
        let found = w.function(id(module), &name)?;
        // SAFETY: the caller's out-pointer.
        unsafe { put(function, handle(found)) }
    }
    fn hipFuncGetAttribute(value: *mut c_int, attribute: hipFunction_attribute, function: hipFunction_t) {
        let kernel = w.kernel(id(function))?;
        let answer = match attribute {
            HIP_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK => kernel.max_threads as c_int,
            HIP_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES => kernel.static_shared as c_int,
            HIP_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES => kernel.local_bytes as c_int,
            HIP_FUNC_ATTRIBUTE_NUM_REGS => kernel.registers as c_int,
            other => return Err(Fault::violation(Code::InvalidValue, format!("function attribute {other} is not modelled"))),
        };
        // SAFETY: the caller's out-pointer.
        unsafe { put(value, answer) }
    }
    fn hipModuleLoadData(module: *mut hipModule_t, image: *const c_void) {
        let context = w.hip_context()?;
        // SAFETY: the caller passes a complete image, as hipModuleLoadData requires.
        let bytes = unsafe { crate::image::image_bytes(image.cast()) }.map_err(|e| Fault::violation(Code::InvalidImage, e))?;
        let (loaded, kind) = w.load_module(context, bytes, Vendor::Hip)?;
        crate::record::line(&format!("loaded module {loaded:#x}: {kind}"));
        // SAFETY: the caller's out-pointer.
        unsafe { put(module, handle(loaded)) }
    }
    fn hipModuleLaunchKernel(function: hipFunction_t, grid_x: c_uint, grid_y: c_uint, grid_z: c_uint, block_x: c_uint, block_y: c_uint, block_z: c_uint, shared: c_uint, stream: hipStream_t, params: *mut *mut c_void, extra: *mut *mut c_void) {
        let (context, _) = stream_of(w, stream)?;
        let request = LaunchRequest { function: id(function), grid: [grid_x, grid_y, grid_z], block: [block_x, block_y, block_z], shared, stream: id(stream), params, extra };
        // SAFETY: `params` as hipModuleLaunchKernel requires of its caller.
        let launched = unsafe { w.launch(context, &request) }?;
        crate::record::line(&format!("launch {launched}"));
        Ok(())
    }
    fn hipModuleOccupancyMaxPotentialBlockSize(grid: *mut c_int, block: *mut c_int, function: hipFunction_t, dynamic_shared: usize, block_limit: c_int) {
        let (mut size, minimum) = w.potential_block_size(id(function), dynamic_shared as u64)?;
        if block_limit > 0 {
            size = size.min(block_limit);
        }
        // SAFETY: the caller's out-pointers.
        unsafe { put(grid, minimum)?; put(block, size) }
    }
    fn hipStreamBeginCapture(stream: hipStream_t, mode: hipStreamCaptureMode) {
        if mode != hipStreamCaptureModeThreadLocal {
            return Err(Fault::violation(Code::InvalidValue, format!("capture mode {mode}: the double models thread-local capture only")));
        }
        let (_, queue) = stream_of(w, stream)?;
        w.begin_capture(queue)
    }
    fn hipStreamEndCapture(stream: hipStream_t, graph: *mut hipGraph_t) {
        if graph.is_null() {
            return Err(Fault::violation(Code::InvalidValue, "a null out-pointer"));
        }
        let ended = w.end_capture(id(stream));
        // SAFETY: the caller's out-pointer, checked non-null: null when the capture failed.
        unsafe { put(graph, handle(*ended.as_ref().unwrap_or(&0)))? };
        ended.map(|_| ())
    }
    fn hipGraphDestroy(graph: hipGraph_t) {
        w.destroy_graph(id(graph))
    }
    fn hipGraphInstantiate(executable: *mut hipGraphExec_t, graph: hipGraph_t, error_node: *mut hipGraphNode_t, log: *mut c_char, log_size: usize) {
        let made = w.instantiate(id(graph))?;
        // SAFETY: the caller's out-pointer.
        unsafe { put(executable, handle(made)) }
    }
    fn hipGraphLaunch(executable: hipGraphExec_t, stream: hipStream_t) {
        let nodes = w.launch_graph(id(executable), id(stream))?;
        crate::record::line(&format!("graph launch of {nodes} nodes"));
        Ok(())
    }
    fn hipGraphExecDestroy(executable: hipGraphExec_t) {
        w.destroy_executable(id(executable))
    }
}
