//! CUDA's result layer: each call of the shared protocol (`gpu/`) under its CUDA name. Every
//! `unsafe` block below makes one driver call whose handles and ranges the caller vouches for
//! ([`Api`]'s contract), with valid out-pointers of its own.

use super::{sys, CudaApi};
use crate::binary::Vendor;
use crate::driver::gpu::{Api, FunctionAttribute};
use crate::driver::Pattern;
use crate::error::Result;
use std::ffi::{c_int, c_void, CStr};

impl Api for CudaApi {
    const VENDOR: Vendor = Vendor::Nvptx;
    type Device = sys::CUcontext;
    type Module = sys::CUmodule;
    type Function = sys::CUfunction;
    type Stream = sys::CUstream;
    type Event = sys::CUevent;
    type Graph = sys::CUgraph;
    type GraphExec = sys::CUgraphExec;

    fn current_device(&self) -> Result<sys::CUcontext> {
        let mut current = std::ptr::null_mut();
        self.check(
            // SAFETY: writes the calling thread's current context (or null).
            unsafe { (self.entry.cuCtxGetCurrent)(&mut current) },
            || "cuCtxGetCurrent".into(),
        )?;
        Ok(current)
    }

    /// A device from discovery is its ordinal, tagged (`unretained`): its primary context,
    /// retained the first time.
    fn resolve_device(&self, device: sys::CUcontext) -> Result<sys::CUcontext> {
        let bits = device.addr();
        if bits & 1 == 0 {
            return Ok(device);
        }
        self.primary_context((bits >> 1) as c_int)
    }

    fn is_none(&self, context: sys::CUcontext) -> bool {
        context.is_null()
    }

    unsafe fn set_current_device(&self, context: sys::CUcontext) -> Result<()> {
        // SAFETY: see the module's documentation.
        self.check(unsafe { (self.entry.cuCtxSetCurrent)(context) }, || {
            "cuCtxSetCurrent".into()
        })
    }

    fn load_module(&self, image: &[u8], what: &str) -> Result<sys::CUmodule> {
        // A cubin is an ELF file; anything else is PTX, which the driver reads as a C string.
        let terminated: Vec<u8>;
        let image = if image.starts_with(b"\x7fELF") || image.ends_with(&[0]) {
            image
        } else {
            terminated = image.iter().copied().chain([0]).collect();
            &terminated
        };
        // The JIT's error log (ptxas's messages for PTX that does not compile), for the error.
        let mut log = vec![0u8; 16 * 1024];
        let mut options = [
            sys::CU_JIT_ERROR_LOG_BUFFER,
            sys::CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
        ];
        let mut values: [*mut c_void; 2] = [
            log.as_mut_ptr().cast(),
            std::ptr::without_provenance_mut(log.len()),
        ];
        let mut module = std::ptr::null_mut();
        // SAFETY: a complete cubin or NUL-terminated PTX; two options with their values: a
        // buffer of `log.len()` bytes the driver writes a NUL-terminated log into, and its size.
        let result = unsafe {
            (self.entry.cuModuleLoadDataEx)(
                &mut module,
                image.as_ptr().cast(),
                2,
                options.as_mut_ptr(),
                values.as_mut_ptr(),
            )
        };
        self.check(result, || {
            let written = log.iter().position(|&b| b == 0).unwrap_or(log.len());
            match String::from_utf8_lossy(&log[..written]).trim() {
                "" => format!("loading {what}"),
                text => format!("loading {what} (the driver's log: {text})"),
            }
        })?;
        Ok(module)
    }

    unsafe fn unload_module(&self, module: sys::CUmodule) {
        // SAFETY: see the module's documentation.
        unsafe { (self.entry.cuModuleUnload)(module) };
    }

    unsafe fn function(
        &self,
        module: sys::CUmodule,
        name: &CStr,
        what: &str,
    ) -> Result<sys::CUfunction> {
        let mut function = std::ptr::null_mut();
        self.check(
            // SAFETY: see the module's documentation.
            unsafe { (self.entry.cuModuleGetFunction)(&mut function, module, name.as_ptr()) },
            || what.into(),
        )?;
        Ok(function)
    }

    unsafe fn function_attribute(
        &self,
        function: sys::CUfunction,
        attribute: FunctionAttribute,
    ) -> Result<u64> {
        let (which, what) = match attribute {
            FunctionAttribute::MaxThreadsPerBlock => (
                sys::CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK,
                "threads per block",
            ),
            FunctionAttribute::StaticSharedBytes => (
                sys::CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES,
                "static shared memory",
            ),
            FunctionAttribute::LocalBytesPerThread => {
                (sys::CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, "local memory")
            }
            FunctionAttribute::Registers => (sys::CU_FUNC_ATTRIBUTE_NUM_REGS, "registers"),
        };
        let mut value = 0;
        self.check(
            // SAFETY: see the module's documentation.
            unsafe { (self.entry.cuFuncGetAttribute)(&mut value, which, function) },
            || format!("reading the kernel's {what} (cuFuncGetAttribute)"),
        )?;
        Ok(u64::try_from(value).unwrap_or(0))
    }

    unsafe fn potential_block_size(
        &self,
        function: sys::CUfunction,
        dynamic_shared: usize,
    ) -> Result<(c_int, c_int)> {
        let (mut grid, mut block) = (0, 0);
        self.check(
            // SAFETY: see the module's documentation; no callback, a fixed dynamic shared
            // memory size, no block size limit.
            unsafe {
                (self.entry.cuOccupancyMaxPotentialBlockSize)(
                    &mut grid,
                    &mut block,
                    function,
                    None,
                    dynamic_shared,
                    0,
                )
            },
            || "computing the occupancy (cuOccupancyMaxPotentialBlockSize)".into(),
        )?;
        Ok((block, grid))
    }

    unsafe fn allow_dynamic_shared(&self, function: sys::CUfunction, bytes: c_int) -> Result<()> {
        self.check(
            // SAFETY: see the module's documentation.
            unsafe {
                (self.entry.cuFuncSetAttribute)(
                    function,
                    sys::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                    bytes,
                )
            },
            || format!("opting into {bytes} bytes of dynamic shared memory (cuFuncSetAttribute)"),
        )
    }

    unsafe fn launch(
        &self,
        function: sys::CUfunction,
        [gx, gy, gz]: [u32; 3],
        [bx, by, bz]: [u32; 3],
        shared: u32,
        stream: sys::CUstream,
        params: *mut *mut c_void,
    ) -> Result<()> {
        // SAFETY: see the module's documentation; `params` match the kernel.
        let result = unsafe {
            (self.entry.cuLaunchKernel)(
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
        self.check(result, || "cuLaunchKernel".into())
    }

    fn alloc(&self, bytes: usize) -> Result<u64> {
        let mut pointer = 0;
        self.check(
            // SAFETY: a valid out-pointer.
            unsafe { (self.entry.cuMemAlloc_v2)(&mut pointer, bytes) },
            || format!("allocating {bytes} bytes"),
        )?;
        Ok(pointer)
    }

    fn alloc_managed(&self, bytes: usize) -> Result<u64> {
        let mut pointer = 0;
        self.check(
            // SAFETY: a valid out-pointer; memory any stream may use.
            unsafe {
                (self.entry.cuMemAllocManaged)(&mut pointer, bytes, sys::CU_MEM_ATTACH_GLOBAL)
            },
            || format!("allocating {bytes} bytes of managed memory"),
        )?;
        Ok(pointer)
    }

    unsafe fn free(&self, pointer: u64) {
        // SAFETY: see the module's documentation.
        unsafe { (self.entry.cuMemFree_v2)(pointer) };
    }

    unsafe fn enable_peer_access(&self, peer: sys::CUcontext) -> Result<()> {
        // SAFETY: see the module's documentation.
        match unsafe { (self.entry.cuCtxEnablePeerAccess)(peer, 0) } {
            sys::CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED => Ok(()),
            result => self.check(result, || {
                "enabling peer access (cuCtxEnablePeerAccess)".into()
            }),
        }
    }

    unsafe fn copy_peer_async(
        &self,
        (target, target_context): (u64, sys::CUcontext),
        (source, source_context): (u64, sys::CUcontext),
        bytes: usize,
        stream: sys::CUstream,
    ) -> Result<()> {
        self.check(
            // SAFETY: see the module's documentation.
            unsafe {
                (self.entry.cuMemcpyPeerAsync)(
                    target,
                    target_context,
                    source,
                    source_context,
                    bytes,
                    stream,
                )
            },
            || "copying between devices (cuMemcpyPeerAsync)".into(),
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
            unsafe { (self.entry.cuMemcpyHtoD_v2)(target, source, bytes) },
            || "copying to the device".into(),
        )
    }

    unsafe fn copy_to_host(&self, target: *mut c_void, source: u64, bytes: usize) -> Result<()> {
        self.check(
            // SAFETY: see the module's documentation.
            unsafe { (self.entry.cuMemcpyDtoH_v2)(target, source, bytes) },
            || "copying from the device".into(),
        )
    }

    unsafe fn copy_on_device(&self, target: u64, source: u64, bytes: usize) -> Result<()> {
        self.check(
            // SAFETY: see the module's documentation.
            unsafe { (self.entry.cuMemcpyDtoD_v2)(target, source, bytes) },
            || "copying on the device".into(),
        )
    }

    unsafe fn fill(
        &self,
        target: u64,
        pattern: Pattern,
        count: usize,
        stream: Option<sys::CUstream>,
    ) -> Result<()> {
        let api = &self.entry;
        // SAFETY: see the module's documentation.
        let result = unsafe {
            match (pattern, stream) {
                (Pattern::U8(value), None) => (api.cuMemsetD8_v2)(target, value, count),
                (Pattern::U16(value), None) => (api.cuMemsetD16_v2)(target, value, count),
                (Pattern::U32(value), None) => (api.cuMemsetD32_v2)(target, value, count),
                (Pattern::U8(value), Some(s)) => (api.cuMemsetD8Async)(target, value, count, s),
                (Pattern::U16(value), Some(s)) => (api.cuMemsetD16Async)(target, value, count, s),
                (Pattern::U32(value), Some(s)) => (api.cuMemsetD32Async)(target, value, count, s),
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
        stream: sys::CUstream,
    ) -> Result<()> {
        self.check(
            // SAFETY: see the module's documentation.
            unsafe { (self.entry.cuMemcpyHtoDAsync_v2)(target, source, bytes, stream) },
            || "copying to the device".into(),
        )
    }

    unsafe fn copy_to_host_async(
        &self,
        target: *mut c_void,
        source: u64,
        bytes: usize,
        stream: sys::CUstream,
    ) -> Result<()> {
        self.check(
            // SAFETY: see the module's documentation.
            unsafe { (self.entry.cuMemcpyDtoHAsync_v2)(target, source, bytes, stream) },
            || "copying from the device".into(),
        )
    }

    unsafe fn copy_on_device_async(
        &self,
        target: u64,
        source: u64,
        bytes: usize,
        stream: sys::CUstream,
    ) -> Result<()> {
        self.check(
            // SAFETY: see the module's documentation.
            unsafe { (self.entry.cuMemcpyDtoDAsync_v2)(target, source, bytes, stream) },
            || "copying on the device".into(),
        )
    }

    fn alloc_pinned(&self, bytes: usize) -> Result<*mut c_void> {
        let mut pointer = std::ptr::null_mut();
        self.check(
            // SAFETY: a valid out-pointer.
            unsafe { (self.entry.cuMemAllocHost_v2)(&mut pointer, bytes) },
            || format!("allocating {bytes} bytes of page-locked memory"),
        )?;
        Ok(pointer)
    }

    unsafe fn free_pinned(&self, pointer: *mut c_void) {
        // SAFETY: see the module's documentation.
        unsafe { (self.entry.cuMemFreeHost)(pointer) };
    }

    unsafe fn register(&self, pointer: *mut c_void, bytes: usize) -> Result<()> {
        // `cuda.h`'s CU_MEMHOSTREGISTER_DEVICEMAP: mapped into the device's address space, so
        // that `cuMemHostGetDevicePointer` gives its address (implied under unified addressing).
        const DEVICEMAP: std::ffi::c_uint = 0x02;
        self.check(
            // SAFETY: see the module's documentation.
            unsafe { (self.entry.cuMemHostRegister_v2)(pointer, bytes, DEVICEMAP) },
            || format!("page-locking {bytes} bytes"),
        )
    }

    /// The device's address of registered memory: the host's own where the device can use host
    /// pointers (CU_DEVICE_ATTRIBUTE_CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM), else another;
    /// `cuMemHostGetDevicePointer` answers either way.
    fn registered_host_address(&self, host: *mut c_void) -> Result<*mut c_void> {
        let mut device = 0;
        self.check(
            // SAFETY: a valid out-pointer; `host` is registered memory (the caller's promise to
            // `Driver::registered_host_address`), a context current.
            unsafe { (self.entry.cuMemHostGetDevicePointer_v2)(&mut device, host, 0) },
            || "cuMemHostGetDevicePointer".into(),
        )?;
        Ok(std::ptr::with_exposed_provenance_mut(device as usize))
    }

    unsafe fn unregister(&self, pointer: *mut c_void) {
        // SAFETY: see the module's documentation.
        unsafe { (self.entry.cuMemHostUnregister)(pointer) };
    }

    fn memory_info(&self) -> Result<(u64, u64)> {
        let (mut free, mut total) = (0, 0);
        self.check(
            // SAFETY: valid out-pointers; a context is current.
            unsafe { (self.entry.cuMemGetInfo_v2)(&mut free, &mut total) },
            || "cuMemGetInfo".into(),
        )?;
        Ok((free as u64, total as u64))
    }

    fn synchronize(&self) -> Result<()> {
        // SAFETY: no arguments.
        self.check(unsafe { (self.entry.cuCtxSynchronize)() }, || {
            "cuCtxSynchronize".into()
        })
    }

    fn create_stream(&self, non_blocking: bool) -> Result<sys::CUstream> {
        let flags = if non_blocking {
            sys::CU_STREAM_NON_BLOCKING
        } else {
            0
        };
        let mut stream = std::ptr::null_mut();
        self.check(
            // SAFETY: a valid out-pointer.
            unsafe { (self.entry.cuStreamCreate)(&mut stream, flags) },
            || "cuStreamCreate".into(),
        )?;
        Ok(stream)
    }

    unsafe fn synchronize_stream(&self, stream: sys::CUstream) -> Result<()> {
        // SAFETY: see the module's documentation.
        self.check(unsafe { (self.entry.cuStreamSynchronize)(stream) }, || {
            "cuStreamSynchronize".into()
        })
    }

    unsafe fn destroy_stream(&self, stream: sys::CUstream) {
        // SAFETY: see the module's documentation.
        unsafe { (self.entry.cuStreamDestroy_v2)(stream) };
    }

    unsafe fn stream_wait_event(&self, stream: sys::CUstream, event: sys::CUevent) -> Result<()> {
        self.check(
            // SAFETY: see the module's documentation.
            unsafe { (self.entry.cuStreamWaitEvent)(stream, event, 0) },
            || "cuStreamWaitEvent".into(),
        )
    }

    fn create_event(&self, timing: bool) -> Result<sys::CUevent> {
        let flags = if timing {
            0
        } else {
            sys::CU_EVENT_DISABLE_TIMING
        };
        let mut event = std::ptr::null_mut();
        self.check(
            // SAFETY: a valid out-pointer.
            unsafe { (self.entry.cuEventCreate)(&mut event, flags) },
            || "cuEventCreate".into(),
        )?;
        Ok(event)
    }

    unsafe fn record_event(&self, event: sys::CUevent, stream: sys::CUstream) -> Result<()> {
        // SAFETY: see the module's documentation.
        self.check(unsafe { (self.entry.cuEventRecord)(event, stream) }, || {
            "cuEventRecord".into()
        })
    }

    unsafe fn query_event(&self, event: sys::CUevent) -> Result<bool> {
        // SAFETY: see the module's documentation.
        match unsafe { (self.entry.cuEventQuery)(event) } {
            sys::CUDA_ERROR_NOT_READY => Ok(false),
            result => self.check(result, || "cuEventQuery".into()).map(|()| true),
        }
    }

    unsafe fn synchronize_event(&self, event: sys::CUevent) -> Result<()> {
        // SAFETY: see the module's documentation.
        self.check(unsafe { (self.entry.cuEventSynchronize)(event) }, || {
            "cuEventSynchronize".into()
        })
    }

    unsafe fn elapsed_ms(&self, start: sys::CUevent, end: sys::CUevent) -> Result<f32> {
        let mut milliseconds = 0.0;
        self.check(
            // SAFETY: see the module's documentation.
            unsafe { (self.entry.cuEventElapsedTime)(&mut milliseconds, start, end) },
            || "cuEventElapsedTime".into(),
        )?;
        Ok(milliseconds)
    }

    unsafe fn destroy_event(&self, event: sys::CUevent) {
        // SAFETY: see the module's documentation.
        unsafe { (self.entry.cuEventDestroy_v2)(event) };
    }

    unsafe fn begin_capture(&self, stream: sys::CUstream) -> Result<()> {
        self.check(
            // SAFETY: see the module's documentation.
            unsafe {
                (self.entry.cuStreamBeginCapture_v2)(
                    stream,
                    sys::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL,
                )
            },
            || "cuStreamBeginCapture".into(),
        )
    }

    unsafe fn end_capture(&self, stream: sys::CUstream) -> Result<sys::CUgraph> {
        let mut graph = std::ptr::null_mut();
        self.check(
            // SAFETY: see the module's documentation.
            unsafe { (self.entry.cuStreamEndCapture)(stream, &mut graph) },
            || "cuStreamEndCapture".into(),
        )?;
        Ok(graph)
    }

    unsafe fn instantiate_graph(&self, graph: sys::CUgraph) -> Result<sys::CUgraphExec> {
        let mut executable = std::ptr::null_mut();
        self.check(
            // SAFETY: see the module's documentation.
            unsafe { (self.entry.cuGraphInstantiateWithFlags)(&mut executable, graph, 0) },
            || "cuGraphInstantiate".into(),
        )?;
        Ok(executable)
    }

    unsafe fn destroy_captured_graph(&self, graph: sys::CUgraph) {
        // SAFETY: see the module's documentation.
        unsafe { (self.entry.cuGraphDestroy)(graph) };
    }

    unsafe fn launch_graph(&self, graph: sys::CUgraphExec, stream: sys::CUstream) -> Result<()> {
        // SAFETY: see the module's documentation.
        self.check(unsafe { (self.entry.cuGraphLaunch)(graph, stream) }, || {
            "cuGraphLaunch".into()
        })
    }

    /// The driver frees it once queued launches have run.
    unsafe fn destroy_graph(&self, graph: sys::CUgraphExec) {
        // SAFETY: see the module's documentation.
        unsafe { (self.entry.cuGraphExecDestroy)(graph) };
    }
}
