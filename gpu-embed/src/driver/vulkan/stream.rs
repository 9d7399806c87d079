//! Streams as timeline semaphores, and events as points on them (see the module doc of
//! `vulkan/mod.rs`).
//!
//! Every operation is one command buffer, one `vkQueueSubmit` to the device's one queue, and
//! signals the stream's next value (what synchronization, queries and the recycling of a
//! submission's resources wait for). It waits for no semaphore: its command buffer begins with a
//! full memory barrier, whose first scope is every command submitted to the queue before it, so
//! each submission is ordered after all earlier work on the device — its stream's, the events it
//! was told to wait for (recorded, so submitted, before), and what the legacy default stream's
//! rule orders (as the host driver's). That is more order than the rules ask (streams do not
//! overlap on the one queue) and cheaper than the waits: a semaphore wait per submission cost
//! lavapipe 110 us per launch in thread wake-ups (`benches/vulkan_launch.rs`, 159 against 46 us).
//!
//! Also here: what a submission keeps until it has run, and a device's registry of its streams
//! with its default stream. Built on the device core and the allocation layer (`setup.rs`,
//! `allocation.rs`).

use super::allocation::{Allocation, Table};
use super::errors::{check, lock, vk_error};
use super::log::LaunchLog;
use super::setup::Core;
use crate::error::{Error, ErrorKind, Result};
use ash::vk;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};

/// What one submission uses, kept until the device has run it.
#[derive(Default)]
pub(crate) struct Resources {
    /// Device allocations it reads or writes, and its staging and argument buffers.
    pub buffers: Vec<Arc<Allocation>>,
    pub descriptor_pools: Vec<DescriptorPool>,
    /// Events whose query pools it writes.
    pub events: Vec<Arc<Event>>,
    /// The log buffers of its launches, read once it has run.
    pub logs: Vec<LaunchLog>,
}

/// A descriptor pool of one launch (devices without push descriptors), destroyed with it.
pub(crate) struct DescriptorPool {
    pub core: &'static Core,
    pub pool: vk::DescriptorPool,
}

impl Drop for DescriptorPool {
    fn drop(&mut self) {
        // SAFETY: the pool is no longer used: its launch's resources are dropped only once the
        // launch has run (or was never submitted).
        unsafe { self.core.device.destroy_descriptor_pool(self.pool, None) };
    }
}

struct Pending {
    value: u64,
    command_buffer: vk::CommandBuffer,
    _resources: Resources,
}

struct State {
    pool: vk::CommandPool,
    /// Command buffers whose submissions have run, to record again.
    spare: Vec<vk::CommandBuffer>,
    pending: VecDeque<Pending>,
    /// The first failed assertion of a launch that has run since the stream was last
    /// synchronized, which the next synchronization returns.
    fault: Option<Error>,
}

pub(crate) struct Stream {
    pub core: &'static Core,
    /// The allocation table of the stream's device (what transfers on the stream address).
    pub table: &'static Table,
    /// Null only for a stream that could not be made (see `Streams::default_stream`).
    semaphore: vk::Semaphore,
    /// The value the last submission signals (0: nothing submitted); written under the queue lock.
    submitted: AtomicU64,
    state: Mutex<State>,
}

impl Stream {
    /// A stream of the device of `core` and `table` (which registers it: `Streams`).
    fn new(core: &'static Core, table: &'static Table) -> Result<Arc<Stream>> {
        let mut kind = vk::SemaphoreTypeCreateInfo::default()
            .semaphore_type(vk::SemaphoreType::TIMELINE)
            .initial_value(0);
        let info = vk::SemaphoreCreateInfo::default().push_next(&mut kind);
        // SAFETY: a valid create info on a live device.
        let semaphore = check(unsafe { core.device.create_semaphore(&info, None) }, || {
            "vkCreateSemaphore".into()
        })?;
        let info = vk::CommandPoolCreateInfo::default()
            .flags(vk::CommandPoolCreateFlags::RESET_COMMAND_BUFFER)
            .queue_family_index(core.family);
        // SAFETY: as above.
        let pool = match unsafe { core.device.create_command_pool(&info, None) } {
            Ok(pool) => pool,
            Err(e) => {
                // SAFETY: made above, never used.
                unsafe { core.device.destroy_semaphore(semaphore, None) };
                return Err(vk_error(e, "vkCreateCommandPool"));
            }
        };
        Ok(Arc::new(Stream {
            core,
            table,
            semaphore,
            submitted: AtomicU64::new(0),
            state: Mutex::new(State {
                pool,
                spare: Vec::new(),
                pending: VecDeque::new(),
                fault: None,
            }),
        }))
    }

    /// A stream that refuses all work (it has no semaphore).
    fn broken(core: &'static Core, table: &'static Table) -> Arc<Stream> {
        Arc::new(Stream {
            core,
            table,
            semaphore: vk::Semaphore::null(),
            submitted: AtomicU64::new(0),
            state: Mutex::new(State {
                pool: vk::CommandPool::null(),
                spare: Vec::new(),
                pending: VecDeque::new(),
                fault: None,
            }),
        })
    }

    /// Drops what submissions that have run used.
    fn recycle(&self, state: &mut State) -> Result<()> {
        if state.pending.is_empty() {
            return Ok(());
        }
        let done = self.core.counter(self.semaphore)?;
        while state.pending.front().is_some_and(|p| p.value <= done) {
            if let Some(pending) = state.pending.pop_front() {
                for log in &pending._resources.logs {
                    if let Some(fault) = log.drain() {
                        state.fault.get_or_insert(fault);
                    }
                }
                state.spare.push(pending.command_buffer);
            }
        }
        Ok(())
    }

    /// Records one command buffer with `record` (between full memory barriers) and submits it
    /// in the stream's order; returns the value it signals.
    pub(crate) fn submit(
        self: &Arc<Self>,
        record: impl FnOnce(vk::CommandBuffer, &mut Resources) -> Result<()>,
    ) -> Result<u64> {
        if self.semaphore == vk::Semaphore::null() {
            return Err(Error::new(
                ErrorKind::Driver,
                format!("{}: its default stream could not be made", self.core.name),
            ));
        }
        let device = &self.core.device;
        let mut state = lock(&self.state);
        self.recycle(&mut state)?;
        let command_buffer = match state.spare.pop() {
            Some(buffer) => buffer,
            None => {
                let info = vk::CommandBufferAllocateInfo::default()
                    .command_pool(state.pool)
                    .level(vk::CommandBufferLevel::PRIMARY)
                    .command_buffer_count(1);
                // SAFETY: the stream's pool, used only under its state lock (held).
                let buffers = check(unsafe { device.allocate_command_buffers(&info) }, || {
                    "vkAllocateCommandBuffers".into()
                })?;
                buffers.into_iter().next().ok_or_else(|| {
                    Error::new(ErrorKind::Driver, "vkAllocateCommandBuffers returned none")
                })?
            }
        };
        let mut resources = Resources::default();
        let recorded = (|| {
            let begin = vk::CommandBufferBeginInfo::default()
                .flags(vk::CommandBufferUsageFlags::ONE_TIME_SUBMIT);
            // SAFETY: a command buffer of the stream's pool (which resets buffers on begin) that
            // no pending submission uses.
            let begun = unsafe { device.begin_command_buffer(command_buffer, &begin) };
            check(begun, || "vkBeginCommandBuffer".into())?;
            full_barrier(self.core, command_buffer, false);
            record(command_buffer, &mut resources)?;
            full_barrier(self.core, command_buffer, true);
            // SAFETY: a command buffer in the recording state.
            check(unsafe { device.end_command_buffer(command_buffer) }, || {
                "vkEndCommandBuffer".into()
            })
        })();
        if let Err(error) = recorded {
            // Begun again (and so reset) before its next use.
            state.spare.push(command_buffer);
            return Err(error);
        }
        let queue = lock(&self.core.queue);
        let value = self.submitted.load(Ordering::Acquire) + 1;
        let signal_values = [value];
        let signals = [self.semaphore];
        let command_buffers = [command_buffer];
        let mut timeline =
            vk::TimelineSemaphoreSubmitInfo::default().signal_semaphore_values(&signal_values);
        let submit = vk::SubmitInfo::default()
            .command_buffers(&command_buffers)
            .signal_semaphores(&signals)
            .push_next(&mut timeline);
        // SAFETY: the queue is used under its lock (held); the stream's values rise by one per
        // submission, taken under the same lock; the command buffer is executable and not
        // pending.
        let submitted = unsafe { device.queue_submit(*queue, &[submit], vk::Fence::null()) };
        if let Err(e) = submitted {
            drop(queue);
            state.spare.push(command_buffer);
            return Err(vk_error(e, "vkQueueSubmit"));
        }
        self.submitted.store(value, Ordering::Release);
        drop(queue);
        state.pending.push_back(Pending {
            value,
            command_buffer,
            _resources: resources,
        });
        Ok(value)
    }

    /// Whether the stream's semaphore has reached `value`.
    fn reached(&self, value: u64) -> Result<bool> {
        Ok(self.core.counter(self.semaphore)? >= value)
    }

    /// Waits until the stream's semaphore reaches `value`.
    pub(crate) fn wait_until(&self, value: u64) -> Result<()> {
        self.core.wait_value(self.semaphore, value)?;
        let mut state = lock(&self.state);
        self.recycle(&mut state)?;
        state.fault.take().map_or(Ok(()), Err)
    }

    /// Waits for everything submitted to the stream.
    pub(crate) fn synchronize(&self) -> Result<()> {
        let value = self.submitted.load(Ordering::Acquire);
        if value == 0 {
            return Ok(());
        }
        self.wait_until(value)
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        if self.semaphore == vk::Semaphore::null() {
            return;
        }
        let value = self.submitted.load(Ordering::Acquire);
        if value > 0 && self.core.wait_value(self.semaphore, value).is_err() {
            // The device failed (lost): nothing it still holds is destroyed under it.
            let state = self.state.get_mut().unwrap_or_else(|p| p.into_inner());
            std::mem::forget(std::mem::take(&mut state.pending));
            return;
        }
        let state = self.state.get_mut().unwrap_or_else(|p| p.into_inner());
        state.pending.clear();
        // SAFETY: every submission of the stream has run (waited above); its command buffers
        // go with the pool.
        unsafe {
            self.core.device.destroy_command_pool(state.pool, None);
            self.core.device.destroy_semaphore(self.semaphore, None);
        }
    }
}

/// A device's streams: every stream made on it, and its default stream.
pub(crate) struct Streams {
    /// Every stream made on the device but the default one (device synchronization waits for
    /// them all).
    made: Mutex<Vec<Weak<Stream>>>,
    default_stream: OnceLock<Arc<Stream>>,
}

impl Streams {
    pub(crate) fn new() -> Streams {
        Streams {
            made: Mutex::new(Vec::new()),
            default_stream: OnceLock::new(),
        }
    }

    /// Makes the default stream of the device of `core` and `table` (once the device has its
    /// final, `'static` address).
    pub(crate) fn start(&self, core: &'static Core, table: &'static Table) -> Result<()> {
        let stream = Stream::new(core, table)?;
        let _ = self.default_stream.set(stream);
        Ok(())
    }

    /// A new stream of the device of `core` and `table`, registered.
    pub(crate) fn create(&self, core: &'static Core, table: &'static Table) -> Result<Arc<Stream>> {
        let stream = Stream::new(core, table)?;
        {
            let mut streams = lock(&self.made);
            streams.retain(|s| s.strong_count() > 0);
            streams.push(Arc::downgrade(&stream));
        }
        Ok(stream)
    }

    /// The default stream, made by `start` before the device was handed out (a device whose
    /// `start` failed is not listed; were it reached anyway, its default stream refuses work).
    pub(crate) fn default_stream(
        &self,
        core: &'static Core,
        table: &'static Table,
    ) -> &Arc<Stream> {
        self.default_stream
            .get_or_init(|| Stream::broken(core, table))
    }

    /// Waits for every stream of the device of `core` and `table`.
    pub(crate) fn synchronize(&self, core: &'static Core, table: &'static Table) -> Result<()> {
        let streams: Vec<Arc<Stream>> = {
            let mut streams = lock(&self.made);
            streams.retain(|s| s.strong_count() > 0);
            streams.iter().filter_map(Weak::upgrade).collect()
        };
        let mut first = self.default_stream(core, table).synchronize();
        for stream in streams {
            let result = stream.synchronize();
            if first.is_ok() {
                first = result;
            }
        }
        first
    }
}

/// A memory barrier between everything before and everything after (and, at the end of a
/// command buffer, the host's reads once the submission has completed).
fn full_barrier(core: &Core, command_buffer: vk::CommandBuffer, to_host: bool) {
    let mut destination = vk::AccessFlags::MEMORY_READ | vk::AccessFlags::MEMORY_WRITE;
    let mut stages = vk::PipelineStageFlags::ALL_COMMANDS;
    if to_host {
        destination |= vk::AccessFlags::HOST_READ;
        stages |= vk::PipelineStageFlags::HOST;
    }
    let barrier = vk::MemoryBarrier::default()
        .src_access_mask(vk::AccessFlags::MEMORY_WRITE)
        .dst_access_mask(destination);
    // SAFETY: a command buffer in the recording state, outside any render pass.
    unsafe {
        core.device.cmd_pipeline_barrier(
            command_buffer,
            vk::PipelineStageFlags::ALL_COMMANDS,
            stages,
            vk::DependencyFlags::empty(),
            &[barrier],
            &[],
            &[],
        )
    };
}

/// A point on a stream's timeline, with the device's time there.
pub(crate) struct Event {
    core: &'static Core,
    /// One timestamp query (null when the queue has no timestamps).
    pool: vk::QueryPool,
    recorded: Mutex<Option<(Arc<Stream>, u64)>>,
}

impl Event {
    pub(crate) fn new(core: &'static Core) -> Result<Arc<Event>> {
        let pool = if core.checks.timestamp_bits > 0 {
            let info = vk::QueryPoolCreateInfo::default()
                .query_type(vk::QueryType::TIMESTAMP)
                .query_count(1);
            check(
                // SAFETY: a valid create info on a live device.
                unsafe { core.device.create_query_pool(&info, None) },
                || "vkCreateQueryPool".into(),
            )?
        } else {
            vk::QueryPool::null()
        };
        Ok(Arc::new(Event {
            core,
            pool,
            recorded: Mutex::new(None),
        }))
    }

    /// Records the event after the stream's work so far.
    pub(crate) fn record(self: &Arc<Self>, stream: &Arc<Stream>) -> Result<()> {
        let mut recorded = lock(&self.recorded);
        // A recording still pending on another stream writes the same query: let it finish
        // before the query is reset.
        if let Some((previous, value)) = recorded.as_ref() {
            if !previous.reached(*value)? {
                previous.wait_until(*value)?;
            }
        }
        let value = stream.submit(|command_buffer, resources| {
            if self.pool != vk::QueryPool::null() {
                // SAFETY: a command buffer in the recording state; the event's pool has one
                // query, which no pending work uses (waited above).
                unsafe {
                    self.core
                        .device
                        .cmd_reset_query_pool(command_buffer, self.pool, 0, 1);
                    self.core.device.cmd_write_timestamp(
                        command_buffer,
                        vk::PipelineStageFlags::BOTTOM_OF_PIPE,
                        self.pool,
                        0,
                    );
                }
            }
            resources.events.push(Arc::clone(self));
            Ok(())
        })?;
        *recorded = Some((Arc::clone(stream), value));
        Ok(())
    }

    fn point(&self) -> Option<(Arc<Stream>, u64)> {
        lock(&self.recorded).clone()
    }

    /// Whether the last recording has run (true when never recorded).
    pub(crate) fn query(&self) -> Result<bool> {
        match self.point() {
            None => Ok(true),
            Some((stream, value)) => stream.reached(value),
        }
    }

    pub(crate) fn synchronize(&self) -> Result<()> {
        match self.point() {
            None => Ok(()),
            Some((stream, value)) => stream.wait_until(value),
        }
    }

    /// The device's timestamp of the last recording, in ticks.
    fn timestamp(&self) -> Result<u64> {
        let Some((stream, value)) = self.point() else {
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                "elapsed time of an event that was never recorded",
            ));
        };
        if !stream.reached(value)? {
            return Err(Error::new(
                ErrorKind::Driver,
                "the event has not completed (synchronize it first)",
            ));
        }
        if self.pool == vk::QueryPool::null() {
            return Err(Error::new(
                ErrorKind::NotSupported,
                format!(
                    "{}: its compute queue has no timestamps (timestampValidBits is 0)",
                    self.core.name
                ),
            ));
        }
        let mut ticks = [0u64; 1];
        // SAFETY: the query was written by a submission that has run; 64-bit results into a
        // slice of one.
        let read = unsafe {
            self.core.device.get_query_pool_results(
                self.pool,
                0,
                &mut ticks,
                vk::QueryResultFlags::TYPE_64 | vk::QueryResultFlags::WAIT,
            )
        };
        check(read, || "vkGetQueryPoolResults".into())?;
        let bits = self.core.checks.timestamp_bits;
        Ok(if bits >= 64 {
            ticks[0]
        } else {
            ticks[0] & ((1u64 << bits) - 1)
        })
    }
}

impl Drop for Event {
    fn drop(&mut self) {
        if self.pool != vk::QueryPool::null() {
            // SAFETY: no pending work uses the pool: submissions writing it hold the event.
            unsafe { self.core.device.destroy_query_pool(self.pool, None) };
        }
    }
}

/// Milliseconds from `start`'s recording to `end`'s.
pub(crate) fn elapsed_ms(start: &Event, end: &Event) -> Result<f32> {
    let (from, to) = (start.timestamp()?, end.timestamp()?);
    let ticks = i128::from(to) - i128::from(from);
    let nanoseconds = ticks as f64 * f64::from(start.core.checks.timestamp_period);
    Ok((nanoseconds / 1e6) as f32)
}
