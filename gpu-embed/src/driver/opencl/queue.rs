//! Streams as in-order command queues, and the default stream's rule: the device's default
//! queue is ordered as CUDA's legacy default stream, after every stream's earlier work, and
//! every stream's later work after it. Each command is queued with the events it must wait for
//! (the other queues' last commands for the default queue; the default queue's last command for
//! any other) and leaves its own event as its queue's last, so no queue is ever drained to keep
//! the rule.

use super::api::{check, Api, Event};
use super::sys;
use crate::error::{Error, ErrorKind, Result};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};

/// Takes `mutex`; a panic while it was held left the guarded value consistent (each change is
/// one assignment), so a poisoned lock is taken as it is.
pub(super) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// One in-order command queue with profiling (a stream, or the device's default stream).
pub(super) struct Queue {
    api: &'static Api,
    raw: sys::cl_command_queue,
    /// The event of the last command queued, which later commands of other queues may wait on.
    last: Mutex<Option<Event>>,
}

// SAFETY: OpenCL's API calls are thread-safe for every object but a kernel's arguments; a
// queue is only enqueued to, flushed, finished and released.
unsafe impl Send for Queue {}
// SAFETY: as for Send.
unsafe impl Sync for Queue {}

impl Queue {
    /// A new in-order queue with profiling on `device` of `context`.
    pub(super) fn new(
        api: &'static Api,
        context: sys::cl_context,
        device: sys::cl_device_id,
    ) -> Result<Queue> {
        let properties: [sys::cl_queue_properties; 3] = [
            sys::CL_QUEUE_PROPERTIES as sys::cl_queue_properties,
            sys::CL_QUEUE_PROFILING_ENABLE as sys::cl_queue_properties,
            0,
        ];
        let mut status = 0;
        // SAFETY: a live context and one of its devices; a zero-terminated property list.
        let raw = unsafe {
            api.clCreateCommandQueueWithProperties(
                context,
                device,
                properties.as_ptr(),
                &mut status,
            )
        };
        check(status, "clCreateCommandQueueWithProperties")?;
        Ok(Queue {
            api,
            raw,
            last: Mutex::new(None),
        })
    }

    pub(super) fn raw(&self) -> sys::cl_command_queue {
        self.raw
    }

    /// Waits for everything queued on it; an error when a command failed. A queue with nothing
    /// queued since it was last finished returns at once.
    pub(super) fn finish(&self) -> Result<()> {
        let Some(last) = self.last() else {
            return Ok(());
        };
        // SAFETY: a live queue.
        check(unsafe { self.api.clFinish(self.raw) }, "clFinish")?;
        // Its work all done, the queue's last event is forgotten (unless a command was queued
        // meanwhile): later commands of other queues need not wait for it.
        {
            let mut current = lock(&self.last);
            if current.as_ref().is_some_and(|e| e.raw() == last.raw()) {
                *current = None;
            }
        }
        // A failed command leaves its status in its event; clFinish itself succeeds.
        last.finished("a command of the stream").map(|_| ())
    }

    fn last(&self) -> Option<Event> {
        lock(&self.last).clone()
    }
}

impl Drop for Queue {
    fn drop(&mut self) {
        // SAFETY: this value's own queue, released once; queued commands still run.
        unsafe { self.api.clReleaseCommandQueue(self.raw) };
    }
}

/// A device's queues: its default one and every stream made on it.
pub(super) struct Queues {
    pub default: Arc<Queue>,
    streams: Mutex<Vec<Weak<Queue>>>,
    /// Held while a command is queued, so that the waits chosen and the last event left stay
    /// one step (the default queue's rule).
    order: Mutex<()>,
}

impl Queues {
    pub(super) fn new(default: Queue) -> Queues {
        Queues {
            default: Arc::new(default),
            streams: Mutex::new(Vec::new()),
            order: Mutex::new(()),
        }
    }

    /// A new stream.
    pub(super) fn create(
        &self,
        api: &'static Api,
        context: sys::cl_context,
        device: sys::cl_device_id,
    ) -> Result<Arc<Queue>> {
        let queue = Arc::new(Queue::new(api, context, device)?);
        let mut streams = lock(&self.streams);
        streams.retain(|stream| stream.strong_count() > 0);
        streams.push(Arc::downgrade(&queue));
        Ok(queue)
    }

    /// Every live stream.
    fn streams(&self) -> Vec<Arc<Queue>> {
        lock(&self.streams)
            .iter()
            .filter_map(Weak::upgrade)
            .collect()
    }

    /// Queues one command on `queue` through `enqueue(wait_count, wait_list, event)`, which
    /// returns the call's status, after the events the default stream's rule asks for and
    /// `extra`; returns the command's event, now the queue's last.
    pub(super) fn enqueue(
        &self,
        queue: &Queue,
        extra: Option<&Event>,
        call: &str,
        enqueue: impl FnOnce(sys::cl_uint, *const sys::cl_event, *mut sys::cl_event) -> sys::cl_int,
    ) -> Result<Event> {
        let _order = lock(&self.order);
        let mut waits: Vec<Event> = if std::ptr::eq(queue, &*self.default) {
            self.streams().iter().filter_map(|s| s.last()).collect()
        } else {
            self.default.last().into_iter().collect()
        };
        waits.extend(extra.cloned());
        let raw: Vec<sys::cl_event> = waits.iter().map(Event::raw).collect();
        let count = sys::cl_uint::try_from(raw.len()).map_err(|_| {
            Error::new(
                ErrorKind::Driver,
                "too many streams to order the default stream after",
            )
        })?;
        let list = if raw.is_empty() {
            std::ptr::null()
        } else {
            raw.as_ptr()
        };
        let mut event: sys::cl_event = std::ptr::null_mut();
        check(enqueue(count, list, &mut event), call)?;
        if event.is_null() {
            return Err(Error::new(
                ErrorKind::Driver,
                format!("{call} returned no event"),
            ));
        }
        // SAFETY: the event the enqueue call just returned, whose reference is ours.
        let event = unsafe { Event::from_raw(queue.api, event) };
        *lock(&queue.last) = Some(event.clone());
        Ok(event)
    }

    /// Waits for the default queue and every stream.
    pub(super) fn synchronize(&self) -> Result<()> {
        self.default.finish()?;
        for stream in self.streams() {
            stream.finish()?;
        }
        Ok(())
    }
}
