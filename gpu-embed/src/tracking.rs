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
//! Several threads using one buffer at once are ordered as each call finds the buffer: an
//! operation holds the locks of all its buffers ([`Locked`]) while it waits for other queues'
//! work, queues its own and marks it, so each buffer's marks follow the order operations were
//! queued in (with the lock taken twice, to wait and then to mark, two threads could mark in
//! the opposite order to the one they queued in, and the buffer's drop wait for the earlier
//! operation only). A launch on the default stream whose marks would change nothing (each
//! buffer was written there last, and not read since) takes no lock ([`BufferTracking`]).

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
    if let Some(device) = eventless_default_stream(queue) {
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

/// The device whose default stream `queue` is, where work there is marked without an event:
/// the device tracks, and its streams start after that stream's earlier work.
fn eventless_default_stream<'q>(queue: &Queue<'q>) -> Option<&'q Device> {
    let device = queue.device();
    (queue.stream().is_none() && device.tracks() && device.streams_follow_the_default_stream())
        .then_some(device)
}

/// The device whose default stream `queue` is, where a write of `uses` queued there may skip
/// their locks: its marks need no event, and that stream wrote each buffer last, no read since
/// (looked at again once the write is queued: [`Tracked::note_default_stream_write`]).
#[inline]
pub(crate) fn lock_free_default_write<'q>(
    queue: &Queue<'q>,
    uses: &[Tracked],
) -> Option<&'q Device> {
    eventless_default_stream(queue).filter(|device| {
        uses.iter()
            .all(|used| used.written_on_default_stream(device))
    })
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
        // A default stream follows every stream's earlier work already.
        let Some(stream) = queue.stream() else {
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

    /// Notes a write ending at `mark`, of a device's default stream, queued without the lock
    /// while another operation held it: it may have been queued before that operation, so
    /// the marks it would replace are kept beside it, as reads (waited for by later writers
    /// and by the drop).
    fn note_unordered_default_write(&mut self, mark: &Mark) {
        if let Some(previous) = self.write.replace(mark.clone()) {
            if !matches!(previous.end, End::DefaultStream(ref device) if device.is_same(mark.device()))
            {
                self.reads.push(previous);
            }
        }
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
    /// [`Tracking::default_stream_writer`] as the lock's last holder left it, 0 while the lock
    /// is held: a launch that writes the buffer on that device's default stream would change
    /// nothing, and skips the lock (a launch of three buffers took it three times: six atomic
    /// read-modify-writes). The launch looks after it has queued its work: seen set, no
    /// operation had taken the lock since, so any that queues later starts after the launch
    /// (a stream starts after the default stream's earlier work), and its mark covers it.
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
    let state = tracking
        .state
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    // Before anything is queued under the lock (see `BufferTracking`).
    if tracking.default_stream_writer.load(Ordering::Relaxed) != 0 {
        tracking.default_stream_writer.store(0, Ordering::Release);
    }
    TrackingGuard { tracking, state }
}

/// The buffers of one operation, each with its strongest use, locked once each for the whole
/// operation (module documentation), in address order: two operations sharing buffers never
/// wait for each other's locks in a circle (graphs lock theirs in the same order).
pub(crate) struct Locked<'a> {
    guards: Vec<(TrackingGuard<'a>, Access)>,
}

impl<'a> Locked<'a> {
    pub(crate) fn new(uses: impl IntoIterator<Item = (&'a BufferTracking, Access)>) -> Locked<'a> {
        let mut uses: Vec<(&BufferTracking, Access)> = uses.into_iter().collect();
        uses.sort_by_key(|(tracking, _)| *tracking as *const BufferTracking as usize);
        uses.dedup_by(|later, kept| {
            let same = std::ptr::eq(later.0, kept.0);
            if same && later.1 == Access::Write {
                kept.1 = Access::Write;
            }
            same
        });
        Locked {
            guards: uses
                .into_iter()
                .map(|(tracking, access)| (lock(tracking), access))
                .collect(),
        }
    }

    /// [`Tracking::before`] for each buffer.
    pub(crate) fn before(&self, queue: &Queue) -> Result<()> {
        self.guards
            .iter()
            .try_for_each(|(guard, access)| guard.before(queue, *access))
    }

    /// [`Tracking::note`] for each buffer.
    pub(crate) fn note(&mut self, after: &After) {
        for (guard, access) in &mut self.guards {
            guard.note(after, *access);
        }
    }

    /// The locked state of one of the buffers.
    pub(crate) fn state(&self, tracking: &BufferTracking) -> Option<&Tracking> {
        self.guards
            .iter()
            .find(|(guard, _)| std::ptr::eq(guard.tracking, tracking))
            .map(|(guard, _)| &**guard)
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
    /// Whether a write on `device`'s default stream would change nothing of the buffer's marks
    /// (the default stream wrote it last, no read since), as the lock's last holder left them.
    #[inline]
    pub(crate) fn written_on_default_stream(&self, device: &Device) -> bool {
        self.tracking.default_stream_writer.load(Ordering::Acquire) == device.identity()
    }

    /// Notes a write queued on `device`'s default stream without the lock (a device that
    /// tracks, whose streams follow that stream), after [`Tracked::written_on_default_stream`]
    /// said the note would change nothing: looked at again now the write is queued, where it
    /// still holds nothing is noted (`BufferTracking`); otherwise an operation took the lock
    /// meanwhile, and the write is noted beside its marks.
    #[inline]
    pub(crate) fn note_default_stream_write(&self, device: &Device) {
        if !self.written_on_default_stream(device) {
            lock(self.tracking).note_unordered_default_write(&Mark {
                queue: None,
                end: End::DefaultStream(device.clone()),
            });
        }
    }
}

impl std::fmt::Debug for Tracked<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Tracked")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn default_stream_mark(device: &Device) -> Mark {
        Mark {
            queue: None,
            end: End::DefaultStream(device.clone()),
        }
    }

    fn stream_mark(device: &Device, stream: u64) -> Mark {
        Mark {
            queue: Some(stream),
            end: End::Event(Arc::new(device.marker_event().unwrap())),
        }
    }

    #[test]
    fn the_lock_free_summary_is_cleared_while_the_lock_is_held() {
        // A default-stream launch that finds the summary set after queueing skips its note:
        // that is only right while no operation has taken the lock since (`BufferTracking`).
        let device = Device::host();
        let tracking = Arc::new(BufferTracking::default());
        let tracked = Tracked {
            tracking: &tracking,
        };
        assert!(!tracked.written_on_default_stream(&device));
        lock(&tracking).note(&After::Mark(default_stream_mark(&device)), Access::Write);
        assert!(tracked.written_on_default_stream(&device));
        let guard = lock(&tracking);
        assert!(!tracked.written_on_default_stream(&device));
        drop(guard);
        assert!(tracked.written_on_default_stream(&device));
        lock(&tracking).note(&After::Mark(default_stream_mark(&device)), Access::Read);
        assert!(!tracked.written_on_default_stream(&device), "read since");
    }

    #[test]
    fn a_default_stream_write_noted_out_of_order_keeps_the_marks_it_would_replace() {
        // Queued without the lock while another operation held it, the write may have come
        // before that operation's: its mark goes beside the other's, and both are waited for.
        let device = Device::host();
        let tracking = Arc::new(BufferTracking::default());
        let other = stream_mark(&device, 7);
        lock(&tracking).note(&After::Mark(other), Access::Write);
        let tracked = Tracked {
            tracking: &tracking,
        };
        tracked.note_default_stream_write(&device);
        let state = lock(&tracking);
        assert!(matches!(
            state.write,
            Some(Mark {
                end: End::DefaultStream(_),
                ..
            })
        ));
        assert_eq!(state.reads.len(), 1);
        assert_eq!(state.reads[0].queue, Some(7));
    }

    #[test]
    fn an_operation_locks_each_buffer_once_with_its_strongest_use_in_address_order() {
        let (first, second) = (
            Arc::new(BufferTracking::default()),
            Arc::new(BufferTracking::default()),
        );
        let locked = Locked::new([
            (&*second, Access::Read),
            (&*first, Access::Read),
            (&*second, Access::Write),
        ]);
        let order: Vec<(usize, Access)> = locked
            .guards
            .iter()
            .map(|(guard, access)| (guard.tracking as *const BufferTracking as usize, *access))
            .collect();
        let mut expected = vec![
            (&*first as *const BufferTracking as usize, Access::Read),
            (&*second as *const BufferTracking as usize, Access::Write),
        ];
        expected.sort_by_key(|(address, _)| *address);
        assert_eq!(order, expected);
    }
}
