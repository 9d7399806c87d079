//! Host streams: ordered queues of work, run lazily on the thread that needs their results.
//!
//! Work submitted to a stream (a launch, a copy, a fill, an event record, a wait for another
//! stream's event) is queued, not run. A stream runs its queue, in order, when something needs it
//! to have finished: its own or the device's synchronization, an event recorded on it being
//! synchronized, another stream waiting for that event, a synchronous operation on the default
//! stream (which, like CUDA's legacy default stream, first waits for every stream), or a buffer
//! being freed. So streams are independent (work of one runs before earlier work of another when
//! only the first is needed), every stream keeps its order, and what an event orders is what
//! runs first: the host shows the same orderings a GPU may.
//!
//! Every operation on host device memory, queued or not, runs under one lock, so two streams
//! drained on two threads never touch memory at the same time: no data race is reachable from
//! safe code. (Kernels are `unsafe` to launch: what they do to memory is their caller's word.)

use crate::error::{Error, ErrorKind, Result};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Instant;

type Work = Box<dyn FnOnce() -> Result<()> + Send>;

/// One stream's queue.
pub(crate) struct HostStream {
    queue: Mutex<VecDeque<Work>>,
    /// How many items were ever submitted / have run; an item's sequence number is the
    /// `submitted` count just after it was queued.
    submitted: AtomicU64,
    executed: AtomicU64,
    /// Held while this stream's items run, so they run one at a time and in order.
    run: Mutex<()>,
    /// The first failure of queued work, reported by the next synchronization (as drivers report
    /// errors of asynchronous work).
    failure: Mutex<Option<Error>>,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Every live stream, to drain them all.
static STREAMS: Mutex<Vec<Weak<HostStream>>> = Mutex::new(Vec::new());
/// Held by every operation on host device memory.
static EXECUTION: Mutex<()> = Mutex::new(());

/// Runs `operation` on device memory, alone.
pub(crate) fn exclusive<R>(operation: impl FnOnce() -> R) -> R {
    let _alone = lock(&EXECUTION);
    operation()
}

/// Runs every stream's queue to its end (the default stream's synchronization).
pub(crate) fn drain_all() -> Result<()> {
    let streams: Vec<Arc<HostStream>> = {
        let mut streams = lock(&STREAMS);
        streams.retain(|stream| stream.strong_count() > 0);
        streams.iter().filter_map(Weak::upgrade).collect()
    };
    let mut first = Ok(());
    for stream in streams {
        let result = stream.drain();
        if first.is_ok() {
            first = result;
        }
    }
    first
}

impl HostStream {
    pub(crate) fn new() -> Arc<HostStream> {
        let stream = Arc::new(HostStream {
            queue: Mutex::new(VecDeque::new()),
            submitted: AtomicU64::new(0),
            executed: AtomicU64::new(0),
            run: Mutex::new(()),
            failure: Mutex::new(None),
        });
        lock(&STREAMS).push(Arc::downgrade(&stream));
        stream
    }

    /// Queues `work`; returns its sequence number.
    pub(crate) fn submit(&self, work: Work) -> u64 {
        let mut queue = lock(&self.queue);
        queue.push_back(work);
        self.submitted.fetch_add(1, Ordering::AcqRel) + 1
    }

    /// Whether item `sequence` has run.
    pub(crate) fn has_run(&self, sequence: u64) -> bool {
        self.executed.load(Ordering::Acquire) >= sequence
    }

    /// Runs queued items until item `sequence` has run.
    pub(crate) fn drain_until(&self, sequence: u64) {
        if self.has_run(sequence) {
            return;
        }
        let _in_order = lock(&self.run);
        while !self.has_run(sequence) {
            let Some(work) = lock(&self.queue).pop_front() else {
                return;
            };
            if let Err(error) = work() {
                lock(&self.failure).get_or_insert(error);
            }
            self.executed.fetch_add(1, Ordering::AcqRel);
        }
    }

    /// Runs the whole queue; the first failure of its work since the last drain, if any.
    pub(crate) fn drain(&self) -> Result<()> {
        self.drain_until(self.submitted.load(Ordering::Acquire));
        lock(&self.failure).take().map_or(Ok(()), Err)
    }
}

/// A host event: where it was last recorded, and when that point ran.
#[derive(Default)]
pub(crate) struct HostEvent {
    state: Mutex<EventState>,
}

#[derive(Default)]
struct EventState {
    /// The stream and item of the last recording (`None`: recorded on the default stream, or
    /// never).
    source: Option<(Arc<HostStream>, u64)>,
    /// When the recording ran.
    time: Option<Instant>,
}

impl HostEvent {
    /// Records on `stream`, or, without one, now (after every stream has drained).
    pub(crate) fn record(self: &Arc<Self>, stream: Option<&Arc<HostStream>>) -> Result<()> {
        let Some(stream) = stream else {
            drain_all()?;
            *lock(&self.state) = EventState {
                source: None,
                time: Some(Instant::now()),
            };
            return Ok(());
        };
        let event = Arc::clone(self);
        let mut state = lock(&self.state);
        let sequence = stream.submit(Box::new(move || {
            lock(&event.state).time = Some(Instant::now());
            Ok(())
        }));
        state.source = Some((Arc::clone(stream), sequence));
        Ok(())
    }

    fn pending(&self) -> Option<(Arc<HostStream>, u64)> {
        lock(&self.state)
            .source
            .clone()
            .filter(|(stream, sequence)| !stream.has_run(*sequence))
    }

    pub(crate) fn query(&self) -> bool {
        self.pending().is_none()
    }

    /// Runs the recording stream up to the recording.
    pub(crate) fn synchronize(&self) {
        if let Some((stream, sequence)) = self.pending() {
            stream.drain_until(sequence);
        }
    }

    /// Makes `stream` (or, without one, the caller) wait for the last recording.
    pub(crate) fn wait_on(&self, stream: Option<&Arc<HostStream>>) {
        let Some((source, sequence)) = self.pending() else {
            return;
        };
        match stream {
            None => source.drain_until(sequence),
            Some(stream) => {
                stream.submit(Box::new(move || {
                    source.drain_until(sequence);
                    Ok(())
                }));
            }
        }
    }

    /// When the last recording ran; an error if it has not.
    pub(crate) fn time(&self) -> Result<Instant> {
        if !self.query() {
            return Err(Error::new(
                ErrorKind::Driver,
                "the event has not completed (synchronize it first)",
            ));
        }
        lock(&self.state).time.ok_or_else(|| {
            Error::new(
                ErrorKind::InvalidArgument,
                "elapsed time of an event that was never recorded",
            )
        })
    }
}
