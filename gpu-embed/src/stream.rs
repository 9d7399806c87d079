//! Streams: ordered queues of work on one device (their copies and fills: `copies.rs`), and
//! [`Queue`], where a launch or a copy goes.

use crate::device::{name_faulting_launch, Device, LastLaunch, LastLaunchSlot};
use crate::driver::StreamHandle;
use crate::error::Result;
use crate::trace::event;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

/// A device's streams are made here, beside [`Stream`], so that the device's own file need not
/// know the stream type (a stream holds its device).
impl Device {
    /// A new stream: work queued on it runs in order, concurrently with other streams.
    pub fn create_stream(&self) -> Result<Stream> {
        let raw = self
            .current()?
            .create_stream()
            .map_err(|e| self.context(e))?;
        Ok(Stream::new(self.clone(), raw))
    }

    /// The stream the whole-buffer helpers (`to_vec`, `fill`, `copy_from`, ...) queue on, made
    /// the first time: a stream of its own, so a helper waits for its buffer's work only (the
    /// buffers' tracking orders it), not for every stream as the default stream would. Kept for
    /// the life of the process: it holds its device, and devices live as long as the process.
    pub(crate) fn helper_stream(&self) -> Result<&'static Stream> {
        static HELPERS: Mutex<Vec<&'static Stream>> = Mutex::new(Vec::new());
        let mut helpers = HELPERS.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(stream) = helpers.iter().find(|stream| stream.device.is_same(self)) {
            return Ok(stream);
        }
        let stream: &'static Stream = Box::leak(Box::new(self.create_stream()?));
        helpers.push(stream);
        Ok(stream)
    }
}

/// An ordered queue of work on one device.
pub struct Stream {
    device: Device,
    raw: StreamHandle,
    last_launch: LastLaunchSlot,
    /// Unique in the process (a driver may hand a dropped stream's handle out again).
    id: u64,
    /// Lives as long as the stream: a capture left open by a dropped stream is found by its
    /// weak references and discarded (`graph.rs`).
    alive: Arc<()>,
    /// Whether the stream is capturing (`graph.rs` sets it under its captures' lock): every
    /// launch and copy on a stream asks, and a flag of its own spares them that lock, which
    /// every stream of the process shares.
    capturing: AtomicBool,
}

impl Stream {
    /// The stream `raw` the driver made on `device`.
    pub(crate) fn new(device: Device, raw: StreamHandle) -> Stream {
        static NEXT_ID: AtomicU64 = AtomicU64::new(1);
        Stream {
            device,
            raw,
            last_launch: LastLaunchSlot::default(),
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            alive: Arc::new(()),
            capturing: AtomicBool::new(false),
        }
    }

    /// Waits until everything queued on the stream has finished. A kernel fault names the last
    /// kernel launched on this stream.
    pub fn synchronize(&self) -> Result<()> {
        event!(debug, device = self.device.name(), stream = ?self.raw, "synchronize stream");
        let driver = self.device.current()?;
        driver.synchronize_stream(&self.raw).map_err(|e| {
            let e = e.map_message(|message| format!("{message} on {}", self.device.name()));
            name_faulting_launch(e, self.last_launch.get(), "on this stream")
        })
    }

    /// The stream's identity in this process.
    pub(crate) fn id(&self) -> u64 {
        self.id
    }

    /// Whether the stream still exists, for what outlives it.
    pub(crate) fn liveness(&self) -> std::sync::Weak<()> {
        Arc::downgrade(&self.alive)
    }

    /// Remembers a kernel launched on the stream.
    /// Whether work queued on the stream is captured into a graph instead of run.
    pub(crate) fn capturing(&self) -> bool {
        self.capturing.load(Ordering::Acquire)
    }

    /// Marks the stream as capturing or not (`graph.rs`, under its captures' lock).
    pub(crate) fn set_capturing(&self, capturing: bool) {
        self.capturing.store(capturing, Ordering::Release);
    }

    pub(crate) fn launched(&self, launch: &'static LastLaunch) {
        self.last_launch.set(Some(launch));
    }

    /// The kernel launched last on this stream, to name in faults found later.
    pub(crate) fn last_launch(&self) -> Option<&'static LastLaunch> {
        self.last_launch.get()
    }

    /// The device the stream belongs to.
    pub fn device(&self) -> &Device {
        &self.device
    }

    /// The driver's stream (`CUstream`, `hipStream_t`), to enqueue work from other libraries
    /// (cuBLAS, rocBLAS) in order with this stream's. On the host it points at the host
    /// runtime's own queue, on Vulkan at the driver's own stream (a timeline semaphore and its
    /// submissions), which only this crate can use.
    pub fn raw_handle(&self) -> *mut std::ffi::c_void {
        self.raw.interop_pointer()
    }

    pub(crate) fn raw(&self) -> &StreamHandle {
        &self.raw
    }
}

impl std::fmt::Debug for Stream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Stream({} of {})", self.id, self.device.name())
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        if let Ok(driver) = self.device.current() {
            driver.destroy_stream(std::mem::replace(&mut self.raw, StreamHandle::DEFAULT));
        }
    }
}

/// Where work goes: one of a device's streams, or the device's default stream. Launches take
/// either (`&stream` or `&device`, through `Into`), so the device and the stream can never
/// disagree.
#[derive(Clone, Copy, Debug)]
pub enum Queue<'a> {
    /// The device's default stream, which CUDA and HIP order against every other stream.
    Default(&'a Device),
    /// A stream of its own device.
    Stream(&'a Stream),
}

impl<'a> Queue<'a> {
    /// The device the work runs on.
    pub fn device(&self) -> &'a Device {
        match self {
            Queue::Default(device) => device,
            Queue::Stream(stream) => stream.device(),
        }
    }

    /// The stream, unless it is the device's default one.
    pub fn stream(&self) -> Option<&'a Stream> {
        match self {
            Queue::Default(_) => None,
            Queue::Stream(stream) => Some(stream),
        }
    }

    /// The driver's stream handle ([`StreamHandle::DEFAULT`]: the default stream).
    pub(crate) fn handle(&self) -> &'a StreamHandle {
        self.stream().map_or(&StreamHandle::DEFAULT, Stream::raw)
    }
}

impl<'a> From<&'a Device> for Queue<'a> {
    fn from(device: &'a Device) -> Self {
        Queue::Default(device)
    }
}

impl<'a> From<&'a Stream> for Queue<'a> {
    fn from(stream: &'a Stream) -> Self {
        Queue::Stream(stream)
    }
}
