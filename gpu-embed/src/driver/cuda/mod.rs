//! The CUDA driver API from `libcuda.so.1`, through the bindings generated from `cuda.h`
//! (`sys/cuda.rs`): every entry point is resolved when the library loads, so a driver that lacks
//! one is an error then, never a crash later.

use super::sys::cuda as sys;
use super::{c_name, c_string, static_c_str, DeviceLimits, Driver, FoundDevice};
use super::{DeviceHandle, EventHandle, FunctionHandle, GraphHandle, ModuleHandle, StreamHandle};
use super::{KernelAttributes, Pattern};
use crate::binary::{Format, Object, Vendor};
use crate::error::{DriverCode, Error, ErrorKind, Result};
use gpu_manifest::DriverVersion;
use libloading::Library;
use std::ffi::{c_char, c_void};
use std::sync::OnceLock;

/// The libraries tried, in order.
pub(crate) const LIBRARIES: &[&str] = &["libcuda.so.1", "libcuda.so"];

pub(crate) struct Cuda {
    api: sys::CudaDriver,
    /// The name the library was loaded as, for messages.
    pub library: &'static str,
}

/// The loaded driver, or why it could not be loaded (tried once per process).
pub(crate) fn driver() -> Result<&'static Cuda, String> {
    static DRIVER: OnceLock<Result<Cuda, String>> = OnceLock::new();
    DRIVER
        .get_or_init(|| super::load_first("CUDA", LIBRARIES, resolve))
        .as_ref()
        .map_err(Clone::clone)
}

fn resolve(library: Library, name: &'static str) -> Result<Cuda, libloading::Error> {
    // SAFETY: the generated bindings give each entry point the type `cuda.h` declares.
    let api = unsafe { sys::CudaDriver::from_library(library)? };
    Ok(Cuda { api, library: name })
}

/// Who made the handles this driver takes back.
const VENDOR: Vendor = Vendor::Nvptx;

/// The context a device handle names.
fn context(device: &DeviceHandle) -> Result<sys::CUcontext> {
    Ok(device.vendor_value(VENDOR)? as sys::CUcontext)
}

fn module(module: &ModuleHandle) -> Result<sys::CUmodule> {
    Ok(module.vendor_value(VENDOR)? as sys::CUmodule)
}

fn function(function: &FunctionHandle) -> Result<sys::CUfunction> {
    Ok(function.vendor_value(VENDOR)? as sys::CUfunction)
}

/// The stream a handle names; null for the default stream.
fn stream(stream: &StreamHandle) -> Result<sys::CUstream> {
    if stream.is_default() {
        return Ok(std::ptr::null_mut());
    }
    Ok(stream.vendor_value(VENDOR)? as sys::CUstream)
}

fn event(event: &EventHandle) -> Result<sys::CUevent> {
    Ok(event.vendor_value(VENDOR)? as sys::CUevent)
}

fn graph(graph: &GraphHandle) -> Result<sys::CUgraphExec> {
    Ok(graph.vendor_value(VENDOR)? as sys::CUgraphExec)
}

/// What a program can do about a `CUresult`.
fn kind_of(result: sys::CUresult) -> ErrorKind {
    match result {
        sys::CUDA_ERROR_OUT_OF_MEMORY => ErrorKind::OutOfMemory,
        sys::CUDA_ERROR_NO_DEVICE => ErrorKind::NoDevice,
        sys::CUDA_ERROR_NO_BINARY_FOR_GPU => ErrorKind::NoFittingObject,
        sys::CUDA_ERROR_INVALID_VALUE
        | sys::CUDA_ERROR_INVALID_DEVICE
        | sys::CUDA_ERROR_INVALID_HANDLE
        | sys::CUDA_ERROR_INVALID_IMAGE
        | sys::CUDA_ERROR_INVALID_PTX
        | sys::CUDA_ERROR_NOT_FOUND
        | sys::CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES
        | sys::CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE
        | sys::CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED
        | sys::CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED => ErrorKind::InvalidArgument,
        sys::CUDA_ERROR_ILLEGAL_ADDRESS
        | sys::CUDA_ERROR_LAUNCH_TIMEOUT
        | sys::CUDA_ERROR_ASSERT
        | sys::CUDA_ERROR_HARDWARE_STACK_ERROR
        | sys::CUDA_ERROR_ILLEGAL_INSTRUCTION
        | sys::CUDA_ERROR_MISALIGNED_ADDRESS
        | sys::CUDA_ERROR_INVALID_ADDRESS_SPACE
        | sys::CUDA_ERROR_INVALID_PC
        | sys::CUDA_ERROR_LAUNCH_FAILED
        | sys::CUDA_ERROR_ECC_UNCORRECTABLE => ErrorKind::KernelFault,
        sys::CUDA_ERROR_NOT_SUPPORTED
        | sys::CUDA_ERROR_UNSUPPORTED_PTX_VERSION
        | sys::CUDA_ERROR_JIT_COMPILER_NOT_FOUND
        | sys::CUDA_ERROR_JIT_COMPILATION_DISABLED
        | sys::CUDA_ERROR_PEER_ACCESS_UNSUPPORTED
        | sys::CUDA_ERROR_SYSTEM_DRIVER_MISMATCH
        | sys::CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE => ErrorKind::NotSupported,
        _ => ErrorKind::Driver,
    }
}

impl Cuda {
    /// `Ok` or an error naming the driver's error and what was being done.
    fn check(&self, result: sys::CUresult, what: impl FnOnce() -> String) -> Result<()> {
        if result == sys::CUDA_SUCCESS {
            return Ok(());
        }
        let mut name: *const c_char = std::ptr::null();
        // SAFETY: writes a pointer to a static string or leaves it null.
        unsafe { (self.api.cuGetErrorName)(result, &mut name) };
        let name = static_c_str(name).unwrap_or_else(|| "an unknown CUDA error".into());
        Err(Error::from_driver(
            kind_of(result),
            DriverCode::Cuda(result),
            format!("{}: {name} ({result})", what()),
        ))
    }

    fn limits(&self, device: sys::CUdevice) -> Result<DeviceLimits> {
        let attribute = |which: sys::CUdevice_attribute| {
            let mut value = 0;
            self.check(
                // SAFETY: a valid out-pointer and a device the driver reported.
                unsafe { (self.api.cuDeviceGetAttribute)(&mut value, which, device) },
                || format!("cuDeviceGetAttribute({which})"),
            )?;
            Ok::<u32, Error>(value.max(0) as u32)
        };
        let mut total = 0;
        self.check(
            // SAFETY: as above.
            unsafe { (self.api.cuDeviceTotalMem_v2)(&mut total, device) },
            || "cuDeviceTotalMem".into(),
        )?;
        let shared = attribute(sys::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK)?;
        Ok(DeviceLimits {
            multiprocessors: attribute(sys::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?,
            warp_size: attribute(sys::CU_DEVICE_ATTRIBUTE_WARP_SIZE)?,
            max_threads_per_block: attribute(sys::CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK)?,
            max_block: [
                attribute(sys::CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X)?,
                attribute(sys::CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y)?,
                attribute(sys::CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z)?,
            ],
            max_grid: [
                attribute(sys::CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X)?,
                attribute(sys::CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y)?,
                attribute(sys::CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z)?,
            ],
            shared_memory_per_block: u64::from(shared),
            shared_memory_per_block_optin: u64::from(
                attribute(sys::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)?.max(shared),
            ),
            // Without concurrent access, the host may not touch managed memory while any
            // kernel runs on the device, which no borrow can promise: treated as none.
            managed_memory: attribute(sys::CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY)? != 0
                && attribute(sys::CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS)? != 0,
            total_memory: total as u64,
        })
    }

    pub(crate) fn devices(&'static self) -> Result<Vec<FoundDevice>> {
        // SAFETY: plain driver calls with valid out-pointers.
        unsafe {
            self.check((self.api.cuInit)(0), || "cuInit".into())?;
            // 12040 for CUDA 12.4: what the driver can load (cubins of its major version and
            // older, PTX up to its own ISA version).
            let mut version = 0;
            self.check((self.api.cuDriverGetVersion)(&mut version), || {
                "cuDriverGetVersion".into()
            })?;
            let version = u32::try_from(version).unwrap_or(0);
            let driver_version = Some(DriverVersion::Cuda {
                major: version / 1000,
                minor: version % 1000 / 10,
            });
            let mut count = 0;
            self.check((self.api.cuDeviceGetCount)(&mut count), || {
                "cuDeviceGetCount".into()
            })?;
            let mut devices = Vec::new();
            for ordinal in 0..count {
                let mut device = 0;
                self.check((self.api.cuDeviceGet)(&mut device, ordinal), || {
                    format!("cuDeviceGet({ordinal})")
                })?;
                let mut name = [0 as c_char; 256];
                self.check(
                    (self.api.cuDeviceGetName)(name.as_mut_ptr(), 256, device),
                    || "cuDeviceGetName".into(),
                )?;
                let (mut major, mut minor) = (0, 0);
                let attribute =
                    |value: &mut i32, which| (self.api.cuDeviceGetAttribute)(value, which, device);
                self.check(
                    attribute(
                        &mut major,
                        sys::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
                    ),
                    || "cuDeviceGetAttribute".into(),
                )?;
                self.check(
                    attribute(
                        &mut minor,
                        sys::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR,
                    ),
                    || "cuDeviceGetAttribute".into(),
                )?;
                let limits = self.limits(device)?;
                let mut uuid = sys::CUuuid { bytes: [0; 16] };
                self.check((self.api.cuDeviceGetUuid_v2)(&mut uuid, device), || {
                    "cuDeviceGetUuid_v2".into()
                })?;
                let mut context = std::ptr::null_mut();
                self.check(
                    (self.api.cuDevicePrimaryCtxRetain)(&mut context, device),
                    || "cuDevicePrimaryCtxRetain".into(),
                )?;
                devices.push(FoundDevice {
                    driver: self,
                    raw: DeviceHandle::from_vendor(VENDOR, context as usize),
                    name: c_string(&name),
                    arch: format!("sm_{major}{minor}"),
                    limits,
                    cpu: false,
                    uuid: Some(uuid.bytes.map(|b| b as u8)),
                    driver_version,
                });
            }
            Ok(devices)
        }
    }
}

/// Each `unsafe fn` here has the contract its declaration in [`Driver`] states under
/// `# Safety`; each `unsafe` block inside says why that contract (or the driver's own state)
/// makes its call sound.
impl Driver for Cuda {
    fn vendor(&self) -> Vendor {
        Vendor::Nvptx
    }

    fn make_current(&self, device: &DeviceHandle) -> Result<Option<DeviceHandle>> {
        let device = context(device)?;
        let mut previous = std::ptr::null_mut();
        // SAFETY: writes the calling thread's current context (or null).
        self.check(unsafe { (self.api.cuCtxGetCurrent)(&mut previous) }, || {
            "cuCtxGetCurrent".into()
        })?;
        if previous == device {
            return Ok(None);
        }
        self.check(
            // SAFETY: a retained primary context.
            unsafe { (self.api.cuCtxSetCurrent)(device) },
            || "cuCtxSetCurrent".into(),
        )?;
        Ok(Some(DeviceHandle::from_vendor(VENDOR, previous as usize)))
    }

    fn restore(&self, previous: DeviceHandle) {
        let Ok(previous) = context(&previous) else {
            return;
        };
        // SAFETY: the context the thread had current before (null: none), which its owner keeps
        // alive while it is current; a failure leaves ours current, as before this existed.
        let _ = unsafe { (self.api.cuCtxSetCurrent)(previous) };
    }

    fn unload_module(&self, loaded: ModuleHandle) {
        let Ok(loaded) = module(&loaded) else {
            return;
        };
        // Queued launches may still run its kernels; a failure has nowhere to go from here.
        let _ = self.synchronize();
        // SAFETY: a loaded module, not used afterwards.
        unsafe { (self.api.cuModuleUnload)(loaded) };
    }

    fn load_module(&self, object: &'static Object) -> Result<ModuleHandle> {
        // The driver reads PTX as a C string.
        let image: Vec<u8> = match object.format() {
            Format::Isa => object.bytes().iter().copied().chain([0]).collect(),
            Format::Bin => object.bytes().to_vec(),
        };
        self.load_image(&image, &object.describe())
    }

    fn load_image(&self, image: &[u8], what: &str) -> Result<ModuleHandle> {
        // A cubin is an ELF file; anything else is PTX, which must end in NUL.
        let terminated: Vec<u8>;
        let image = if image.starts_with(b"\x7fELF") || image.ends_with(&[0]) {
            image
        } else {
            terminated = image.iter().copied().chain([0]).collect();
            &terminated
        };
        let mut module = std::ptr::null_mut();
        self.check(
            // SAFETY: a complete cubin or NUL-terminated PTX.
            unsafe { (self.api.cuModuleLoadData)(&mut module, image.as_ptr().cast()) },
            || format!("loading {what}"),
        )?;
        Ok(ModuleHandle::from_vendor(VENDOR, module as usize))
    }

    fn function(&self, loaded: &ModuleHandle, name: &str) -> Result<FunctionHandle> {
        let loaded = module(loaded)?;
        let c_name = c_name(name)?;
        let mut function = std::ptr::null_mut();
        self.check(
            // SAFETY: a loaded module and a NUL-terminated name.
            unsafe {
                (self.api.cuModuleGetFunction)(&mut function, loaded, c_name.as_ptr())
            },
            || format!("finding kernel `{name}`"),
        )?;
        Ok(FunctionHandle::from_vendor(VENDOR, function as usize))
    }

    fn attributes(
        &self,
        kernel: &FunctionHandle,
        _limits: &DeviceLimits,
    ) -> Result<KernelAttributes> {
        let kernel = function(kernel)?;
        let attribute = |which: sys::CUfunction_attribute_enum, what: &str| {
            let mut value = 0;
            self.check(
                // SAFETY: a function of a loaded module on the current context.
                unsafe { (self.api.cuFuncGetAttribute)(&mut value, which, kernel) },
                || format!("reading the kernel's {what} (cuFuncGetAttribute)"),
            )?;
            Ok::<u64, Error>(u64::try_from(value).unwrap_or(0))
        };
        Ok(KernelAttributes {
            max_threads_per_block: attribute(
                sys::CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK,
                "threads per block",
            )? as u32,
            static_shared_bytes: attribute(
                sys::CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES,
                "static shared memory",
            )?,
            local_bytes_per_thread: attribute(
                sys::CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES,
                "local memory",
            )?,
            registers: Some(attribute(sys::CU_FUNC_ATTRIBUTE_NUM_REGS, "registers")? as u32),
            required_block: None,
        })
    }

    fn potential_block_size(
        &self,
        kernel: &FunctionHandle,
        dynamic_shared: u32,
        _limits: &DeviceLimits,
    ) -> Result<(u32, u32)> {
        let kernel = function(kernel)?;
        let (mut grid, mut block) = (0, 0);
        self.check(
            // SAFETY: a function of a loaded module on the current context; no callback, a fixed
            // dynamic shared memory size, no block size limit.
            unsafe {
                (self.api.cuOccupancyMaxPotentialBlockSize)(
                    &mut grid,
                    &mut block,
                    kernel,
                    None,
                    dynamic_shared as usize,
                    0,
                )
            },
            || "computing the occupancy (cuOccupancyMaxPotentialBlockSize)".into(),
        )?;
        Ok((block.max(1) as u32, grid.max(1) as u32))
    }

    fn allow_dynamic_shared(&self, kernel: &FunctionHandle, bytes: u32) -> Result<()> {
        let kernel = function(kernel)?;
        let value = i32::try_from(bytes).unwrap_or(i32::MAX);
        self.check(
            // SAFETY: a function of a loaded module on the current context.
            unsafe {
                (self.api.cuFuncSetAttribute)(
                    kernel,
                    sys::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                    value,
                )
            },
            || format!("opting into {bytes} bytes of dynamic shared memory (cuFuncSetAttribute)"),
        )
    }

    unsafe fn launch(
        &self,
        kernel: &FunctionHandle,
        grid: [u32; 3],
        block: [u32; 3],
        shared: u32,
        queue: &StreamHandle,
        params: &mut [*mut c_void],
        _param_sizes: &[usize],
    ) -> Result<()> {
        let (kernel, queue) = (function(kernel)?, stream(queue)?);
        let [gx, gy, gz] = grid;
        let [bx, by, bz] = block;
        // SAFETY: the caller guarantees `params` match the kernel.
        let result = unsafe {
            (self.api.cuLaunchKernel)(
                kernel,
                gx,
                gy,
                gz,
                bx,
                by,
                bz,
                shared,
                queue,
                params.as_mut_ptr(),
                std::ptr::null_mut(),
            )
        };
        self.check(result, || "cuLaunchKernel".into())
    }

    fn alloc(&self, bytes: usize) -> Result<u64> {
        let mut pointer = 0;
        self.check(
            // SAFETY: a valid out-pointer.
            unsafe { (self.api.cuMemAlloc_v2)(&mut pointer, bytes) },
            || format!("allocating {bytes} bytes"),
        )?;
        Ok(pointer)
    }

    fn alloc_managed(&self, bytes: usize) -> Result<u64> {
        let mut pointer = 0;
        self.check(
            // SAFETY: a valid out-pointer; memory any stream may use.
            unsafe { (self.api.cuMemAllocManaged)(&mut pointer, bytes, sys::CU_MEM_ATTACH_GLOBAL) },
            || format!("allocating {bytes} bytes of managed memory"),
        )?;
        Ok(pointer)
    }

    fn enable_peer_access(&self, peer: &DeviceHandle) -> Result<()> {
        let peer = context(peer)?;
        // SAFETY: a retained primary context of another device.
        match unsafe { (self.api.cuCtxEnablePeerAccess)(peer, 0) } {
            sys::CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED => Ok(()),
            result => self.check(result, || {
                "enabling peer access (cuCtxEnablePeerAccess)".into()
            }),
        }
    }

    unsafe fn copy_peer_async(
        &self,
        (target, target_device): (u64, &DeviceHandle),
        (source, source_device): (u64, &DeviceHandle),
        bytes: usize,
        queue: &StreamHandle,
    ) -> Result<bool> {
        let (target_device, source_device) = (context(target_device)?, context(source_device)?);
        let queue = stream(queue)?;
        self.check(
            // SAFETY: the caller guarantees both ranges; the devices are primary contexts.
            unsafe {
                (self.api.cuMemcpyPeerAsync)(
                    target,
                    target_device,
                    source,
                    source_device,
                    bytes,
                    queue,
                )
            },
            || "copying between devices (cuMemcpyPeerAsync)".into(),
        )?;
        Ok(true)
    }

    fn free(&self, pointer: u64) {
        // SAFETY: allocated by `alloc`; a failure here has nowhere to go.
        unsafe { (self.api.cuMemFree_v2)(pointer) };
    }

    unsafe fn copy_to_device(
        &self,
        target: u64,
        source: *const c_void,
        bytes: usize,
    ) -> Result<()> {
        // SAFETY: the caller guarantees both ranges.
        self.check(
            unsafe { (self.api.cuMemcpyHtoD_v2)(target, source, bytes) },
            || "copying to the device".into(),
        )
    }

    unsafe fn copy_to_host(&self, target: *mut c_void, source: u64, bytes: usize) -> Result<()> {
        // SAFETY: the caller guarantees both ranges.
        self.check(
            unsafe { (self.api.cuMemcpyDtoH_v2)(target, source, bytes) },
            || "copying from the device".into(),
        )
    }

    unsafe fn fill(&self, target: u64, pattern: Pattern, count: usize) -> Result<()> {
        // SAFETY: the caller guarantees the range and its alignment.
        let result = unsafe {
            match pattern {
                Pattern::U8(value) => (self.api.cuMemsetD8_v2)(target, value, count),
                Pattern::U16(value) => (self.api.cuMemsetD16_v2)(target, value, count),
                Pattern::U32(value) => (self.api.cuMemsetD32_v2)(target, value, count),
            }
        };
        self.check(result, || {
            format!("setting {count} elements to {pattern:?}")
        })
    }

    fn memory_info(&self) -> Result<(u64, u64)> {
        let (mut free, mut total) = (0, 0);
        self.check(
            // SAFETY: valid out-pointers; a context is current.
            unsafe { (self.api.cuMemGetInfo_v2)(&mut free, &mut total) },
            || "cuMemGetInfo".into(),
        )?;
        Ok((free as u64, total as u64))
    }

    unsafe fn copy_on_device(&self, target: u64, source: u64, bytes: usize) -> Result<()> {
        // SAFETY: the caller guarantees both ranges.
        self.check(
            unsafe { (self.api.cuMemcpyDtoD_v2)(target, source, bytes) },
            || "copying on the device".into(),
        )
    }

    fn synchronize(&self) -> Result<()> {
        // SAFETY: no arguments.
        self.check(unsafe { (self.api.cuCtxSynchronize)() }, || {
            "cuCtxSynchronize".into()
        })
    }

    fn create_stream(&self) -> Result<StreamHandle> {
        let mut created = std::ptr::null_mut();
        // SAFETY: a valid out-pointer.
        self.check(unsafe { (self.api.cuStreamCreate)(&mut created, 0) }, || {
            "cuStreamCreate".into()
        })?;
        Ok(StreamHandle::from_vendor(VENDOR, created as usize))
    }

    fn synchronize_stream(&self, queue: &StreamHandle) -> Result<()> {
        let queue = stream(queue)?;
        // SAFETY: a live stream.
        self.check(unsafe { (self.api.cuStreamSynchronize)(queue) }, || {
            "cuStreamSynchronize".into()
        })
    }

    fn destroy_stream(&self, queue: StreamHandle) {
        if queue.is_default() {
            return;
        }
        if let Ok(queue) = stream(&queue) {
            // SAFETY: a stream `create_stream` made, not used afterwards.
            unsafe { (self.api.cuStreamDestroy_v2)(queue) };
        }
    }

    fn stream_wait_event(&self, queue: &StreamHandle, marker: &EventHandle) -> Result<()> {
        let (queue, marker) = (stream(queue)?, event(marker)?);
        // SAFETY: a live stream (or null) and a live event of the current context.
        self.check(
            unsafe { (self.api.cuStreamWaitEvent)(queue, marker, 0) },
            || "cuStreamWaitEvent".into(),
        )
    }

    fn create_event(&self) -> Result<EventHandle> {
        let mut created = std::ptr::null_mut();
        // SAFETY: a valid out-pointer; default flags (timing enabled).
        self.check(unsafe { (self.api.cuEventCreate)(&mut created, 0) }, || {
            "cuEventCreate".into()
        })?;
        Ok(EventHandle::from_vendor(VENDOR, created as usize))
    }

    fn create_marker_event(&self) -> Option<Result<EventHandle>> {
        let mut created = std::ptr::null_mut();
        // SAFETY: a valid out-pointer.
        let result = self.check(
            unsafe { (self.api.cuEventCreate)(&mut created, sys::CU_EVENT_DISABLE_TIMING) },
            || "cuEventCreate".into(),
        );
        Some(result.map(|()| EventHandle::from_vendor(VENDOR, created as usize)))
    }

    fn record_event(&self, marker: &EventHandle, queue: &StreamHandle) -> Result<()> {
        let (marker, queue) = (event(marker)?, stream(queue)?);
        // SAFETY: a live event and stream (or null) of the current context.
        self.check(unsafe { (self.api.cuEventRecord)(marker, queue) }, || {
            "cuEventRecord".into()
        })
    }

    fn query_event(&self, marker: &EventHandle) -> Result<bool> {
        let marker = event(marker)?;
        // SAFETY: a live event.
        match unsafe { (self.api.cuEventQuery)(marker) } {
            sys::CUDA_ERROR_NOT_READY => Ok(false),
            result => self.check(result, || "cuEventQuery".into()).map(|()| true),
        }
    }

    fn synchronize_event(&self, marker: &EventHandle) -> Result<()> {
        let marker = event(marker)?;
        // SAFETY: a live event.
        self.check(unsafe { (self.api.cuEventSynchronize)(marker) }, || {
            "cuEventSynchronize".into()
        })
    }

    fn elapsed_ms(&self, start: &EventHandle, end: &EventHandle) -> Result<f32> {
        let (start, end) = (event(start)?, event(end)?);
        let mut milliseconds = 0.0;
        self.check(
            // SAFETY: two live events and a valid out-pointer.
            unsafe { (self.api.cuEventElapsedTime)(&mut milliseconds, start, end) },
            || "cuEventElapsedTime".into(),
        )?;
        Ok(milliseconds)
    }

    fn destroy_event(&self, marker: EventHandle) {
        if let Ok(marker) = event(&marker) {
            // SAFETY: an event `create_event` made, not used afterwards.
            unsafe { (self.api.cuEventDestroy_v2)(marker) };
        }
    }

    fn instantiate_graph(
        &self,
        record: &mut dyn FnMut(&StreamHandle) -> Result<()>,
    ) -> Result<Option<GraphHandle>> {
        let mut capturing = std::ptr::null_mut();
        self.check(
            // SAFETY: a valid out-pointer. Non-blocking: work on the legacy default stream by
            // other threads cannot join (and so break) the capture.
            unsafe { (self.api.cuStreamCreate)(&mut capturing, sys::CU_STREAM_NON_BLOCKING) },
            || "cuStreamCreate".into(),
        )?;
        let begun = self.check(
            // SAFETY: a new stream; thread-local mode: only this thread's calls are checked
            // against the capture.
            unsafe {
                (self.api.cuStreamBeginCapture_v2)(
                    capturing,
                    sys::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL,
                )
            },
            || "cuStreamBeginCapture".into(),
        );
        let recorded = begun.and_then(|()| {
            let recorded = record(&StreamHandle::from_vendor(VENDOR, capturing as usize));
            let mut captured = std::ptr::null_mut();
            // SAFETY: the capturing stream and a valid out-pointer; ends the capture even
            // after a failed `record`.
            let ended = self.check(
                unsafe { (self.api.cuStreamEndCapture)(capturing, &mut captured) },
                || "cuStreamEndCapture".into(),
            );
            recorded.and(ended).map(|()| captured)
        });
        // SAFETY: not used afterwards.
        unsafe { (self.api.cuStreamDestroy_v2)(capturing) };
        let captured = recorded?;
        let mut executable = std::ptr::null_mut();
        // SAFETY: the captured graph; the instance does not need it afterwards.
        let instantiated =
            unsafe { (self.api.cuGraphInstantiateWithFlags)(&mut executable, captured, 0) };
        // SAFETY: the graph is not used afterwards.
        unsafe { (self.api.cuGraphDestroy)(captured) };
        self.check(instantiated, || "cuGraphInstantiate".into())?;
        Ok(Some(GraphHandle::from_vendor(VENDOR, executable as usize)))
    }

    unsafe fn launch_graph(&self, executable: &GraphHandle, queue: &StreamHandle) -> Result<()> {
        let (executable, queue) = (graph(executable)?, stream(queue)?);
        // SAFETY: as the caller guarantees.
        self.check(unsafe { (self.api.cuGraphLaunch)(executable, queue) }, || {
            "cuGraphLaunch".into()
        })
    }

    fn destroy_graph(&self, executable: GraphHandle) {
        if let Ok(executable) = graph(&executable) {
            // SAFETY: not used afterwards; the driver frees it once queued launches have run.
            unsafe { (self.api.cuGraphExecDestroy)(executable) };
        }
    }

    unsafe fn copy_to_device_async(
        &self,
        target: u64,
        source: *const c_void,
        bytes: usize,
        queue: &StreamHandle,
    ) -> Result<()> {
        let queue = stream(queue)?;
        // SAFETY: the caller guarantees both ranges for the life of the copy.
        self.check(
            unsafe { (self.api.cuMemcpyHtoDAsync_v2)(target, source, bytes, queue) },
            || "copying to the device".into(),
        )
    }

    unsafe fn copy_to_host_async(
        &self,
        target: *mut c_void,
        source: u64,
        bytes: usize,
        queue: &StreamHandle,
    ) -> Result<()> {
        let queue = stream(queue)?;
        self.check(
            // SAFETY: the caller guarantees both ranges for the life of the copy.
            unsafe { (self.api.cuMemcpyDtoHAsync_v2)(target, source, bytes, queue) },
            || "copying from the device".into(),
        )
    }

    unsafe fn copy_on_device_async(
        &self,
        target: u64,
        source: u64,
        bytes: usize,
        queue: &StreamHandle,
    ) -> Result<()> {
        let queue = stream(queue)?;
        // SAFETY: the caller guarantees both ranges.
        self.check(
            unsafe { (self.api.cuMemcpyDtoDAsync_v2)(target, source, bytes, queue) },
            || "copying on the device".into(),
        )
    }

    unsafe fn fill_async(
        &self,
        target: u64,
        pattern: Pattern,
        count: usize,
        queue: &StreamHandle,
    ) -> Result<()> {
        let stream = stream(queue)?;
        // SAFETY: the caller guarantees the range and its alignment.
        let result = unsafe {
            match pattern {
                Pattern::U8(value) => (self.api.cuMemsetD8Async)(target, value, count, stream),
                Pattern::U16(value) => (self.api.cuMemsetD16Async)(target, value, count, stream),
                Pattern::U32(value) => (self.api.cuMemsetD32Async)(target, value, count, stream),
            }
        };
        self.check(result, || {
            format!("setting {count} elements to {pattern:?}")
        })
    }

    fn alloc_pinned(&self, bytes: usize) -> Result<*mut c_void> {
        let mut pointer = std::ptr::null_mut();
        self.check(
            // SAFETY: a valid out-pointer.
            unsafe { (self.api.cuMemAllocHost_v2)(&mut pointer, bytes) },
            || format!("allocating {bytes} bytes of page-locked memory"),
        )?;
        Ok(pointer)
    }

    unsafe fn free_pinned(&self, pointer: *mut c_void) {
        // SAFETY: as the caller guarantees.
        unsafe { (self.api.cuMemFreeHost)(pointer) };
    }

    unsafe fn register(&self, pointer: *mut c_void, bytes: usize) -> Result<()> {
        // SAFETY: as the caller guarantees; default flags.
        self.check(
            unsafe { (self.api.cuMemHostRegister_v2)(pointer, bytes, 0) },
            || format!("page-locking {bytes} bytes"),
        )
    }

    unsafe fn unregister(&self, pointer: *mut c_void) {
        // SAFETY: as the caller guarantees.
        unsafe { (self.api.cuMemHostUnregister)(pointer) };
    }
}
