//! Events: markers in a stream's work, to wait for, to order another stream after, and to time
//! kernels with the device's own clock (`cuEventElapsedTime`, `hipEventElapsedTime`).
//!
//! On the host, streams are queues run lazily (when something waits for them): an event
//! recorded on a stream completes when the stream's work before it has run, and its time is the
//! host clock's at that moment; one recorded on the default stream completes at once, after
//! every stream has run its queue. On Vulkan, an event is a point on its stream's timeline
//! semaphore with a timestamp query written there (`driver/vulkan/stream.rs`).

use crate::device::{name_faulting_launch, Device, LastLaunchSlot};
use crate::driver::{EventHandle, StreamHandle};
use crate::error::{Error, ErrorKind, Result};
use crate::stream::{Queue, Stream};
use std::time::Duration;

/// A marker in the work of one device's stream.
pub struct Event {
    device: Device,
    raw: EventHandle,
    /// The last kernel launched before the last recording, to name in a fault it reports.
    after_launch: LastLaunchSlot,
    /// A marker event of tracking (`Device::marker_event`): back to the device's pool on drop.
    marker: bool,
}

impl Device {
    /// A new event, to record on the device's default stream or a [`Stream`](crate::Stream).
    pub fn create_event(&self) -> Result<Event> {
        let raw = self
            .current()?
            .create_event()
            .map_err(|e| self.context(e))?;
        Ok(Event {
            device: self.clone(),
            raw,
            after_launch: LastLaunchSlot::default(),
            marker: false,
        })
    }

    /// An event for buffers' tracking (`tracking.rs`), never timed: one of the device's pooled
    /// marker events where its driver has them (CUDA, HIP), else a new ordinary event.
    pub(crate) fn marker_event(&self) -> Result<Event> {
        let raw = match self.pooled_marker() {
            Some(raw) => raw,
            None => match self.current()?.create_marker_event() {
                Some(created) => created.map_err(|e| self.context(e))?,
                None => return self.create_event(),
            },
        };
        Ok(Event {
            device: self.clone(),
            raw,
            after_launch: LastLaunchSlot::default(),
            marker: true,
        })
    }

    /// Records `event` after all work submitted so far on the default stream.
    pub fn record(&self, event: &Event) -> Result<()> {
        event.check_device(self)?;
        self.current()?
            .record_event(&event.raw, &StreamHandle::DEFAULT)
            .map_err(|e| self.context(e))?;
        // The default stream waits for every stream: any launch may come before the recording.
        event.after_launch.set(self.last_launch());
        Ok(())
    }
}

impl Queue<'_> {
    /// Records `event` after all work submitted so far on the queue.
    pub(crate) fn record(&self, event: &Event) -> Result<()> {
        match self {
            Queue::Default(device) => device.record(event),
            Queue::Stream(stream) => stream.record(event),
        }
    }
}

impl Stream {
    /// Records `event` after all work submitted so far on this stream.
    pub fn record(&self, event: &Event) -> Result<()> {
        event.check_device(self.device())?;
        self.device()
            .current()?
            .record_event(&event.raw, self.raw())
            .map_err(|e| self.device().context(e))?;
        event.after_launch.set(self.last_launch());
        Ok(())
    }

    /// Work submitted to this stream from now on starts after `event`'s last recording has
    /// completed (on any stream of the device).
    pub fn wait(&self, event: &Event) -> Result<()> {
        event.check_device(self.device())?;
        self.device()
            .current()?
            .stream_wait_event(self.raw(), &event.raw)
            .map_err(|e| self.device().context(e))
    }
}

impl Event {
    /// The device the event belongs to.
    pub fn device(&self) -> &Device {
        &self.device
    }

    /// Whether the work before the last recording has finished (true for an event never
    /// recorded, as the drivers say).
    pub fn query(&self) -> Result<bool> {
        self.device
            .current()?
            .query_event(&self.raw)
            .map_err(|e| self.device.context(e))
    }

    /// Waits until the work before the last recording has finished. A kernel fault names the
    /// last kernel launched on the recording stream before the recording.
    pub fn synchronize(&self) -> Result<()> {
        self.device
            .current()?
            .synchronize_event(&self.raw)
            .map_err(|e| {
                let e = e.map_message(|message| format!("{message} on {}", self.device.name()));
                name_faulting_launch(e, self.after_launch.get(), "before the event was recorded")
            })
    }

    /// Milliseconds from this event to `end`, as the driver measures them (both recorded and
    /// finished; negative when `end` was recorded first).
    pub fn elapsed_ms(&self, end: &Event) -> Result<f32> {
        end.check_device(&self.device)?;
        self.device
            .current()?
            .elapsed_ms(&self.raw, &end.raw)
            .map_err(|e| self.device.context(e))
    }

    /// [`Event::elapsed_ms`] as a `Duration`; an error when `end` came first.
    pub fn elapsed(&self, end: &Event) -> Result<Duration> {
        let milliseconds = self.elapsed_ms(end)?;
        if milliseconds < 0.0 {
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                format!(
                    "the end event was recorded {:.3} ms before the start",
                    -milliseconds
                ),
            ));
        }
        Ok(Duration::from_secs_f64(f64::from(milliseconds) / 1e3))
    }

    /// The driver's event (`CUevent`, `hipEvent_t`), for other libraries; on the host and on
    /// Vulkan, the runtime's own event, which only this crate can use.
    pub fn raw_handle(&self) -> *mut std::ffi::c_void {
        self.raw.interop_pointer()
    }

    fn check_device(&self, device: &Device) -> Result<()> {
        if self.device.is_same(device) {
            return Ok(());
        }
        Err(Error::new(
            ErrorKind::InvalidArgument,
            format!(
                "an event of {} used on {}: events belong to one device",
                self.device.name(),
                device.name()
            ),
        ))
    }
}

impl Drop for Event {
    fn drop(&mut self) {
        // The field's own reference goes when the event does: the driver gets a copy to
        // destroy (or the pool one to keep).
        let raw = self.raw.clone();
        let raw = if self.marker {
            match self.device.pool_marker(raw) {
                Ok(()) => return,
                Err(raw) => raw,
            }
        } else {
            raw
        };
        if let Ok(driver) = self.device.current() {
            driver.destroy_event(raw);
        }
    }
}
