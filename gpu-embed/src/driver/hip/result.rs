//! HIP's result layer: each call of the shared protocol (`gpu/`) under its HIP name. Every
//! `unsafe` block below makes one runtime call whose handles and ranges the caller vouches for
//! ([`Api`]'s contract), with valid out-pointers of its own.

use super::{sys, HipApi};
use crate::binary::Vendor;
use crate::driver::gpu::{Api, FunctionAttribute};
use crate::driver::Pattern;
use crate::error::Result;
use std::ffi::{c_int, c_void, CStr};

/// A device address as HIP's calls take it.
fn device_pointer(address: u64) -> sys::hipDeviceptr_t {
    address as sys::hipDeviceptr_t
}

impl Api for HipApi {
    const VENDOR: Vendor = Vendor::Amdgpu;
    type Device = c_int;
    type Module = sys::hipModule_t;
    type Function = sys::hipFunction_t;
    type Stream = sys::hipStream_t;
    type Event = sys::hipEvent_t;
    type Graph = sys::hipGraph_t;
    type GraphExec = sys::hipGraphExec_t;

    fn current_device(&self) -> Result<c_int> {
        let mut ordinal = 0;
        // SAFETY: writes the calling thread's current device ordinal.
        self.check(unsafe { (self.entry.hipGetDevice)(&mut ordinal) }, || {
            "hipGetDevice".into()
        })?;
        Ok(ordinal)
    }

    unsafe fn set_current_device(&self, ordinal: c_int) -> Result<()> {
        // SAFETY: see the module's documentation.
        self.check(unsafe { (self.entry.hipSetDevice)(ordinal) }, || {
            format!("hipSetDevice({ordinal})")
        })
    }

    fn load_module(&self, image: &[u8], what: &str) -> Result<sys::hipModule_t> {
        let mut module = std::ptr::null_mut();
        self.check(
            // SAFETY: a complete hsaco image (the runtime checks its ELF header).
            unsafe { (self.entry.hipModuleLoadData)(&mut module, image.as_ptr().cast()) },
            || format!("loading {what}"),
        )?;
        Ok(module)
    }

    unsafe fn unload_module(&self, module: sys::hipModule_t) {
        // SAFETY: see the module's documentation.
        unsafe { (self.entry.hipModuleUnload)(module) };
    }

    unsafe fn function(
        &self,
        module: sys::hipModule_t,
        name: &CStr,
        what: &str,
    ) -> Result<sys::hipFunction_t> {
        let mut function = std::ptr::null_mut();
        self.check(
            // SAFETY: see the module's documentation.
            unsafe { (self.entry.hipModuleGetFunction)(&mut function, module, name.as_ptr()) },
            || what.into(),
        )?;
        Ok(function)
    }

    unsafe fn function_attribute(
        &self,
        function: sys::hipFunction_t,
        attribute: FunctionAttribute,
    ) -> Result<u64> {
        let (which, what) = match attribute {
            FunctionAttribute::MaxThreadsPerBlock => (
                sys::HIP_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK,
                "threads per block",
            ),
            FunctionAttribute::StaticSharedBytes => (
                sys::HIP_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES,
                "static shared memory",
            ),
            FunctionAttribute::LocalBytesPerThread => {
                (sys::HIP_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, "local memory")
            }
            FunctionAttribute::Registers => (sys::HIP_FUNC_ATTRIBUTE_NUM_REGS, "registers"),
        };
        let mut value = 0;
        self.check(
            // SAFETY: see the module's documentation.
            unsafe { (self.entry.hipFuncGetAttribute)(&mut value, which, function) },
            || format!("reading the kernel's {what} (hipFuncGetAttribute)"),
        )?;
        Ok(u64::try_from(value).unwrap_or(0))
    }

    unsafe fn potential_block_size(
        &self,
        function: sys::hipFunction_t,
        dynamic_shared: usize,
    ) -> Result<(c_int, c_int)> {
        let (mut grid, mut block) = (0, 0);
        self.check(
            // SAFETY: see the module's documentation; a fixed dynamic shared memory size, no
            // block size limit.
            unsafe {
                (self.entry.hipModuleOccupancyMaxPotentialBlockSize)(
                    &mut grid,
                    &mut block,
                    function,
                    dynamic_shared,
                    0,
                )
            },
            || "computing the occupancy (hipModuleOccupancyMaxPotentialBlockSize)".into(),
        )?;
        Ok((block, grid))
    }

    unsafe fn launch(
        &self,
        function: sys::hipFunction_t,
        [gx, gy, gz]: [u32; 3],
        [bx, by, bz]: [u32; 3],
        shared: u32,
        stream: sys::hipStream_t,
        params: *mut *mut c_void,
    ) -> Result<()> {
        // SAFETY: see the module's documentation; `params` match the kernel.
        let result = unsafe {
            (self.entry.hipModuleLaunchKernel)(
                function,
                gx,
                gy,
                gz,
                bx,
                by,
                bz,
                shared,
                stream,
                params,
                std::ptr::null_mut(),
            )
        };
        self.check(result, || "hipModuleLaunchKernel".into())
    }

    fn alloc(&self, bytes: usize) -> Result<u64> {
        let mut pointer = std::ptr::null_mut();
        self.check(
            // SAFETY: a valid out-pointer.
            unsafe { (self.entry.hipMalloc)(&mut pointer, bytes) },
            || format!("allocating {bytes} bytes"),
        )?;
        Ok(pointer as u64)
    }

    fn alloc_managed(&self, bytes: usize) -> Result<u64> {
        let mut pointer = std::ptr::null_mut();
        self.check(
            // SAFETY: a valid out-pointer; memory any stream may use.
            unsafe { (self.entry.hipMallocManaged)(&mut pointer, bytes, sys::hipMemAttachGlobal) },
            || format!("allocating {bytes} bytes of managed memory"),
        )?;
        Ok(pointer as u64)
    }

    unsafe fn free(&self, pointer: u64) {
        // SAFETY: see the module's documentation.
        unsafe { (self.entry.hipFree)(pointer as *mut c_void) };
    }

    unsafe fn enable_peer_access(&self, ordinal: c_int) -> Result<()> {
        // SAFETY: see the module's documentation.
        match unsafe { (self.entry.hipDeviceEnablePeerAccess)(ordinal, 0) } {
            sys::hipErrorPeerAccessAlreadyEnabled => Ok(()),
            result => self.check(result, || {
                format!("enabling peer access to device {ordinal} (hipDeviceEnablePeerAccess)")
            }),
        }
    }

    unsafe fn copy_peer_async(
        &self,
        (target, target_device): (u64, c_int),
        (source, source_device): (u64, c_int),
        bytes: usize,
        stream: sys::hipStream_t,
    ) -> Result<()> {
        self.check(
            // SAFETY: see the module's documentation.
            unsafe {
                (self.entry.hipMemcpyPeerAsync)(
                    target as *mut c_void,
                    target_device,
                    source as *const c_void,
                    source_device,
                    bytes,
                    stream,
                )
            },
            || "copying between devices (hipMemcpyPeerAsync)".into(),
        )
    }

    unsafe fn copy_to_device(
        &self,
        target: u64,
        source: *const c_void,
        bytes: usize,
    ) -> Result<()> {
        self.check(
            // SAFETY: see the module's documentation.
            unsafe { (self.entry.hipMemcpyHtoD)(device_pointer(target), source.cast_mut(), bytes) },
            || "copying to the device".into(),
        )
    }

    unsafe fn copy_to_host(&self, target: *mut c_void, source: u64, bytes: usize) -> Result<()> {
        self.check(
            // SAFETY: see the module's documentation.
            unsafe { (self.entry.hipMemcpyDtoH)(target, device_pointer(source), bytes) },
            || "copying from the device".into(),
        )
    }

    unsafe fn copy_on_device(&self, target: u64, source: u64, bytes: usize) -> Result<()> {
        self.check(
            // SAFETY: see the module's documentation.
            unsafe {
                (self.entry.hipMemcpyDtoD)(device_pointer(target), device_pointer(source), bytes)
            },
            || "copying on the device".into(),
        )
    }

    unsafe fn fill(
        &self,
        target: u64,
        pattern: Pattern,
        count: usize,
        stream: Option<sys::hipStream_t>,
    ) -> Result<()> {
        let (api, target) = (&self.entry, device_pointer(target));
        // SAFETY: see the module's documentation.
        let result = unsafe {
            match (pattern, stream) {
                (Pattern::U8(value), None) => (api.hipMemsetD8)(target, value, count),
                (Pattern::U16(value), None) => (api.hipMemsetD16)(target, value, count),
                (Pattern::U32(value), None) => (api.hipMemsetD32)(target, value as c_int, count),
                (Pattern::U8(value), Some(s)) => (api.hipMemsetD8Async)(target, value, count, s),
                (Pattern::U16(value), Some(s)) => (api.hipMemsetD16Async)(target, value, count, s),
                (Pattern::U32(value), Some(s)) => {
                    (api.hipMemsetD32Async)(target, value as c_int, count, s)
                }
            }
        };
        self.check(result, || {
            format!("setting {count} elements to {pattern:?}")
        })
    }

    unsafe fn copy_to_device_async(
        &self,
        target: u64,
        source: *const c_void,
        bytes: usize,
        stream: sys::hipStream_t,
    ) -> Result<()> {
        self.check(
            // SAFETY: see the module's documentation.
            unsafe {
                (self.entry.hipMemcpyHtoDAsync)(
                    device_pointer(target),
                    source.cast_mut(),
                    bytes,
                    stream,
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
        stream: sys::hipStream_t,
    ) -> Result<()> {
        self.check(
            // SAFETY: see the module's documentation.
            unsafe {
                (self.entry.hipMemcpyDtoHAsync)(target, device_pointer(source), bytes, stream)
            },
            || "copying from the device".into(),
        )
    }

    unsafe fn copy_on_device_async(
        &self,
        target: u64,
        source: u64,
        bytes: usize,
        stream: sys::hipStream_t,
    ) -> Result<()> {
        self.check(
            // SAFETY: see the module's documentation.
            unsafe {
                (self.entry.hipMemcpyDtoDAsync)(
                    device_pointer(target),
                    device_pointer(source),
                    bytes,
                    stream,
                )
            },
            || "copying on the device".into(),
        )
    }

    fn alloc_pinned(&self, bytes: usize) -> Result<*mut c_void> {
        let mut pointer = std::ptr::null_mut();
        self.check(
            // SAFETY: a valid out-pointer; default flags.
            unsafe { (self.entry.hipHostMalloc)(&mut pointer, bytes, 0) },
            || format!("allocating {bytes} bytes of page-locked memory"),
        )?;
        Ok(pointer)
    }

    unsafe fn free_pinned(&self, pointer: *mut c_void) {
        // SAFETY: see the module's documentation.
        unsafe { (self.entry.hipHostFree)(pointer) };
    }

    unsafe fn register(&self, pointer: *mut c_void, bytes: usize) -> Result<()> {
        // The HIP headers' hipHostRegisterMapped: mapped into the device's address space, so
        // that `hipHostGetDevicePointer` gives its address.
        const MAPPED: std::ffi::c_uint = 0x02;
        self.check(
            // SAFETY: see the module's documentation.
            unsafe { (self.entry.hipHostRegister)(pointer, bytes, MAPPED) },
            || format!("page-locking {bytes} bytes"),
        )
    }

    unsafe fn unregister(&self, pointer: *mut c_void) {
        // SAFETY: see the module's documentation.
        unsafe { (self.entry.hipHostUnregister)(pointer) };
    }

    fn memory_info(&self) -> Result<(u64, u64)> {
        let (mut free, mut total) = (0, 0);
        self.check(
            // SAFETY: valid out-pointers; a device is current.
            unsafe { (self.entry.hipMemGetInfo)(&mut free, &mut total) },
            || "hipMemGetInfo".into(),
        )?;
        Ok((free as u64, total as u64))
    }

    fn synchronize(&self) -> Result<()> {
        // SAFETY: no arguments.
        self.check(unsafe { (self.entry.hipDeviceSynchronize)() }, || {
            "hipDeviceSynchronize".into()
        })
    }

    fn create_stream(&self, non_blocking: bool) -> Result<sys::hipStream_t> {
        let mut stream = std::ptr::null_mut();
        if non_blocking {
            self.check(
                // SAFETY: a valid out-pointer.
                unsafe {
                    (self.entry.hipStreamCreateWithFlags)(&mut stream, sys::hipStreamNonBlocking)
                },
                || "hipStreamCreateWithFlags".into(),
            )?;
        } else {
            // SAFETY: a valid out-pointer.
            self.check(unsafe { (self.entry.hipStreamCreate)(&mut stream) }, || {
                "hipStreamCreate".into()
            })?;
        }
        Ok(stream)
    }

    unsafe fn synchronize_stream(&self, stream: sys::hipStream_t) -> Result<()> {
        // SAFETY: see the module's documentation.
        self.check(unsafe { (self.entry.hipStreamSynchronize)(stream) }, || {
            "hipStreamSynchronize".into()
        })
    }

    unsafe fn destroy_stream(&self, stream: sys::hipStream_t) {
        // SAFETY: see the module's documentation.
        unsafe { (self.entry.hipStreamDestroy)(stream) };
    }

    unsafe fn stream_wait_event(
        &self,
        stream: sys::hipStream_t,
        event: sys::hipEvent_t,
    ) -> Result<()> {
        self.check(
            // SAFETY: see the module's documentation.
            unsafe { (self.entry.hipStreamWaitEvent)(stream, event, 0) },
            || "hipStreamWaitEvent".into(),
        )
    }

    fn create_event(&self, timing: bool) -> Result<sys::hipEvent_t> {
        let mut event = std::ptr::null_mut();
        if timing {
            // SAFETY: a valid out-pointer.
            self.check(unsafe { (self.entry.hipEventCreate)(&mut event) }, || {
                "hipEventCreate".into()
            })?;
        } else {
            self.check(
                // SAFETY: a valid out-pointer.
                unsafe {
                    (self.entry.hipEventCreateWithFlags)(&mut event, sys::hipEventDisableTiming)
                },
                || "hipEventCreateWithFlags".into(),
            )?;
        }
        Ok(event)
    }

    unsafe fn record_event(&self, event: sys::hipEvent_t, stream: sys::hipStream_t) -> Result<()> {
        self.check(
            // SAFETY: see the module's documentation.
            unsafe { (self.entry.hipEventRecord)(event, stream) },
            || "hipEventRecord".into(),
        )
    }

    unsafe fn query_event(&self, event: sys::hipEvent_t) -> Result<bool> {
        // SAFETY: see the module's documentation.
        match unsafe { (self.entry.hipEventQuery)(event) } {
            sys::hipErrorNotReady => Ok(false),
            result => self.check(result, || "hipEventQuery".into()).map(|()| true),
        }
    }

    unsafe fn synchronize_event(&self, event: sys::hipEvent_t) -> Result<()> {
        // SAFETY: see the module's documentation.
        self.check(unsafe { (self.entry.hipEventSynchronize)(event) }, || {
            "hipEventSynchronize".into()
        })
    }

    unsafe fn elapsed_ms(&self, start: sys::hipEvent_t, end: sys::hipEvent_t) -> Result<f32> {
        let mut milliseconds = 0.0;
        self.check(
            // SAFETY: see the module's documentation.
            unsafe { (self.entry.hipEventElapsedTime)(&mut milliseconds, start, end) },
            || "hipEventElapsedTime".into(),
        )?;
        Ok(milliseconds)
    }

    unsafe fn destroy_event(&self, event: sys::hipEvent_t) {
        // SAFETY: see the module's documentation.
        unsafe { (self.entry.hipEventDestroy)(event) };
    }

    unsafe fn begin_capture(&self, stream: sys::hipStream_t) -> Result<()> {
        self.check(
            // SAFETY: see the module's documentation.
            unsafe {
                (self.entry.hipStreamBeginCapture)(stream, sys::hipStreamCaptureModeThreadLocal)
            },
            || "hipStreamBeginCapture".into(),
        )
    }

    unsafe fn end_capture(&self, stream: sys::hipStream_t) -> Result<sys::hipGraph_t> {
        let mut graph = std::ptr::null_mut();
        self.check(
            // SAFETY: see the module's documentation.
            unsafe { (self.entry.hipStreamEndCapture)(stream, &mut graph) },
            || "hipStreamEndCapture".into(),
        )?;
        Ok(graph)
    }

    unsafe fn instantiate_graph(&self, graph: sys::hipGraph_t) -> Result<sys::hipGraphExec_t> {
        let mut executable = std::ptr::null_mut();
        // SAFETY: see the module's documentation; no error node or log wanted.
        let result = unsafe {
            (self.entry.hipGraphInstantiate)(
                &mut executable,
                graph,
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                0,
            )
        };
        self.check(result, || "hipGraphInstantiate".into())?;
        Ok(executable)
    }

    unsafe fn destroy_captured_graph(&self, graph: sys::hipGraph_t) {
        // SAFETY: see the module's documentation.
        unsafe { (self.entry.hipGraphDestroy)(graph) };
    }

    unsafe fn launch_graph(
        &self,
        graph: sys::hipGraphExec_t,
        stream: sys::hipStream_t,
    ) -> Result<()> {
        self.check(
            // SAFETY: see the module's documentation.
            unsafe { (self.entry.hipGraphLaunch)(graph, stream) },
            || "hipGraphLaunch".into(),
        )
    }

    unsafe fn destroy_graph(&self, graph: sys::hipGraphExec_t) {
        // HIP does not say that an instance still running may be destroyed: wait for it (a
        // failure has nowhere to go from here).
        let _ = self.synchronize();
        // SAFETY: see the module's documentation.
        unsafe { (self.entry.hipGraphExecDestroy)(graph) };
    }

    /// The device's address of registered memory, which HIP may map elsewhere than the host's.
    fn registered_host_address(&self, host: *mut c_void) -> Result<*mut c_void> {
        let mut device = std::ptr::null_mut();
        self.check(
            // SAFETY: a valid out-pointer; `host` is registered memory (the caller's promise to
            // `Driver::registered_host_address`).
            unsafe { (self.entry.hipHostGetDevicePointer)(&mut device, host, 0) },
            || "hipHostGetDevicePointer".into(),
        )?;
        Ok(device)
    }
}
