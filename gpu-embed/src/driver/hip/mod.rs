//! The HIP runtime API from `libamdhip64.so` (ROCm), for AMD GPUs, through the bindings generated
//! from the HIP headers (`sys/hip.rs`; `sys/hip_r0600.rs` for ROCm 6's device properties): every
//! entry point is resolved when the library loads.

use super::sys::{hip as sys, hip_r0600};
use super::{c_name, c_string, static_c_str, DeviceLimits, Driver, FoundDevice};
use super::{DeviceHandle, EventHandle, FunctionHandle, GraphHandle, ModuleHandle, StreamHandle};
use super::{KernelAttributes, Pattern};
use crate::binary::{Object, Vendor};
use crate::error::{DriverCode, Error, ErrorKind, Result};
use gpu_manifest::DriverVersion;
use libloading::Library;
use std::ffi::{c_char, c_int, c_void};
use std::sync::OnceLock;

/// The libraries tried, in order.
pub(crate) const LIBRARIES: &[&str] = &[
    "libamdhip64.so",
    "libamdhip64.so.6",
    "libamdhip64.so.5",
    "/opt/rocm/lib/libamdhip64.so",
];

pub(crate) struct Hip {
    api: sys::HipRuntime,
    /// ROCm 6 and later: `hipGetDevicePropertiesR0600`, which fills the ROCm 6 layout. Earlier
    /// runtimes have only `hipGetDeviceProperties`, which fills the ROCm 5 layout.
    r0600: Option<hip_r0600::HipR0600>,
    /// The name the library was loaded as, for messages.
    pub library: &'static str,
}

/// What device discovery reads from either layout of the device properties.
struct Properties {
    name: String,
    gcn_arch_name: String,
    limits: DeviceLimits,
}

/// The limits, from the fields both layouts share by name.
macro_rules! limits_of {
    ($properties:expr) => {{
        let p = &$properties;
        let unsigned = |v: c_int| v.max(0) as u32;
        DeviceLimits {
            multiprocessors: unsigned(p.multiProcessorCount),
            warp_size: unsigned(p.warpSize),
            max_threads_per_block: unsigned(p.maxThreadsPerBlock),
            max_block: p.maxThreadsDim.map(unsigned),
            max_grid: p.maxGridSize.map(unsigned),
            shared_memory_per_block: p.sharedMemPerBlock as u64,
            // AMD GPUs have no opt-in: a block may use all its LDS.
            shared_memory_per_block_optin: p.sharedMemPerBlock as u64,
            managed_memory: p.managedMemory != 0 && p.concurrentManagedAccess != 0,
            total_memory: p.totalGlobalMem as u64,
        }
    }};
}

pub(crate) fn driver() -> Result<&'static Hip, String> {
    static DRIVER: OnceLock<Result<Hip, String>> = OnceLock::new();
    DRIVER
        .get_or_init(|| super::load_first("HIP", LIBRARIES, resolve))
        .as_ref()
        .map_err(Clone::clone)
}

fn resolve(library: Library, name: &'static str) -> Result<Hip, libloading::Error> {
    // SAFETY: the generated bindings give each entry point the type the HIP headers declare;
    // the second handle is the same, already loaded library.
    unsafe {
        let r0600 = Library::new(name)
            .and_then(|library| hip_r0600::HipR0600::from_library(library))
            .ok();
        Ok(Hip {
            api: sys::HipRuntime::from_library(library)?,
            r0600,
            library: name,
        })
    }
}

/// A NUL-terminated C string field.
fn field_text(field: &[c_char]) -> String {
    c_string(field)
}

/// Who made the handles this driver takes back.
const VENDOR: Vendor = Vendor::Amdgpu;

/// The device ordinal a device handle names.
fn ordinal(device: &DeviceHandle) -> Result<c_int> {
    Ok(device.vendor_value(VENDOR)? as c_int)
}

fn module(module: &ModuleHandle) -> Result<sys::hipModule_t> {
    Ok(module.vendor_value(VENDOR)? as sys::hipModule_t)
}

fn function(function: &FunctionHandle) -> Result<sys::hipFunction_t> {
    Ok(function.vendor_value(VENDOR)? as sys::hipFunction_t)
}

/// The stream a handle names; null for the default stream.
fn stream(stream: &StreamHandle) -> Result<sys::hipStream_t> {
    if stream.is_default() {
        return Ok(std::ptr::null_mut());
    }
    Ok(stream.vendor_value(VENDOR)? as sys::hipStream_t)
}

fn event(event: &EventHandle) -> Result<sys::hipEvent_t> {
    Ok(event.vendor_value(VENDOR)? as sys::hipEvent_t)
}

fn graph(graph: &GraphHandle) -> Result<sys::hipGraphExec_t> {
    Ok(graph.vendor_value(VENDOR)? as sys::hipGraphExec_t)
}

/// What a program can do about a `hipError_t`.
fn kind_of(result: sys::hipError_t) -> ErrorKind {
    match result {
        sys::hipErrorOutOfMemory => ErrorKind::OutOfMemory,
        sys::hipErrorNoDevice => ErrorKind::NoDevice,
        sys::hipErrorNoBinaryForGpu => ErrorKind::NoFittingObject,
        sys::hipErrorInvalidValue
        | sys::hipErrorInvalidConfiguration
        | sys::hipErrorInvalidDevicePointer
        | sys::hipErrorInvalidDeviceFunction
        | sys::hipErrorInvalidDevice
        | sys::hipErrorInvalidImage
        | sys::hipErrorInvalidKernelFile
        | sys::hipErrorInvalidHandle
        | sys::hipErrorNotFound
        | sys::hipErrorLaunchOutOfResources
        | sys::hipErrorCooperativeLaunchTooLarge
        | sys::hipErrorHostMemoryAlreadyRegistered
        | sys::hipErrorHostMemoryNotRegistered => ErrorKind::InvalidArgument,
        sys::hipErrorIllegalAddress
        | sys::hipErrorLaunchTimeOut
        | sys::hipErrorAssert
        | sys::hipErrorLaunchFailure
        | sys::hipErrorPriorLaunchFailure
        | sys::hipErrorECCNotCorrectable => ErrorKind::KernelFault,
        sys::hipErrorNotSupported
        | sys::hipErrorPeerAccessUnsupported
        | sys::hipErrorInsufficientDriver => ErrorKind::NotSupported,
        _ => ErrorKind::Driver,
    }
}

impl Hip {
    fn check(&self, result: sys::hipError_t, what: impl FnOnce() -> String) -> Result<()> {
        if result == sys::hipSuccess {
            return Ok(());
        }
        // SAFETY: returns a static string.
        let name = static_c_str(unsafe { (self.api.hipGetErrorName)(result) })
            .unwrap_or_else(|| "an unknown HIP error".into());
        Err(Error::from_driver(
            kind_of(result),
            DriverCode::Hip(result),
            format!("{}: {name} ({result})", what()),
        ))
    }

    /// The device's name and `gcnArchName` (`gfx90a:sramecc+:xnack-`), from the properties
    /// struct of the runtime's own layout.
    fn properties(&self, ordinal: c_int) -> Result<Properties> {
        let what = || format!("hipGetDeviceProperties({ordinal})");
        // SAFETY: each call fills the struct of the layout its library was built with.
        unsafe {
            if let Some(r0600) = &self.r0600 {
                let mut properties = hip_r0600::hipDeviceProp_tR0600::default();
                self.check(
                    (r0600.hipGetDevicePropertiesR0600)(&mut properties, ordinal),
                    what,
                )?;
                return Ok(Properties {
                    name: field_text(&properties.name),
                    gcn_arch_name: field_text(&properties.gcnArchName),
                    limits: limits_of!(properties),
                });
            }
            let mut properties = sys::hipDeviceProp_t::default();
            self.check(
                (self.api.hipGetDeviceProperties)(&mut properties, ordinal),
                what,
            )?;
            Ok(Properties {
                name: field_text(&properties.name),
                gcn_arch_name: field_text(&properties.gcnArchName),
                limits: limits_of!(properties),
            })
        }
    }

    /// The runtime's ROCm release (major, minor, patch), as `hipRuntimeGetVersion` reports it:
    /// `HIP_VERSION`, major * 10000000 + minor * 100000 + patch (`50221153` is 5.2.21153;
    /// `hipDriverGetVersion` reports the same number). It answers without a device.
    fn runtime_version(&self) -> Result<(u32, u32, u32)> {
        let mut version = 0;
        // SAFETY: writes one int.
        let result = unsafe { (self.api.hipRuntimeGetVersion)(&mut version) };
        self.check(result, || "hipRuntimeGetVersion".into())?;
        let version = u32::try_from(version).unwrap_or(0);
        Ok((
            version / 10_000_000,
            version / 100_000 % 100,
            version % 100_000,
        ))
    }

    pub(crate) fn devices(&'static self) -> Result<Vec<FoundDevice>> {
        // Which code object versions its loader takes follows from the ROCm release.
        let (major, minor, patch) = self.runtime_version()?;
        let release = format!("HIP {major}.{minor}.{patch}");
        // SAFETY: plain runtime calls with valid out-pointers.
        unsafe {
            self.check((self.api.hipInit)(0), || format!("{release}: hipInit"))?;
            let mut count = 0;
            self.check((self.api.hipGetDeviceCount)(&mut count), || {
                "hipGetDeviceCount".into()
            })?;
            let mut devices = Vec::new();
            for ordinal in 0..count {
                let properties = self.properties(ordinal)?;
                if !properties.gcn_arch_name.starts_with("gfx") {
                    return Err(Error::new(
                        ErrorKind::Driver,
                        format!(
                            "HIP device {ordinal} ({}) reports the architecture `{}`, not a gfx chip",
                            properties.name, properties.gcn_arch_name
                        ),
                    ));
                }
                let mut uuid = sys::hipUUID { bytes: [0; 16] };
                self.check((self.api.hipDeviceGetUuid)(&mut uuid, ordinal), || {
                    "hipDeviceGetUuid".into()
                })?;
                devices.push(FoundDevice {
                    driver: self,
                    raw: DeviceHandle::from_vendor(VENDOR, ordinal as usize),
                    name: properties.name,
                    arch: properties.gcn_arch_name,
                    limits: properties.limits,
                    cpu: false,
                    uuid: Some(uuid.bytes.map(|b| b as u8)),
                    driver_version: Some(DriverVersion::Rocm { major, minor }),
                });
            }
            Ok(devices)
        }
    }
}

/// Each `unsafe fn` here has the contract its declaration in [`Driver`] states under
/// `# Safety`; each `unsafe` block inside says why that contract (or the driver's own state)
/// makes its call sound.
impl Driver for Hip {
    fn vendor(&self) -> Vendor {
        Vendor::Amdgpu
    }

    fn registered_host_address(&self, _host: *mut c_void) -> Result<*mut c_void> {
        Err(Error::new(
            ErrorKind::InvalidArgument,
            "the device address of registered host memory on AMD GPUs (hipHostGetDevicePointer \
             is not bound by gpu-embed)",
        ))
    }

    fn make_current(&self, device: &DeviceHandle) -> Result<Option<DeviceHandle>> {
        let ordinal = ordinal(device)?;
        let mut previous: c_int = 0;
        // SAFETY: writes the calling thread's current device ordinal.
        self.check(unsafe { (self.api.hipGetDevice)(&mut previous) }, || {
            "hipGetDevice".into()
        })?;
        if previous == ordinal {
            return Ok(None);
        }
        // SAFETY: an ordinal the runtime reported.
        self.check(unsafe { (self.api.hipSetDevice)(ordinal) }, || {
            format!("hipSetDevice({ordinal})")
        })?;
        Ok(Some(DeviceHandle::from_vendor(VENDOR, previous as usize)))
    }

    fn restore(&self, previous: DeviceHandle) {
        let Ok(previous) = ordinal(&previous) else {
            return;
        };
        // SAFETY: an ordinal the runtime reported before; a failure leaves ours current.
        let _ = unsafe { (self.api.hipSetDevice)(previous) };
    }

    fn unload_module(&self, loaded: ModuleHandle) {
        let Ok(loaded) = module(&loaded) else {
            return;
        };
        // Queued launches may still run its kernels; a failure has nowhere to go from here.
        let _ = self.synchronize();
        // SAFETY: a loaded module, not used afterwards.
        unsafe { (self.api.hipModuleUnload)(loaded) };
    }

    fn load_module(&self, object: &'static Object) -> Result<ModuleHandle> {
        self.load_image(object.bytes(), &object.describe())
    }

    fn load_image(&self, image: &[u8], what: &str) -> Result<ModuleHandle> {
        let mut module = std::ptr::null_mut();
        self.check(
            // SAFETY: a complete hsaco image (the runtime checks its ELF header).
            unsafe { (self.api.hipModuleLoadData)(&mut module, image.as_ptr().cast()) },
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
                (self.api.hipModuleGetFunction)(&mut function, loaded, c_name.as_ptr())
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
        let attribute = |which: sys::hipFunction_attribute, what: &str| {
            let mut value = 0;
            self.check(
                // SAFETY: a function of a loaded module on the current device.
                unsafe { (self.api.hipFuncGetAttribute)(&mut value, which, kernel) },
                || format!("reading the kernel's {what} (hipFuncGetAttribute)"),
            )?;
            Ok::<u64, Error>(u64::try_from(value).unwrap_or(0))
        };
        Ok(KernelAttributes {
            max_threads_per_block: attribute(
                sys::HIP_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK,
                "threads per block",
            )? as u32,
            static_shared_bytes: attribute(
                sys::HIP_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES,
                "static shared memory",
            )?,
            local_bytes_per_thread: attribute(
                sys::HIP_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES,
                "local memory",
            )?,
            registers: Some(attribute(sys::HIP_FUNC_ATTRIBUTE_NUM_REGS, "registers")? as u32),
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
            // SAFETY: a function of a loaded module on the current device; a fixed dynamic
            // shared memory size, no block size limit.
            unsafe {
                (self.api.hipModuleOccupancyMaxPotentialBlockSize)(
                    &mut grid,
                    &mut block,
                    kernel,
                    dynamic_shared as usize,
                    0,
                )
            },
            || "computing the occupancy (hipModuleOccupancyMaxPotentialBlockSize)".into(),
        )?;
        Ok((block.max(1) as u32, grid.max(1) as u32))
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
            (self.api.hipModuleLaunchKernel)(
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
        self.check(result, || "hipModuleLaunchKernel".into())
    }

    fn alloc(&self, bytes: usize) -> Result<u64> {
        let mut pointer = std::ptr::null_mut();
        // SAFETY: a valid out-pointer.
        self.check(unsafe { (self.api.hipMalloc)(&mut pointer, bytes) }, || {
            format!("allocating {bytes} bytes")
        })?;
        Ok(pointer as u64)
    }

    fn alloc_managed(&self, bytes: usize) -> Result<u64> {
        let mut pointer = std::ptr::null_mut();
        self.check(
            // SAFETY: a valid out-pointer; memory any stream may use.
            unsafe { (self.api.hipMallocManaged)(&mut pointer, bytes, sys::hipMemAttachGlobal) },
            || format!("allocating {bytes} bytes of managed memory"),
        )?;
        Ok(pointer as u64)
    }

    fn enable_peer_access(&self, peer: &DeviceHandle) -> Result<()> {
        let ordinal = ordinal(peer)?;
        // SAFETY: the ordinal of a device the runtime reported.
        match unsafe { (self.api.hipDeviceEnablePeerAccess)(ordinal, 0) } {
            sys::hipErrorPeerAccessAlreadyEnabled => Ok(()),
            result => self.check(result, || {
                format!("enabling peer access to device {ordinal} (hipDeviceEnablePeerAccess)")
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
        let (target_device, source_device) = (ordinal(target_device)?, ordinal(source_device)?);
        let queue = stream(queue)?;
        self.check(
            // SAFETY: the caller guarantees both ranges; the devices are ordinals the runtime
            // reported.
            unsafe {
                (self.api.hipMemcpyPeerAsync)(
                    target as *mut c_void,
                    target_device,
                    source as *const c_void,
                    source_device,
                    bytes,
                    queue,
                )
            },
            || "copying between devices (hipMemcpyPeerAsync)".into(),
        )?;
        Ok(true)
    }

    fn free(&self, pointer: u64) {
        // SAFETY: allocated by `alloc`; a failure here has nowhere to go.
        unsafe { (self.api.hipFree)(pointer as *mut c_void) };
    }

    unsafe fn copy_to_device(
        &self,
        target: u64,
        source: *const c_void,
        bytes: usize,
    ) -> Result<()> {
        // SAFETY: the caller guarantees both ranges.
        self.check(
            unsafe { (self.api.hipMemcpyHtoD)(target as *mut c_void, source.cast_mut(), bytes) },
            || "copying to the device".into(),
        )
    }

    unsafe fn copy_to_host(&self, target: *mut c_void, source: u64, bytes: usize) -> Result<()> {
        // SAFETY: the caller guarantees both ranges.
        self.check(
            unsafe { (self.api.hipMemcpyDtoH)(target, source as *mut c_void, bytes) },
            || "copying from the device".into(),
        )
    }

    unsafe fn fill(&self, target: u64, pattern: Pattern, count: usize) -> Result<()> {
        let target = target as sys::hipDeviceptr_t;
        // SAFETY: the caller guarantees the range and its alignment.
        let result = unsafe {
            match pattern {
                Pattern::U8(value) => (self.api.hipMemsetD8)(target, value, count),
                Pattern::U16(value) => (self.api.hipMemsetD16)(target, value, count),
                Pattern::U32(value) => (self.api.hipMemsetD32)(target, value as c_int, count),
            }
        };
        self.check(result, || {
            format!("setting {count} elements to {pattern:?}")
        })
    }

    fn memory_info(&self) -> Result<(u64, u64)> {
        let (mut free, mut total) = (0, 0);
        self.check(
            // SAFETY: valid out-pointers; a device is current.
            unsafe { (self.api.hipMemGetInfo)(&mut free, &mut total) },
            || "hipMemGetInfo".into(),
        )?;
        Ok((free as u64, total as u64))
    }

    unsafe fn copy_on_device(&self, target: u64, source: u64, bytes: usize) -> Result<()> {
        // SAFETY: the caller guarantees both ranges.
        self.check(
            unsafe {
                (self.api.hipMemcpyDtoD)(
                    target as sys::hipDeviceptr_t,
                    source as sys::hipDeviceptr_t,
                    bytes,
                )
            },
            || "copying on the device".into(),
        )
    }

    fn synchronize(&self) -> Result<()> {
        // SAFETY: no arguments.
        self.check(unsafe { (self.api.hipDeviceSynchronize)() }, || {
            "hipDeviceSynchronize".into()
        })
    }

    fn create_stream(&self) -> Result<StreamHandle> {
        let mut created = std::ptr::null_mut();
        // SAFETY: a valid out-pointer.
        self.check(unsafe { (self.api.hipStreamCreate)(&mut created) }, || {
            "hipStreamCreate".into()
        })?;
        Ok(StreamHandle::from_vendor(VENDOR, created as usize))
    }

    fn instantiate_graph(
        &self,
        record: &mut dyn FnMut(&StreamHandle) -> Result<()>,
    ) -> Result<Option<GraphHandle>> {
        let mut capturing = std::ptr::null_mut();
        self.check(
            // SAFETY: a valid out-pointer. Non-blocking: work on the default stream by other
            // threads cannot join (and so break) the capture.
            unsafe {
                (self.api.hipStreamCreateWithFlags)(&mut capturing, sys::hipStreamNonBlocking)
            },
            || "hipStreamCreateWithFlags".into(),
        )?;
        let begun = self.check(
            // SAFETY: a new stream; thread-local mode: only this thread's calls are checked
            // against the capture.
            unsafe {
                (self.api.hipStreamBeginCapture)(capturing, sys::hipStreamCaptureModeThreadLocal)
            },
            || "hipStreamBeginCapture".into(),
        );
        let recorded = begun.and_then(|()| {
            let recorded = record(&StreamHandle::from_vendor(VENDOR, capturing as usize));
            let mut captured = std::ptr::null_mut();
            // SAFETY: the capturing stream and a valid out-pointer; ends the capture even
            // after a failed `record`.
            let ended = self.check(
                unsafe { (self.api.hipStreamEndCapture)(capturing, &mut captured) },
                || "hipStreamEndCapture".into(),
            );
            recorded.and(ended).map(|()| captured)
        });
        // SAFETY: not used afterwards.
        unsafe { (self.api.hipStreamDestroy)(capturing) };
        let captured = recorded?;
        let mut executable = std::ptr::null_mut();
        // SAFETY: the captured graph, no error node or log wanted; the instance does not need
        // the graph afterwards.
        let instantiated = unsafe {
            (self.api.hipGraphInstantiate)(
                &mut executable,
                captured,
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                0,
            )
        };
        // SAFETY: the graph is not used afterwards.
        unsafe { (self.api.hipGraphDestroy)(captured) };
        self.check(instantiated, || "hipGraphInstantiate".into())?;
        Ok(Some(GraphHandle::from_vendor(VENDOR, executable as usize)))
    }

    unsafe fn launch_graph(&self, executable: &GraphHandle, queue: &StreamHandle) -> Result<()> {
        let (executable, queue) = (graph(executable)?, stream(queue)?);
        // SAFETY: as the caller guarantees.
        self.check(unsafe { (self.api.hipGraphLaunch)(executable, queue) }, || {
            "hipGraphLaunch".into()
        })
    }

    fn destroy_graph(&self, executable: GraphHandle) {
        let Ok(executable) = graph(&executable) else {
            return;
        };
        // HIP does not say that an instance still running may be destroyed: wait for it (a
        // failure has nowhere to go from here).
        let _ = self.synchronize();
        // SAFETY: not used afterwards.
        unsafe { (self.api.hipGraphExecDestroy)(executable) };
    }

    fn synchronize_stream(&self, queue: &StreamHandle) -> Result<()> {
        let queue = stream(queue)?;
        // SAFETY: a live stream.
        self.check(unsafe { (self.api.hipStreamSynchronize)(queue) }, || {
            "hipStreamSynchronize".into()
        })
    }

    fn destroy_stream(&self, queue: StreamHandle) {
        if queue.is_default() {
            return;
        }
        if let Ok(queue) = stream(&queue) {
            // SAFETY: a stream `create_stream` made, not used afterwards.
            unsafe { (self.api.hipStreamDestroy)(queue) };
        }
    }

    fn stream_wait_event(&self, queue: &StreamHandle, marker: &EventHandle) -> Result<()> {
        let (queue, marker) = (stream(queue)?, event(marker)?);
        // SAFETY: a live stream (or null) and a live event of the current device.
        self.check(
            unsafe { (self.api.hipStreamWaitEvent)(queue, marker, 0) },
            || "hipStreamWaitEvent".into(),
        )
    }

    fn create_event(&self) -> Result<EventHandle> {
        let mut created = std::ptr::null_mut();
        // SAFETY: a valid out-pointer.
        self.check(unsafe { (self.api.hipEventCreate)(&mut created) }, || {
            "hipEventCreate".into()
        })?;
        Ok(EventHandle::from_vendor(VENDOR, created as usize))
    }

    fn create_marker_event(&self) -> Option<Result<EventHandle>> {
        let mut created = std::ptr::null_mut();
        // SAFETY: a valid out-pointer.
        let result = self.check(
            unsafe { (self.api.hipEventCreateWithFlags)(&mut created, sys::hipEventDisableTiming) },
            || "hipEventCreateWithFlags".into(),
        );
        Some(result.map(|()| EventHandle::from_vendor(VENDOR, created as usize)))
    }

    fn record_event(&self, marker: &EventHandle, queue: &StreamHandle) -> Result<()> {
        let (marker, queue) = (event(marker)?, stream(queue)?);
        // SAFETY: a live event and stream (or null) of the current device.
        self.check(unsafe { (self.api.hipEventRecord)(marker, queue) }, || {
            "hipEventRecord".into()
        })
    }

    fn query_event(&self, marker: &EventHandle) -> Result<bool> {
        let marker = event(marker)?;
        // SAFETY: a live event.
        match unsafe { (self.api.hipEventQuery)(marker) } {
            sys::hipErrorNotReady => Ok(false),
            result => self.check(result, || "hipEventQuery".into()).map(|()| true),
        }
    }

    fn synchronize_event(&self, marker: &EventHandle) -> Result<()> {
        let marker = event(marker)?;
        // SAFETY: a live event.
        self.check(unsafe { (self.api.hipEventSynchronize)(marker) }, || {
            "hipEventSynchronize".into()
        })
    }

    fn elapsed_ms(&self, start: &EventHandle, end: &EventHandle) -> Result<f32> {
        let (start, end) = (event(start)?, event(end)?);
        let mut milliseconds = 0.0;
        self.check(
            // SAFETY: two live events and a valid out-pointer.
            unsafe { (self.api.hipEventElapsedTime)(&mut milliseconds, start, end) },
            || "hipEventElapsedTime".into(),
        )?;
        Ok(milliseconds)
    }

    fn destroy_event(&self, marker: EventHandle) {
        if let Ok(marker) = event(&marker) {
            // SAFETY: an event `create_event` made, not used afterwards.
            unsafe { (self.api.hipEventDestroy)(marker) };
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
        self.check(
            // SAFETY: the caller guarantees both ranges for the life of the copy.
            unsafe {
                (self.api.hipMemcpyHtoDAsync)(
                    target as sys::hipDeviceptr_t,
                    source.cast_mut(),
                    bytes,
                    queue,
                )
            },
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
            unsafe {
                (self.api.hipMemcpyDtoHAsync)(
                    target,
                    source as sys::hipDeviceptr_t,
                    bytes,
                    queue,
                )
            },
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
            unsafe {
                (self.api.hipMemcpyDtoDAsync)(
                    target as sys::hipDeviceptr_t,
                    source as sys::hipDeviceptr_t,
                    bytes,
                    queue,
                )
            },
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
        let (target, stream) = (target as sys::hipDeviceptr_t, stream(queue)?);
        // SAFETY: the caller guarantees the range and its alignment.
        let result = unsafe {
            match pattern {
                Pattern::U8(value) => (self.api.hipMemsetD8Async)(target, value, count, stream),
                Pattern::U16(value) => (self.api.hipMemsetD16Async)(target, value, count, stream),
                Pattern::U32(value) => {
                    (self.api.hipMemsetD32Async)(target, value as c_int, count, stream)
                }
            }
        };
        self.check(result, || {
            format!("setting {count} elements to {pattern:?}")
        })
    }

    fn alloc_pinned(&self, bytes: usize) -> Result<*mut c_void> {
        let mut pointer = std::ptr::null_mut();
        self.check(
            // SAFETY: a valid out-pointer; default flags.
            unsafe { (self.api.hipHostMalloc)(&mut pointer, bytes, 0) },
            || format!("allocating {bytes} bytes of page-locked memory"),
        )?;
        Ok(pointer)
    }

    unsafe fn free_pinned(&self, pointer: *mut c_void) {
        // SAFETY: as the caller guarantees.
        unsafe { (self.api.hipHostFree)(pointer) };
    }

    unsafe fn register(&self, pointer: *mut c_void, bytes: usize) -> Result<()> {
        // SAFETY: as the caller guarantees; default flags.
        self.check(
            unsafe { (self.api.hipHostRegister)(pointer, bytes, 0) },
            || format!("page-locking {bytes} bytes"),
        )
    }

    unsafe fn unregister(&self, pointer: *mut c_void) {
        // SAFETY: as the caller guarantees.
        unsafe { (self.api.hipHostUnregister)(pointer) };
    }
}
