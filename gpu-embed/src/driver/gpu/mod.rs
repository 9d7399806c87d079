//! The protocol CUDA and HIP share, written once: the [`Driver`] of a GPU vendor API over its
//! thin result layer ([`Api`], as cudarc's `driver/result.rs`): each vendor names every call
//! once, with its error mapping (`cuda/`, `hip/`), and the handles, the graph capture, the
//! kernel attributes and the copies are this file's.

use super::{DeviceHandle, EventHandle, FunctionHandle, GraphHandle, ModuleHandle, StreamHandle};
use super::{DeviceLimits, Driver, KernelAttributes, Pattern};
use crate::binary::{Object, Vendor};
use crate::error::Result;
use std::ffi::{c_int, c_void, CStr};

/// A vendor API's own handle type: a pointer (`CUstream`) or an ordinal (a HIP device).
pub(crate) trait Raw: Copy {
    fn into_bits(self) -> usize;
    fn from_bits(bits: usize) -> Self;
}

impl<T> Raw for *mut T {
    fn into_bits(self) -> usize {
        self.expose_provenance()
    }

    fn from_bits(bits: usize) -> Self {
        std::ptr::with_exposed_provenance_mut(bits)
    }
}

impl Raw for c_int {
    fn into_bits(self) -> usize {
        self as usize
    }

    fn from_bits(bits: usize) -> Self {
        bits as c_int
    }
}

/// A kernel attribute both vendors report (`cuFuncGetAttribute`, `hipFuncGetAttribute`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FunctionAttribute {
    MaxThreadsPerBlock,
    StaticSharedBytes,
    LocalBytesPerThread,
    Registers,
}

/// One vendor's result layer: each call of the protocol under its vendor's name, returning its
/// failure as an [`Error`](crate::Error) that names the call, its arguments unchanged.
///
/// Callers of each `unsafe fn` guarantee what the vendor's call requires: the handles are live ones this API
/// made (a stream may be the null default stream), on the current device; memory ranges hold
/// the bytes named and stay valid as the [`Driver`] method that makes the call states.
pub(crate) trait Api: Sync + 'static {
    /// Who made the handles this API takes back.
    const VENDOR: Vendor;
    /// A device as the API makes it current (CUDA's primary context, HIP's ordinal).
    type Device: Raw + PartialEq;
    type Module: Raw;
    type Function: Raw;
    type Stream: Raw;
    type Event: Raw;
    /// A captured graph, before instantiation.
    type Graph: Raw;
    /// An instantiated graph.
    type GraphExec: Raw;

    fn current_device(&self) -> Result<Self::Device>;
    /// The device a handle from discovery names, ready to be made current: CUDA retains the
    /// device's primary context the first time (only devices a program uses hold one). A
    /// device that is one already ([`Api::current_device`]'s) is itself.
    fn resolve_device(&self, device: Self::Device) -> Result<Self::Device> {
        Ok(device)
    }
    /// Whether `device`, as [`Api::current_device`] returned it, is no device at all (CUDA: no
    /// context current on the thread). Then there is nothing of another library's to put back,
    /// and the device made current stays so, as the CUDA runtime and cudarc leave theirs.
    fn is_none(&self, _device: Self::Device) -> bool {
        false
    }
    /// # Safety
    /// `device` is a device of this API (or what [`Api::current_device`] returned).
    unsafe fn set_current_device(&self, device: Self::Device) -> Result<()>;
    /// `image` as the API takes it: an hsaco, a cubin or NUL-terminated PTX.
    fn load_module(&self, image: &[u8], what: &str) -> Result<Self::Module>;
    unsafe fn unload_module(&self, module: Self::Module);
    unsafe fn function(
        &self,
        module: Self::Module,
        name: &CStr,
        what: &str,
    ) -> Result<Self::Function>;
    unsafe fn function_attribute(
        &self,
        function: Self::Function,
        attribute: FunctionAttribute,
    ) -> Result<u64>;
    /// Block size and minimum grid for the most occupancy.
    unsafe fn potential_block_size(
        &self,
        function: Self::Function,
        dynamic_shared: usize,
    ) -> Result<(c_int, c_int)>;
    /// Opts the function into `bytes` of dynamic shared memory; a vendor without the opt-in
    /// lets every kernel use all of it.
    unsafe fn allow_dynamic_shared(&self, function: Self::Function, bytes: c_int) -> Result<()> {
        let _ = (function, bytes);
        Ok(())
    }
    #[allow(clippy::too_many_arguments)] // cuLaunchKernel's own shape
    unsafe fn launch(
        &self,
        function: Self::Function,
        grid: [u32; 3],
        block: [u32; 3],
        shared: u32,
        stream: Self::Stream,
        params: *mut *mut c_void,
    ) -> Result<()>;
    fn alloc(&self, bytes: usize) -> Result<u64>;
    fn alloc_managed(&self, bytes: usize) -> Result<u64>;
    unsafe fn free(&self, pointer: u64);
    /// Enabled already is no error.
    unsafe fn enable_peer_access(&self, peer: Self::Device) -> Result<()>;
    unsafe fn copy_peer_async(
        &self,
        target: (u64, Self::Device),
        source: (u64, Self::Device),
        bytes: usize,
        stream: Self::Stream,
    ) -> Result<()>;
    unsafe fn copy_to_device(&self, target: u64, source: *const c_void, bytes: usize)
        -> Result<()>;
    unsafe fn copy_to_host(&self, target: *mut c_void, source: u64, bytes: usize) -> Result<()>;
    unsafe fn copy_on_device(&self, target: u64, source: u64, bytes: usize) -> Result<()>;
    /// `stream: None`: a synchronous fill.
    unsafe fn fill(
        &self,
        target: u64,
        pattern: Pattern,
        count: usize,
        stream: Option<Self::Stream>,
    ) -> Result<()>;
    unsafe fn copy_to_device_async(
        &self,
        target: u64,
        source: *const c_void,
        bytes: usize,
        stream: Self::Stream,
    ) -> Result<()>;
    unsafe fn copy_to_host_async(
        &self,
        target: *mut c_void,
        source: u64,
        bytes: usize,
        stream: Self::Stream,
    ) -> Result<()>;
    unsafe fn copy_on_device_async(
        &self,
        target: u64,
        source: u64,
        bytes: usize,
        stream: Self::Stream,
    ) -> Result<()>;
    fn alloc_pinned(&self, bytes: usize) -> Result<*mut c_void>;
    unsafe fn free_pinned(&self, pointer: *mut c_void);
    unsafe fn register(&self, pointer: *mut c_void, bytes: usize) -> Result<()>;
    unsafe fn unregister(&self, pointer: *mut c_void);
    fn memory_info(&self) -> Result<(u64, u64)>;
    fn synchronize(&self) -> Result<()>;
    /// A stream; `non_blocking`: one the default stream does not order against (a capture's,
    /// which work on the default stream by other threads must not join).
    fn create_stream(&self, non_blocking: bool) -> Result<Self::Stream>;
    unsafe fn synchronize_stream(&self, stream: Self::Stream) -> Result<()>;
    unsafe fn destroy_stream(&self, stream: Self::Stream);
    unsafe fn stream_wait_event(&self, stream: Self::Stream, event: Self::Event) -> Result<()>;
    /// An event; without `timing`, one only waited for (cheaper to record and wait for).
    fn create_event(&self, timing: bool) -> Result<Self::Event>;
    unsafe fn record_event(&self, event: Self::Event, stream: Self::Stream) -> Result<()>;
    /// Whether the work before the event's last recording has finished.
    unsafe fn query_event(&self, event: Self::Event) -> Result<bool>;
    unsafe fn synchronize_event(&self, event: Self::Event) -> Result<()>;
    unsafe fn elapsed_ms(&self, start: Self::Event, end: Self::Event) -> Result<f32>;
    unsafe fn destroy_event(&self, event: Self::Event);
    /// Starts capturing, in thread-local mode: only this thread's calls are checked against
    /// the capture.
    unsafe fn begin_capture(&self, stream: Self::Stream) -> Result<()>;
    unsafe fn end_capture(&self, stream: Self::Stream) -> Result<Self::Graph>;
    unsafe fn instantiate_graph(&self, graph: Self::Graph) -> Result<Self::GraphExec>;
    unsafe fn destroy_captured_graph(&self, graph: Self::Graph);
    unsafe fn launch_graph(&self, graph: Self::GraphExec, stream: Self::Stream) -> Result<()>;
    /// Destroys an instantiated graph; launches of it still queued run to the end.
    unsafe fn destroy_graph(&self, graph: Self::GraphExec);
    /// See [`Driver::registered_host_address`].
    fn registered_host_address(&self, host: *mut c_void) -> Result<*mut c_void>;
}

/// A loaded GPU vendor driver: its result layer and the name its library was loaded as.
pub(crate) struct GpuDriver<A: Api> {
    pub api: A,
    /// The name the library was loaded as, for messages.
    pub library: &'static str,
    /// The devices discovery could not use, each with the reason.
    pub skipped: std::sync::Mutex<Vec<String>>,
}

fn module<A: Api>(module: &ModuleHandle) -> Result<A::Module> {
    Ok(A::Module::from_bits(module.vendor_value(A::VENDOR)?))
}

fn function<A: Api>(function: &FunctionHandle) -> Result<A::Function> {
    Ok(A::Function::from_bits(function.vendor_value(A::VENDOR)?))
}

/// The stream a handle names; null for the default stream.
fn stream<A: Api>(stream: &StreamHandle) -> Result<A::Stream> {
    if stream.is_default() {
        return Ok(A::Stream::from_bits(0));
    }
    Ok(A::Stream::from_bits(stream.vendor_value(A::VENDOR)?))
}

fn event<A: Api>(event: &EventHandle) -> Result<A::Event> {
    Ok(A::Event::from_bits(event.vendor_value(A::VENDOR)?))
}

fn graph<A: Api>(graph: &GraphHandle) -> Result<A::GraphExec> {
    Ok(A::GraphExec::from_bits(graph.vendor_value(A::VENDOR)?))
}

impl<A: Api> GpuDriver<A> {
    pub(crate) fn new(api: A, library: &'static str) -> GpuDriver<A> {
        GpuDriver {
            api,
            library,
            skipped: std::sync::Mutex::new(Vec::new()),
        }
    }

    /// A device handle of this driver, for discovery.
    pub(crate) fn device_handle(device: A::Device) -> DeviceHandle {
        DeviceHandle::from_vendor(A::VENDOR, device.into_bits())
    }

    /// The device `handle` names, ready to be made current ([`Api::resolve_device`]).
    fn device(&self, handle: &DeviceHandle) -> Result<A::Device> {
        let device = A::Device::from_bits(handle.vendor_value(A::VENDOR)?);
        self.api.resolve_device(device)
    }

    /// Notes a device discovery passes over, with the reason.
    pub(crate) fn skip(&self, why: String) {
        self.skipped
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(why);
    }

    /// The devices discovery passed over, each with the reason.
    pub(crate) fn skipped_devices(&self) -> Vec<String> {
        self.skipped
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }
}

/// Each `unsafe fn` here has the contract its declaration in [`Driver`] states under
/// `# Safety`. Every handle is taken back through its vendor's tag (a handle of another driver
/// is an error before any call), and the driver's handles stay alive until the safe API destroys
/// them after their last use: so each call below gets live handles of its own API, which is
/// what [`Api`]'s `unsafe fn`s ask; each `unsafe` block says what else it relies on.
impl<A: Api> Driver for GpuDriver<A> {
    fn vendor(&self) -> Vendor {
        A::VENDOR
    }

    fn registered_host_address(&self, host: *mut c_void) -> Result<*mut c_void> {
        self.api.registered_host_address(host)
    }

    fn streams_follow_the_default_stream(&self) -> bool {
        // The streams `create_stream` makes are blocking ones: each starts after the work the
        // legacy default stream had queued.
        true
    }

    fn make_current(&self, target: &DeviceHandle) -> Result<Option<DeviceHandle>> {
        let target = self.device(target)?;
        let previous = self.api.current_device()?;
        if previous == target {
            return Ok(None);
        }
        // SAFETY: a device this driver found.
        unsafe { self.api.set_current_device(target) }?;
        // A thread with no context keeps ours: putting nothing back cost two driver calls per
        // operation (a launch made six instead of four).
        Ok((!self.api.is_none(previous)).then(|| Self::device_handle(previous)))
    }

    fn restore(&self, previous: DeviceHandle) {
        if let Ok(previous) = self.device(&previous) {
            // SAFETY: what the thread had current before (its owner keeps a context alive
            // while it is current); a failure leaves ours current, as before this existed.
            let _ = unsafe { self.api.set_current_device(previous) };
        }
    }

    fn load_module(&self, object: &'static Object) -> Result<ModuleHandle> {
        self.load_image(object.image()?, &object.describe())
    }

    fn load_image(&self, image: &[u8], what: &str) -> Result<ModuleHandle> {
        let loaded = self.api.load_module(image, what)?;
        Ok(ModuleHandle::from_vendor(A::VENDOR, loaded.into_bits()))
    }

    fn unload_module(&self, loaded: ModuleHandle) {
        let Ok(loaded) = module::<A>(&loaded) else {
            return;
        };
        // Queued launches may still run its kernels; a failure has nowhere to go from here.
        let _ = self.api.synchronize();
        // SAFETY: a loaded module, not used afterwards.
        unsafe { self.api.unload_module(loaded) };
    }

    fn function(&self, loaded: &ModuleHandle, name: &str) -> Result<FunctionHandle> {
        let c_name = super::c_name(name)?;
        let what = format!("finding kernel `{name}`");
        // SAFETY: a loaded module and a NUL-terminated name.
        let found = unsafe { self.api.function(module::<A>(loaded)?, &c_name, &what) }?;
        Ok(FunctionHandle::from_vendor(A::VENDOR, found.into_bits()))
    }

    fn attributes(
        &self,
        kernel: &FunctionHandle,
        _limits: &DeviceLimits,
    ) -> Result<KernelAttributes> {
        let kernel = function::<A>(kernel)?;
        // SAFETY: a function of a loaded module on the current device.
        let read = |attribute| unsafe { self.api.function_attribute(kernel, attribute) };
        Ok(KernelAttributes {
            max_threads_per_block: read(FunctionAttribute::MaxThreadsPerBlock)? as u32,
            static_shared_bytes: read(FunctionAttribute::StaticSharedBytes)?,
            local_bytes_per_thread: read(FunctionAttribute::LocalBytesPerThread)?,
            registers: Some(read(FunctionAttribute::Registers)? as u32),
            required_block: None,
            subgroup_size: None,
        })
    }

    fn potential_block_size(
        &self,
        kernel: &FunctionHandle,
        dynamic_shared: u32,
        _limits: &DeviceLimits,
    ) -> Result<(u32, u32)> {
        let kernel = function::<A>(kernel)?;
        // SAFETY: a function of a loaded module on the current device.
        let (block, grid) = unsafe {
            self.api
                .potential_block_size(kernel, dynamic_shared as usize)
        }?;
        Ok((block.max(1) as u32, grid.max(1) as u32))
    }

    fn allow_dynamic_shared(&self, kernel: &FunctionHandle, bytes: u32) -> Result<()> {
        let kernel = function::<A>(kernel)?;
        let value = c_int::try_from(bytes).unwrap_or(c_int::MAX);
        // SAFETY: a function of a loaded module on the current device.
        unsafe { self.api.allow_dynamic_shared(kernel, value) }
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
        let (kernel, queue) = (function::<A>(kernel)?, stream::<A>(queue)?);
        // SAFETY: the caller guarantees `params` match the kernel.
        unsafe {
            self.api
                .launch(kernel, grid, block, shared, queue, params.as_mut_ptr())
        }
    }

    fn alloc(&self, bytes: usize) -> Result<u64> {
        self.api.alloc(bytes)
    }

    fn alloc_managed(&self, bytes: usize) -> Result<u64> {
        self.api.alloc_managed(bytes)
    }

    fn free(&self, pointer: u64) {
        // SAFETY: allocated by `alloc` (the trait's contract); a failure has nowhere to go.
        unsafe { self.api.free(pointer) };
    }

    fn enable_peer_access(&self, peer: &DeviceHandle) -> Result<()> {
        // SAFETY: a device this driver found.
        unsafe { self.api.enable_peer_access(self.device(peer)?) }
    }

    unsafe fn copy_peer_async(
        &self,
        (target, target_device): (u64, &DeviceHandle),
        (source, source_device): (u64, &DeviceHandle),
        bytes: usize,
        queue: &StreamHandle,
    ) -> Result<bool> {
        let target = (target, self.device(target_device)?);
        let source = (source, self.device(source_device)?);
        let queue = stream::<A>(queue)?;
        // SAFETY: the caller guarantees both ranges; the devices are this driver's.
        unsafe { self.api.copy_peer_async(target, source, bytes, queue) }?;
        Ok(true)
    }

    unsafe fn copy_to_device(
        &self,
        target: u64,
        source: *const c_void,
        bytes: usize,
    ) -> Result<()> {
        // SAFETY: the caller guarantees both ranges.
        unsafe { self.api.copy_to_device(target, source, bytes) }
    }

    unsafe fn copy_to_host(&self, target: *mut c_void, source: u64, bytes: usize) -> Result<()> {
        // SAFETY: the caller guarantees both ranges.
        unsafe { self.api.copy_to_host(target, source, bytes) }
    }

    unsafe fn copy_on_device(&self, target: u64, source: u64, bytes: usize) -> Result<()> {
        // SAFETY: the caller guarantees both ranges.
        unsafe { self.api.copy_on_device(target, source, bytes) }
    }

    unsafe fn fill(&self, target: u64, pattern: Pattern, count: usize) -> Result<()> {
        // SAFETY: the caller guarantees the range and its alignment.
        unsafe { self.api.fill(target, pattern, count, None) }
    }

    unsafe fn copy_to_device_async(
        &self,
        target: u64,
        source: *const c_void,
        bytes: usize,
        queue: &StreamHandle,
    ) -> Result<()> {
        let queue = stream::<A>(queue)?;
        // SAFETY: the caller guarantees both ranges for the life of the copy.
        unsafe { self.api.copy_to_device_async(target, source, bytes, queue) }
    }

    unsafe fn copy_to_host_async(
        &self,
        target: *mut c_void,
        source: u64,
        bytes: usize,
        queue: &StreamHandle,
    ) -> Result<()> {
        let queue = stream::<A>(queue)?;
        // SAFETY: the caller guarantees both ranges for the life of the copy.
        unsafe { self.api.copy_to_host_async(target, source, bytes, queue) }
    }

    unsafe fn copy_on_device_async(
        &self,
        target: u64,
        source: u64,
        bytes: usize,
        queue: &StreamHandle,
    ) -> Result<()> {
        let queue = stream::<A>(queue)?;
        // SAFETY: the caller guarantees both ranges for the life of the copy.
        unsafe { self.api.copy_on_device_async(target, source, bytes, queue) }
    }

    unsafe fn fill_async(
        &self,
        target: u64,
        pattern: Pattern,
        count: usize,
        queue: &StreamHandle,
    ) -> Result<()> {
        let queue = stream::<A>(queue)?;
        // SAFETY: the caller guarantees the range and its alignment for the life of the fill.
        unsafe { self.api.fill(target, pattern, count, Some(queue)) }
    }

    fn alloc_pinned(&self, bytes: usize) -> Result<*mut c_void> {
        self.api.alloc_pinned(bytes)
    }

    unsafe fn free_pinned(&self, pointer: *mut c_void) {
        // SAFETY: as the caller guarantees.
        unsafe { self.api.free_pinned(pointer) };
    }

    unsafe fn register(&self, pointer: *mut c_void, bytes: usize) -> Result<()> {
        // SAFETY: as the caller guarantees.
        unsafe { self.api.register(pointer, bytes) }
    }

    unsafe fn unregister(&self, pointer: *mut c_void) {
        // SAFETY: as the caller guarantees.
        unsafe { self.api.unregister(pointer) };
    }

    fn memory_info(&self) -> Result<(u64, u64)> {
        self.api.memory_info()
    }

    fn synchronize(&self) -> Result<()> {
        self.api.synchronize()
    }

    fn create_stream(&self) -> Result<StreamHandle> {
        let created = self.api.create_stream(false)?;
        Ok(StreamHandle::from_vendor(A::VENDOR, created.into_bits()))
    }

    fn synchronize_stream(&self, queue: &StreamHandle) -> Result<()> {
        // SAFETY: a live stream (or the default one).
        unsafe { self.api.synchronize_stream(stream::<A>(queue)?) }
    }

    fn destroy_stream(&self, queue: StreamHandle) {
        if queue.is_default() {
            return;
        }
        if let Ok(queue) = stream::<A>(&queue) {
            // SAFETY: a stream `create_stream` made, not used afterwards.
            unsafe { self.api.destroy_stream(queue) };
        }
    }

    fn stream_wait_event(&self, queue: &StreamHandle, marker: &EventHandle) -> Result<()> {
        let (queue, marker) = (stream::<A>(queue)?, event::<A>(marker)?);
        // SAFETY: a live stream (or the default one) and a live event of the current device.
        unsafe { self.api.stream_wait_event(queue, marker) }
    }

    fn create_event(&self) -> Result<EventHandle> {
        let created = self.api.create_event(true)?;
        Ok(EventHandle::from_vendor(A::VENDOR, created.into_bits()))
    }

    fn create_marker_event(&self) -> Option<Result<EventHandle>> {
        let created = self.api.create_event(false);
        Some(created.map(|created| EventHandle::from_vendor(A::VENDOR, created.into_bits())))
    }

    fn record_event(&self, marker: &EventHandle, queue: &StreamHandle) -> Result<()> {
        let (marker, queue) = (event::<A>(marker)?, stream::<A>(queue)?);
        // SAFETY: a live event and stream (or the default one) of the current device.
        unsafe { self.api.record_event(marker, queue) }
    }

    fn query_event(&self, marker: &EventHandle) -> Result<bool> {
        // SAFETY: a live event.
        unsafe { self.api.query_event(event::<A>(marker)?) }
    }

    fn synchronize_event(&self, marker: &EventHandle) -> Result<()> {
        // SAFETY: a live event.
        unsafe { self.api.synchronize_event(event::<A>(marker)?) }
    }

    fn elapsed_ms(&self, start: &EventHandle, end: &EventHandle) -> Result<f32> {
        let (start, end) = (event::<A>(start)?, event::<A>(end)?);
        // SAFETY: two live events.
        unsafe { self.api.elapsed_ms(start, end) }
    }

    fn destroy_event(&self, marker: EventHandle) {
        if let Ok(marker) = event::<A>(&marker) {
            // SAFETY: an event `create_event` made, not used afterwards.
            unsafe { self.api.destroy_event(marker) };
        }
    }

    fn instantiate_graph(
        &self,
        record: &mut dyn FnMut(&StreamHandle) -> Result<()>,
    ) -> Result<Option<GraphHandle>> {
        let capturing = self.api.create_stream(true)?;
        // SAFETY: the new stream.
        let begun = unsafe { self.api.begin_capture(capturing) };
        let captured = begun.and_then(|()| {
            let recorded = record(&StreamHandle::from_vendor(A::VENDOR, capturing.into_bits()));
            // SAFETY: the capturing stream; ends the capture even after a failed `record`.
            let ended = unsafe { self.api.end_capture(capturing) };
            match (recorded, ended) {
                (Ok(()), ended) => ended,
                (Err(error), Ok(graph)) => {
                    // SAFETY: the graph ending the capture made, not used afterwards.
                    unsafe { self.api.destroy_captured_graph(graph) };
                    Err(error)
                }
                (Err(error), Err(_)) => Err(error),
            }
        });
        // SAFETY: the capture's own stream, not used afterwards.
        unsafe { self.api.destroy_stream(capturing) };
        let captured = captured?;
        // SAFETY: the captured graph; the instance does not need it afterwards.
        let instantiated = unsafe { self.api.instantiate_graph(captured) };
        // SAFETY: the captured graph, not used afterwards.
        unsafe { self.api.destroy_captured_graph(captured) };
        Ok(Some(GraphHandle::from_vendor(
            A::VENDOR,
            instantiated?.into_bits(),
        )))
    }

    unsafe fn launch_graph(&self, executable: &GraphHandle, queue: &StreamHandle) -> Result<()> {
        let (executable, queue) = (graph::<A>(executable)?, stream::<A>(queue)?);
        // SAFETY: as the caller guarantees.
        unsafe { self.api.launch_graph(executable, queue) }
    }

    fn destroy_graph(&self, executable: GraphHandle) {
        if let Ok(executable) = graph::<A>(&executable) {
            // SAFETY: an instance `instantiate_graph` made, not used afterwards.
            unsafe { self.api.destroy_graph(executable) };
        }
    }
}
