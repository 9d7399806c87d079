//! Buffers remember the work queued on them (cudarc's rule): the event recorded after their last
//! write, and after each stream's reads since (one event per operation, shared by the buffers it
//! used). Work on another stream waits for those events before it touches the buffer, so two
//! streams sharing a buffer are ordered without a user event; dropping a buffer waits for its
//! own work only, not for the whole device. A driver that orders all work itself and keeps
//! freed memory until its work has run (Vulkan's one queue) needs none of it, and gets none.
//! Work on the default stream of a driver whose streams start after that stream's earlier work
//! (CUDA's and HIP's legacy default stream) records no event: other streams need none to follow
//! it, and the host waits for it by synchronizing that stream (as cudarc records none while a
//! program uses one stream).
//!
//! A buffer whose address was handed out ([`DeviceBuffer::device_ptr`](crate::DeviceBuffer)),
//! or whose work could not be marked (an event failed), may be used by work nobody recorded: it
//! waits for its whole device before it is freed, as every buffer did before.
//!
//! Several threads using one buffer at once are ordered as each call finds the buffer: the
//! checks and the marks are taken under the buffer's lock, the work is queued between them. A
//! launch on the default stream whose mark would change nothing (the buffer was written there
//! last, and not read since) takes no lock: it reads what the lock's last holder left
//! ([`BufferTracking`]).

use crate::device::Device;
use crate::error::Result;
use crate::event::Event;
use crate::stream::{Queue, Stream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

/// How work uses a buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Access {
    Read,
    Write,
}

/// The end of one operation on a queue, shared by every buffer it used.
#[derive(Clone)]
pub(crate) struct Mark {
    /// The stream's id ([`Stream::id`](crate::Stream)); none for a device's default stream.
    queue: Option<u64>,
    end: End,
}

/// How an operation's end is waited for.
#[derive(Clone)]
enum End {
    /// The event recorded after it.
    Event(Arc<Event>),
    /// Nothing recorded: it was queued on the default stream of this device, whose driver
    /// starts every stream it makes after that stream's earlier work
    /// (`Driver::streams_follow_the_default_stream`). An event per launch there was two driver
    /// calls of a launch's four.
    DefaultStream(Device),
}

impl Mark {
    /// The device the operation ran on.
    fn device(&self) -> &Device {
        match &self.end {
            End::Event(event) => event.device(),
            End::DefaultStream(device) => device,
        }
    }

    /// Waits, on the host, until the operation has run (for a default-stream mark, everything
    /// queued on that stream so far).
    fn wait(&self) -> Result<()> {
        match &self.end {
            End::Event(event) => event.synchronize(),
            End::DefaultStream(device) => device.synchronize_default_stream(),
        }
    }
}

/// What an operation leaves its buffers to wait for.
#[derive(Clone)]
pub(crate) enum After {
    /// The event recorded after it.
    Mark(Mark),
    /// Nothing the buffers can wait for: tracking is off for the device, or the event could
    /// not be recorded. The buffers then wait for their whole device when dropped.
    Unknown,
    /// Nothing needed: the device's driver orders every operation after all earlier ones and
    /// keeps freed memory until the work queued on it has run (Vulkan, `Driver::orders_all_work`).
    Ordered,
}

/// Records, on `queue`, the point the operation just queued there ends at.
pub(crate) fn mark_end(queue: &Queue) -> After {
    let device = queue.device();
    if !device.tracks() {
        return After::Unknown;
    }
    if device.orders_all_work() {
        return After::Ordered;
    }
    if queue.stream().is_none() && device.streams_follow_the_default_stream() {
        return After::Mark(Mark {
            queue: None,
            end: End::DefaultStream(device.clone()),
        });
    }
    let event = device
        .marker_event()
        .and_then(|event| queue.record(&event).map(|()| event));
    match event {
        Ok(event) => After::Mark(Mark {
            queue: queue.stream().map(Stream::id),
            end: End::Event(Arc::new(event)),
        }),
        Err(_) => After::Unknown,
    }
}

/// The stream that work queued on `queue` makes wait for buffers' earlier work on other
/// queues; none for a default stream, which follows every stream's earlier work already.
fn waiting_stream<'q>(queue: &Queue<'q>) -> Option<&'q Stream> {
    queue.stream()
}

/// What a buffer knows of the work queued on it.
#[derive(Default)]
pub(crate) struct Tracking {
    write: Option<Mark>,
    /// At most one per queue: its latest read since the last write.
    reads: Vec<Mark>,
    /// Work on the buffer may be unrecorded: its drop waits for the whole device.
    escaped: bool,
    /// The buffer is being dropped: nothing may queue work on it any more.
    retired: bool,
    /// The host holds a slice of the (managed) buffer: graphs refuse to replay work on it.
    on_host: bool,
}

impl Tracking {
    /// Makes `queue` wait for the work on other queues that `access` must follow: a read the
    /// last write, a write also every read since. The default stream already follows every
    /// stream's earlier work (CUDA's legacy default stream; every driver here keeps that rule).
    pub(crate) fn before(&self, queue: &Queue, access: Access) -> Result<()> {
        let Some(stream) = waiting_stream(queue) else {
            return Ok(());
        };
        let device = stream.device();
        if !device.tracks() || device.orders_all_work() {
            return Ok(());
        }
        let this_queue = Some(stream.id());
        let reads = match access {
            Access::Read => &[][..],
            Access::Write => &self.reads[..],
        };
        for mark in self.write.iter().chain(reads) {
            if !mark.device().is_same(device) {
                // A peer copy's mark, of the device that ran it: the host waits for it.
                mark.wait()?;
            } else if let (End::Event(event), true) = (&mark.end, mark.queue != this_queue) {
                stream.wait(event)?;
            }
            // A default-stream mark of this device: the stream starts after that work.
        }
        Ok(())
    }

    /// Waits, on the host, for the buffer's last write (for the whole device when its work
    /// may be unrecorded): what a peer copy from it must follow.
    pub(crate) fn wait_write(&self, device: &Device) -> Result<()> {
        if self.escaped {
            return device.synchronize();
        }
        self.write.iter().try_for_each(Mark::wait)
    }

    /// Notes that an operation using the buffer with `access` ended at `after`.
    pub(crate) fn note(&mut self, after: &After, access: Access) {
        let mark = match after {
            After::Mark(mark) => mark,
            After::Unknown => {
                self.escaped = true;
                return;
            }
            After::Ordered => return,
        };
        match access {
            Access::Read => {
                self.reads.retain(|read| read.queue != mark.queue);
                self.reads.push(mark.clone());
            }
            Access::Write => {
                self.reads.clear();
                self.write = Some(mark.clone());
            }
        }
    }

    /// The buffer is being dropped (under this lock): graphs refuse to replay work on it.
    pub(crate) fn retire(&mut self) {
        self.retired = true;
    }

    /// Whether the buffer is being dropped.
    pub(crate) fn retired(&self) -> bool {
        self.retired
    }

    /// Notes whether the host holds a slice of the buffer (`DeviceBuffer::host_slice`).
    pub(crate) fn set_on_host(&mut self, on_host: bool) {
        self.on_host = on_host;
    }

    /// Whether the host holds a slice of the buffer.
    pub(crate) fn on_host(&self) -> bool {
        self.on_host
    }

    /// Whether work on the buffer may be unrecorded (its address was handed out).
    pub(crate) fn escaped(&self) -> bool {
        self.escaped
    }

    /// Work on the buffer from now on may be unrecorded (its address was handed out).
    pub(crate) fn escape(&mut self) {
        self.escaped = true;
    }

    /// The device whose default stream wrote the buffer last, with no read since (its
    /// [`Device::identity`]), else 0: a write there would change nothing (`note`).
    fn default_stream_writer(&self) -> usize {
        match (&self.write, self.reads.is_empty()) {
            (
                Some(Mark {
                    end: End::DefaultStream(device),
                    ..
                }),
                true,
            ) => device.identity(),
            _ => 0,
        }
    }

    /// Waits for every piece of work queued on the buffer (for the whole device when it
    /// escaped); `false` when a wait failed, and the memory must then stay allocated.
    pub(crate) fn wait_all(&self, device: &Device) -> bool {
        if self.escaped {
            return device
                .current()
                .is_ok_and(|driver| driver.synchronize().is_ok());
        }
        self.write
            .iter()
            .chain(&self.reads)
            .all(|mark| mark.wait().is_ok())
    }
}

/// A buffer's tracking: what it knows of its work, under a lock, and what a launch on a default
/// stream needs of it, readable without the lock.
#[derive(Default)]
pub(crate) struct BufferTracking {
    state: Mutex<Tracking>,
    /// [`Tracking::default_stream_writer`] as the lock's last holder left it: a launch that
    /// writes the buffer on that device's default stream would change nothing, and skips the
    /// lock (a launch of three buffers took it three times: six atomic read-modify-writes).
    default_stream_writer: AtomicUsize,
}

/// A buffer's tracking, locked; on release it leaves what a default-stream launch reads
/// without the lock ([`BufferTracking`]).
pub(crate) struct TrackingGuard<'a> {
    tracking: &'a BufferTracking,
    state: MutexGuard<'a, Tracking>,
}

impl std::ops::Deref for TrackingGuard<'_> {
    type Target = Tracking;

    fn deref(&self) -> &Tracking {
        &self.state
    }
}

impl std::ops::DerefMut for TrackingGuard<'_> {
    fn deref_mut(&mut self) -> &mut Tracking {
        &mut self.state
    }
}

impl Drop for TrackingGuard<'_> {
    fn drop(&mut self) {
        // Still under the lock: the fields are dropped after this.
        self.tracking
            .default_stream_writer
            .store(self.state.default_stream_writer(), Ordering::Release);
    }
}

/// The lock of a buffer's tracking, poisoning ignored (the state stays consistent: each
/// change is one assignment).
pub(crate) fn lock(tracking: &BufferTracking) -> TrackingGuard<'_> {
    TrackingGuard {
        tracking,
        state: tracking
            .state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner()),
    }
}

/// A buffer a launch uses, as the launch stubs pass it: a kernel may write any memref it is
/// given, so each is marked written. Used by `include_gpu_binary!`'s expansion.
#[doc(hidden)]
#[derive(Clone, Copy)]
pub struct Tracked<'a> {
    pub(crate) tracking: &'a Arc<BufferTracking>,
}

impl Tracked<'_> {
    /// [`Tracking::before`] for the buffer; the lock is not taken where the queue waits for
    /// nothing (a launch on the default stream: the common case of a program with one stream).
    #[inline]
    pub(crate) fn before(&self, queue: &Queue, access: Access) -> Result<()> {
        match waiting_stream(queue) {
            Some(_) => lock(self.tracking).before(queue, access),
            None => Ok(()),
        }
    }

    /// [`Tracking::note`] of a write ending at `after`; the lock is not taken where the note
    /// would change nothing: a driver that orders all work, or a default stream that wrote the
    /// buffer last (then a launch queued on it orders itself after every stream's earlier work
    /// on the buffer, and the buffer's drop waits for that stream).
    #[inline]
    pub(crate) fn note_write(&self, after: &After) {
        let unchanged = match after {
            After::Ordered => true,
            After::Mark(Mark {
                end: End::DefaultStream(device),
                ..
            }) => self.tracking.default_stream_writer.load(Ordering::Acquire) == device.identity(),
            _ => false,
        };
        if !unchanged {
            lock(self.tracking).note(after, Access::Write);
        }
    }
}

impl std::fmt::Debug for Tracked<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Tracked")
    }
}
