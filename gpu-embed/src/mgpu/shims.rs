//! The exported `mgpu*` C functions for modules, launches, streams, events and memory: each
//! takes the program's opaque pointers back through the runtime's tables (`state.rs`) and
//! reports a failure on stderr, as upstream's wrappers do.

use super::registered::REGISTERED_OBJECTS;
use super::state::{use_device, with_runtime, Function, Module};
use super::timing::{launch_timed, Launch};
use super::vulkan::{launch_vulkan, staged_kernels};
use super::{invalid, lock, report};
use crate::binary::Vendor;
use crate::device::Device;
use crate::driver::{Allocating, Origin};
use crate::driver::{HostMemory, Pattern};
use crate::error::Result;
use gpu_manifest::host_image;
use std::cell::Cell;
use std::collections::HashMap;
use std::ffi::{c_char, c_void, CStr};
use std::sync::{Arc, RwLock};

fn load(image: &[u8], what: &str) -> *mut c_void {
    let loaded = with_runtime(|runtime, driver| {
        let module = if driver.needs_registered_abi() {
            let registered = lock(&REGISTERED_OBJECTS);
            let found = registered
                .iter()
                .find(|r| r.object.bytes() == image && r.object.vendor() == driver.vendor())
                .ok_or_else(|| {
                    invalid(format!(
                        "loading {what} on {}: no {} object with these {} bytes was \
                         registered (a runner registers each object's kernel ABI from its \
                         gpu-build manifest with gpu_embed::mgpu::register_object, as \
                         `gpu-build run` does)",
                        runtime.device.name(),
                        driver.vendor(),
                        image.len()
                    ))
                })?;
            let staged_kernels = match found.object.vendor() {
                Vendor::Vulkan => Some(staged_kernels(found.object)?),
                _ => None,
            };
            Module {
                handle: driver.load_module(found.object)?,
                kernels: found.param_sizes.clone(),
                staged_kernels,
            }
        } else {
            let handle = driver.load_image(image, what)?;
            let kernels = if host_image::is_host_image(image) {
                host_image_kernels(image)?
            } else {
                HashMap::new()
            };
            Module {
                handle,
                kernels,
                staged_kernels: None,
            }
        };
        runtime.handed_out = true;
        Ok(runtime.modules.insert(module))
    });
    report("mgpuModuleLoad", loaded).unwrap_or(std::ptr::null_mut())
}

/// A host image's kernels' parameter sizes, by name, from its manifest.
fn host_image_kernels(image: &[u8]) -> Result<HashMap<String, Vec<usize>>> {
    let (manifest, _) = host_image::decode(image).map_err(|e| invalid(e.to_string()))?;
    Ok(manifest
        .modules
        .iter()
        .flat_map(|m| &m.kernels)
        .map(|kernel| {
            let sizes = kernel
                .params
                .iter()
                .map(|p| p.storage().map_or(8, |s| s.size))
                .collect();
            (kernel.name.clone(), sizes)
        })
        .collect())
}

/// Loads a module from an object (cubin, hsaco, host image) of `size` bytes.
///
/// # Safety
/// `data` holds `size` readable bytes.
#[no_mangle]
pub unsafe extern "C" fn mgpuModuleLoad(data: *mut c_void, size: usize) -> *mut c_void {
    // SAFETY: the caller's guarantee.
    let image = unsafe { std::slice::from_raw_parts(data.cast::<u8>(), size) };
    load(image, "a gpu.binary object")
}

/// Loads a module from NUL-terminated PTX (the driver compiles it; `opt_level` is left to it).
///
/// # Safety
/// `data` is a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn mgpuModuleLoadJIT(data: *mut c_void, _opt_level: i32) -> *mut c_void {
    // SAFETY: the caller's guarantee.
    let text = unsafe { CStr::from_ptr(data.cast::<c_char>()) };
    load(text.to_bytes_with_nul(), "a gpu.binary's PTX")
}

/// Unloads a module, after the device's queued work.
///
/// # Safety
/// `module` came from `mgpuModuleLoad` and is not used afterwards.
#[no_mangle]
pub unsafe extern "C" fn mgpuModuleUnload(module: *mut c_void) {
    if module.is_null() {
        return;
    }
    let unloaded = with_runtime(|runtime, driver| {
        let unloaded = runtime.modules.remove(module)?;
        runtime
            .functions
            .retain(|function| function.module != module.addr());
        driver.unload_module(unloaded.handle);
        Ok(())
    });
    report("mgpuModuleUnload", unloaded);
}

/// The kernel `name` of a module.
///
/// # Safety
/// `module` came from `mgpuModuleLoad`; `name` is a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn mgpuModuleGetFunction(
    module: *mut c_void,
    name: *const c_char,
) -> *mut c_void {
    // SAFETY: the caller's guarantee.
    let name = unsafe { CStr::from_ptr(name) }.to_string_lossy();
    let function = with_runtime(|runtime, driver| {
        if module.is_null() {
            return Err(invalid(format!(
                "kernel `{name}` of a module that did not load"
            )));
        }
        let loaded = runtime.modules.get(module)?;
        let function = Function {
            handle: driver.function(&loaded.handle, &name)?,
            module: module.addr(),
            param_sizes: loaded.kernels.get(name.as_ref()).cloned(),
            vulkan: match &loaded.staged_kernels {
                Some(kernels) => Some(
                    kernels
                        .iter()
                        .find(|kernel| kernel.name == name)
                        .cloned()
                        .ok_or_else(|| {
                            invalid(format!("the Vulkan object has no kernel `{name}`"))
                        })?,
                ),
                None => None,
            },
            static_shared: std::sync::OnceLock::new(),
            opted_in: std::sync::atomic::AtomicU32::new(0),
        };
        Ok(runtime.functions.insert(function))
    });
    report("mgpuModuleGetFunction", function).unwrap_or(std::ptr::null_mut())
}

/// Launches a kernel: `params` points at `params_count` pointers to the argument values
/// (`cuLaunchKernel`'s `kernelParams`); `extra` must be null.
///
/// # Safety
/// `function` came from `mgpuModuleGetFunction`; `params` match the kernel's parameters;
/// `stream` is null or came from `mgpuStreamCreate`.
#[no_mangle]
#[allow(clippy::too_many_arguments)] // the ABI's shape
pub unsafe extern "C" fn mgpuLaunchKernel(
    function: *mut c_void,
    grid_x: isize,
    grid_y: isize,
    grid_z: isize,
    block_x: isize,
    block_y: isize,
    block_z: isize,
    shared_memory_bytes: i32,
    stream: *mut c_void,
    params: *mut *mut c_void,
    extra: *mut *mut c_void,
    params_count: u64,
) {
    let launched = with_runtime(|runtime, driver| {
        if function.is_null() {
            return Err(invalid("a launch of a kernel that was not found".into()));
        }
        if !extra.is_null() {
            return Err(invalid(
                "`extra` launch parameters are not supported".into(),
            ));
        }
        let dimension = |value: isize, what: &str| {
            u32::try_from(value).map_err(|_| invalid(format!("{what} {value} is out of range")))
        };
        let grid = [
            dimension(grid_x, "grid x")?,
            dimension(grid_y, "grid y")?,
            dimension(grid_z, "grid z")?,
        ];
        let block = [
            dimension(block_x, "block x")?,
            dimension(block_y, "block y")?,
            dimension(block_z, "block z")?,
        ];
        let shared = u32::try_from(shared_memory_bytes)
            .map_err(|_| invalid(format!("dynamic shared memory {shared_memory_bytes}")))?;
        let count = usize::try_from(params_count)
            .map_err(|_| invalid(format!("{params_count} parameters")))?;
        let params: &mut [*mut c_void] = if count == 0 {
            &mut []
        } else {
            // SAFETY: the caller's guarantee: `count` parameter pointers.
            unsafe { std::slice::from_raw_parts_mut(params, count) }
        };
        let function = runtime.functions.get(function)?;
        // Sizes matter to queued host launches (which copy the values); GPU drivers know them.
        let sizes = function
            .param_sizes
            .clone()
            .unwrap_or_else(|| vec![8; count]);
        if sizes.len() != count {
            return Err(invalid(format!(
                "the kernel takes {} parameters, the launch passes {count}",
                sizes.len()
            )));
        }
        // More dynamic shared memory than a block gets by default: opt the kernel in first, as
        // upstream's wrapper does (CUDA refuses the launch otherwise); once per larger size,
        // with the kernel's own shared memory read from the driver once.
        use std::sync::atomic::Ordering::Relaxed;
        if shared > function.opted_in.load(Relaxed) {
            let limits = runtime.device.limits();
            let declared = match function.static_shared.get() {
                Some(declared) => *declared,
                None => {
                    let declared = driver
                        .attributes(&function.handle, limits)?
                        .static_shared_bytes;
                    *function.static_shared.get_or_init(|| declared)
                }
            };
            if declared.saturating_add(u64::from(shared)) > limits.shared_memory_per_block {
                driver.allow_dynamic_shared(&function.handle, shared)?;
                function.opted_in.fetch_max(shared, Relaxed);
            }
        }
        let launch = Launch {
            function: &function.handle,
            grid,
            block,
            shared,
            stream: runtime.streams.stream(stream)?,
        };
        match &function.vulkan {
            // SAFETY: the caller's guarantee.
            Some(kernel) => unsafe {
                launch_vulkan(runtime, driver, kernel, &launch, params, &sizes)
            },
            // SAFETY: the caller's guarantee.
            None => unsafe { launch_timed(driver, &launch, params, &sizes) },
        }
    });
    report("mgpuLaunchKernel", launched);
}

/// Thread-block clusters are NVIDIA sm_90 launches this runtime does not make.
///
/// # Safety
/// None needed: it only reports.
#[no_mangle]
#[allow(clippy::too_many_arguments)] // the ABI's shape
pub unsafe extern "C" fn mgpuLaunchClusterKernel(
    _function: *mut c_void,
    _cluster_x: isize,
    _cluster_y: isize,
    _cluster_z: isize,
    _grid_x: isize,
    _grid_y: isize,
    _grid_z: isize,
    _block_x: isize,
    _block_y: isize,
    _block_z: isize,
    _shared_memory_bytes: i32,
    _stream: *mut c_void,
    _params: *mut *mut c_void,
    _extra: *mut *mut c_void,
) {
    report::<()>(
        "mgpuLaunchClusterKernel",
        Err(invalid(
            "cluster launches are not supported by gpu-embed".into(),
        )),
    );
}

/// A new stream.
#[no_mangle]
pub extern "C" fn mgpuStreamCreate() -> *mut c_void {
    let stream = with_runtime(|runtime, driver| {
        let stream = driver.create_stream()?;
        runtime.handed_out = true;
        Ok(runtime.streams.insert(stream))
    });
    report("mgpuStreamCreate", stream).unwrap_or(std::ptr::null_mut())
}

/// Destroys a stream, after its queued work.
///
/// # Safety
/// `stream` came from `mgpuStreamCreate` and is not used afterwards.
#[no_mangle]
pub unsafe extern "C" fn mgpuStreamDestroy(stream: *mut c_void) {
    let destroyed = with_runtime(|runtime, driver| {
        driver.destroy_stream(runtime.streams.remove(stream)?);
        Ok(())
    });
    report("mgpuStreamDestroy", destroyed);
}

/// Waits for a stream's queued work.
///
/// # Safety
/// `stream` is null or came from `mgpuStreamCreate`.
#[no_mangle]
pub unsafe extern "C" fn mgpuStreamSynchronize(stream: *mut c_void) {
    let synchronized =
        with_runtime(|runtime, driver| driver.synchronize_stream(runtime.streams.stream(stream)?));
    report("mgpuStreamSynchronize", synchronized);
}

/// Makes a stream's later work wait for an event's last recording.
///
/// # Safety
/// `stream` and `event` came from `mgpuStreamCreate` and `mgpuEventCreate`.
#[no_mangle]
pub unsafe extern "C" fn mgpuStreamWaitEvent(stream: *mut c_void, event: *mut c_void) {
    let waited = with_runtime(|runtime, driver| {
        driver.stream_wait_event(runtime.streams.stream(stream)?, runtime.events.get(event)?)
    });
    report("mgpuStreamWaitEvent", waited);
}

/// A new event.
#[no_mangle]
pub extern "C" fn mgpuEventCreate() -> *mut c_void {
    let event = with_runtime(|runtime, driver| {
        let event = driver.create_event()?;
        runtime.handed_out = true;
        Ok(runtime.events.insert(event))
    });
    report("mgpuEventCreate", event).unwrap_or(std::ptr::null_mut())
}

/// Destroys an event.
///
/// # Safety
/// `event` came from `mgpuEventCreate` and is not used afterwards.
#[no_mangle]
pub unsafe extern "C" fn mgpuEventDestroy(event: *mut c_void) {
    let destroyed = with_runtime(|runtime, driver| {
        driver.destroy_event(runtime.events.remove(event)?);
        Ok(())
    });
    report("mgpuEventDestroy", destroyed);
}

/// Waits for the work before an event's last recording.
///
/// # Safety
/// `event` came from `mgpuEventCreate`.
#[no_mangle]
pub unsafe extern "C" fn mgpuEventSynchronize(event: *mut c_void) {
    let synchronized =
        with_runtime(|runtime, driver| driver.synchronize_event(runtime.events.get(event)?));
    report("mgpuEventSynchronize", synchronized);
}

/// Records an event on a stream.
///
/// # Safety
/// `event` came from `mgpuEventCreate`; `stream` is null or came from `mgpuStreamCreate`.
#[no_mangle]
pub unsafe extern "C" fn mgpuEventRecord(event: *mut c_void, stream: *mut c_void) {
    let recorded = with_runtime(|runtime, driver| {
        driver.record_event(runtime.events.get(event)?, runtime.streams.stream(stream)?)
    });
    report("mgpuEventRecord", recorded);
}

/// The program's `gpu.alloc` sites, by number ([`super::set_allocation_sites`]).
pub(super) static ALLOCATION_SITES: RwLock<Vec<Arc<str>>> = RwLock::new(Vec::new());

thread_local! {
    /// The site [`mgpuCheckAllocationSite`] named for this thread's next `mgpuMemAlloc`.
    static NEXT_SITE: Cell<Option<u64>> = const { Cell::new(None) };
}

/// Names the `gpu.alloc` whose `mgpuMemAlloc` this thread calls next (by its number in
/// [`super::set_allocation_sites`]'s table), for the leak check's report: `gpu-build run
/// --check` puts a call before each `gpu.alloc`.
#[no_mangle]
pub extern "C" fn mgpuCheckAllocationSite(site: u64) {
    NEXT_SITE.set(Some(site));
}

/// `size` bytes of device memory; host-shared memory (which host code may read and write too)
/// on the host device, where every allocation is, on Vulkan devices, where it is host memory
/// that launches stage (see the module's documentation), and on CUDA and HIP devices with
/// concurrent managed access, where it is managed memory.
#[no_mangle]
pub extern "C" fn mgpuMemAlloc(size: u64, _stream: *mut c_void, host_shared: bool) -> *mut c_void {
    let site = NEXT_SITE.take().and_then(|site| {
        let sites = ALLOCATION_SITES.read().unwrap_or_else(|p| p.into_inner());
        sites.get(usize::try_from(site).ok()?).cloned()
    });
    let origin = Allocating::at(Origin::Op(site.unwrap_or_else(|| "`mgpuMemAlloc`".into())));
    // The host program reads and writes host-shared memory itself.
    let _origin = if host_shared {
        origin.host_visible()
    } else {
        origin
    };
    let allocated = with_runtime(|runtime, driver| {
        let bytes = usize::try_from(size).map_err(|_| invalid(format!("{size} bytes")))?;
        match driver.host_memory() {
            _ if !host_shared => {}
            HostMemory::Same => {}
            HostMemory::Staged => {
                // Host memory, which the device's launches stage like any other.
                let pointer = driver.alloc_pinned(bytes.max(1))?;
                runtime.handed_out = true;
                runtime.host_shared.insert(pointer as usize);
                return Ok(pointer);
            }
            HostMemory::Separate => {
                // Managed memory, as upstream's wrappers allocate host-shared memory
                // (cuMemAllocManaged with CU_MEM_ATTACH_GLOBAL, hipMallocManaged): one address
                // for the host and every stream, freed like device memory.
                if !runtime.device.limits().managed_memory {
                    return Err(invalid(format!(
                        "host-shared memory on {}: the device has no concurrent managed access",
                        runtime.device.name()
                    )));
                }
                let pointer = driver.alloc_managed(bytes.max(1))?;
                runtime.handed_out = true;
                runtime.allocations.insert(pointer, bytes.max(1));
                return Ok(pointer as *mut c_void);
            }
        }
        let pointer = driver.alloc(bytes.max(1))?;
        runtime.handed_out = true;
        runtime.allocations.insert(pointer, bytes.max(1));
        Ok(pointer as *mut c_void)
    });
    report("mgpuMemAlloc", allocated).unwrap_or(std::ptr::null_mut())
}

/// Frees memory `mgpuMemAlloc` returned (the device's queued work first).
///
/// # Safety
/// `pointer` came from `mgpuMemAlloc` and no work uses it afterwards.
#[no_mangle]
pub unsafe extern "C" fn mgpuMemFree(pointer: *mut c_void, stream: *mut c_void) {
    let freed = with_runtime(|runtime, driver| {
        let stream = runtime.streams.stream(stream)?;
        if runtime.host_shared.remove(&(pointer as usize)) {
            driver.synchronize_stream(stream)?;
            // SAFETY: host-shared memory `alloc_pinned` returned, which no queued work uses
            // now (Vulkan launches stage it and have finished when they return).
            unsafe { driver.free_pinned(pointer) };
            return Ok(());
        }
        if runtime.allocations.remove(&(pointer as u64)).is_none() {
            return Err(invalid(format!(
                "{pointer:?} was not allocated by mgpuMemAlloc"
            )));
        }
        driver.synchronize_stream(stream)?;
        driver.free(pointer as u64);
        Ok(())
    });
    report("mgpuMemFree", freed);
}

/// Copies `size` bytes in `stream`'s order, between device and host memory in either
/// direction.
///
/// # Safety
/// Both ranges are valid for `size` bytes until the stream has run the copy.
#[no_mangle]
pub unsafe extern "C" fn mgpuMemcpy(
    target: *mut c_void,
    source: *mut c_void,
    size: usize,
    stream: *mut c_void,
) {
    let copied = with_runtime(|runtime, driver| {
        let stream = runtime.streams.stream(stream)?;
        let (to, from) = (target as u64, source as u64);
        // SAFETY: (all four copies) the caller's guarantee; which memory each pointer is in
        // is known from the allocations made here.
        unsafe {
            match (runtime.is_device_memory(to), runtime.is_device_memory(from)) {
                _ if driver.host_memory() == HostMemory::Same => {
                    driver.copy_on_device_async(to, from, size, stream)
                }
                (true, true) => driver.copy_on_device_async(to, from, size, stream),
                // Pageable host memory: waited for here (the drivers' copies keep host memory in
                // use until the stream runs them).
                (true, false) => driver
                    .copy_to_device_async(to, source, size, stream)
                    .and_then(|()| driver.synchronize_stream(stream)),
                (false, true) => driver
                    .copy_to_host_async(target, from, size, stream)
                    .and_then(|()| driver.synchronize_stream(stream)),
                (false, false) => {
                    driver.synchronize_stream(stream)?;
                    std::ptr::copy(source.cast::<u8>(), target.cast::<u8>(), size);
                    Ok(())
                }
            }
        }
    });
    report("mgpuMemcpy", copied);
}

fn fill(call: &str, target: *mut c_void, pattern: Pattern, count: usize, stream: *mut c_void) {
    let filled = with_runtime(|runtime, driver| {
        let stream = runtime.streams.stream(stream)?;
        // SAFETY: the caller's guarantee (see the exported functions).
        unsafe { driver.fill_async(target as u64, pattern, count, stream) }
    });
    report(call, filled);
}

/// Writes `value` to `count` 32-bit elements from `target`, in `stream`'s order.
///
/// # Safety
/// `target` holds `count` aligned 32-bit elements of device memory.
#[no_mangle]
pub unsafe extern "C" fn mgpuMemset32(
    target: *mut c_void,
    value: u32,
    count: usize,
    stream: *mut c_void,
) {
    fill("mgpuMemset32", target, Pattern::U32(value), count, stream);
}

/// Writes `value` to `count` 16-bit elements from `target`, in `stream`'s order.
///
/// # Safety
/// `target` holds `count` aligned 16-bit elements of device memory.
#[no_mangle]
pub unsafe extern "C" fn mgpuMemset16(
    target: *mut c_void,
    value: u16,
    count: usize,
    stream: *mut c_void,
) {
    fill("mgpuMemset16", target, Pattern::U16(value), count, stream);
}

/// Page-locks `size` bytes of host memory so the device can use it (the host device uses any
/// host memory as it is).
///
/// # Safety
/// `pointer` holds `size` bytes that stay allocated until unregistered.
#[no_mangle]
pub unsafe extern "C" fn mgpuMemHostRegister(pointer: *mut c_void, size: u64) {
    let registered = with_runtime(|_, driver| {
        let bytes = usize::try_from(size).map_err(|_| invalid(format!("{size} bytes")))?;
        // SAFETY: the caller's guarantee.
        unsafe { driver.register(pointer, bytes) }
    });
    report("mgpuMemHostRegister", registered);
}

/// Unregisters host memory `mgpuMemHostRegister` registered.
///
/// # Safety
/// `pointer` was registered and no queued work uses it.
#[no_mangle]
pub unsafe extern "C" fn mgpuMemHostUnregister(pointer: *mut c_void) {
    let unregistered = with_runtime(|_, driver| {
        // SAFETY: the caller's guarantee.
        unsafe { driver.unregister(pointer) };
        Ok(())
    });
    report("mgpuMemHostUnregister", unregistered);
}

/// Makes GPU `index` (in `Device::gpus` order) the device the other calls use.
#[no_mangle]
pub extern "C" fn mgpuSetDefaultDevice(index: i32) {
    let chosen = Device::gpus().and_then(|gpus| {
        usize::try_from(index)
            .ok()
            .and_then(|i| gpus.into_iter().nth(i))
            .ok_or_else(|| invalid(format!("there is no GPU {index}")))
    });
    if let Some(device) = report("mgpuSetDefaultDevice", chosen) {
        report("mgpuSetDefaultDevice", use_device(device));
    }
}
