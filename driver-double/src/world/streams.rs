//! Streams and events. Queued work runs only when the host waits for it (a stream, an
//! event, the context; a blocking copy; a free), in an order the driver allows: each stream in
//! its order, an event wait after the recorded work, and the legacy default stream ordered
//! against every blocking stream of its context. So work the host did not wait for has not
//! happened yet, as on a GPU that is still busy.

use super::memory::{is_device_address, Pattern};
use super::{Code, Fault, Outcome, World, CAPTURING};
use std::collections::{BTreeMap, VecDeque};

/// One end of a copy.
#[derive(Debug, Clone)]
pub enum Place {
    /// An address the double knows: device, managed, pinned or registered memory.
    Memory(u64),
    /// Pageable host memory (a captured copy reads it when the graph runs).
    Host(u64),
    /// Pageable host bytes copied when the copy was queued, as the driver stages them.
    Staged(Vec<u8>),
}

#[derive(Debug, Clone)]
pub enum Work {
    Copy {
        to: Place,
        from: Place,
        bytes: usize,
    },
    /// A copy between two devices' memory, which needs no peer access.
    PeerCopy {
        to: u64,
        from: u64,
        bytes: usize,
    },
    Fill {
        to: u64,
        pattern: Pattern,
        count: usize,
    },
    /// A kernel: the pointers it was given, checked again when it runs.
    Launch {
        kernel: String,
        module: u64,
        pointers: Vec<u64>,
    },
    Record {
        event: u64,
    },
    /// Waits for `(stream, seq)`, the event's last recording when the wait was queued.
    Wait {
        stream: u64,
        seq: u64,
    },
}

pub(super) struct Stream {
    pub(super) context: u64,
    pub(super) null: bool,
    /// Orders against the legacy default stream (not CU_STREAM_NON_BLOCKING).
    blocking: bool,
    queue: VecDeque<(u64, Work)>,
    pub(super) capture: Option<Capture>,
}

pub(super) struct Capture {
    pub(super) nodes: Vec<Work>,
    pub(super) invalidated: Option<String>,
}

pub(super) struct Event {
    context: u64,
    timing: bool,
    recorded: Option<(u64, u64)>,
    /// The device clock when the recorded work had run.
    done_at: Option<u64>,
}

pub(super) struct Graph {
    pub(super) context: u64,
    pub(super) nodes: Vec<Work>,
}

#[derive(Default)]
pub(super) struct Queues {
    pub(super) streams: BTreeMap<u64, Stream>,
    pub(super) events: BTreeMap<u64, Event>,
    pub(super) graphs: BTreeMap<u64, Graph>,
    pub(super) executables: BTreeMap<u64, Graph>,
}

impl Queues {
    pub(super) fn null_stream(&mut self, context: u64, id: u64) -> u64 {
        self.streams.insert(
            id,
            Stream {
                context,
                null: true,
                blocking: true,
                queue: VecDeque::new(),
                capture: None,
            },
        );
        id
    }

    pub(super) fn invalidate(&mut self, stream: u64, why: &str) {
        if let Some(capture) = self
            .streams
            .get_mut(&stream)
            .and_then(|s| s.capture.as_mut())
        {
            capture.invalidated.get_or_insert_with(|| why.to_string());
        }
    }

    /// Streams, events, graphs and instances never destroyed, for the exit report, each with
    /// its context: (context, what).
    pub(super) fn undestroyed(&self) -> Vec<(u64, String)> {
        let streams = self.streams.iter().filter(|(_, s)| !s.null).map(|(id, s)| {
            (
                s.context,
                format!("stream {id:#x} ({} operations queued)", s.queue.len()),
            )
        });
        let events = self.events.iter().map(|(id, e)| {
            (
                e.context,
                format!(
                    "event {id:#x} ({})",
                    if e.timing { "timing" } else { "no timing" }
                ),
            )
        });
        let graphs = self
            .graphs
            .iter()
            .map(|(id, g)| (g.context, format!("graph {id:#x}")));
        let executables = self
            .executables
            .iter()
            .map(|(id, g)| (g.context, format!("graph instance {id:#x}")));
        streams
            .chain(events)
            .chain(graphs)
            .chain(executables)
            .collect()
    }
}

impl World {
    /// The stream a caller names in `context`: 0 is the context's legacy default stream.
    pub fn stream_in(&self, stream: u64, context: u64) -> Outcome<u64> {
        if stream == 0 {
            return Ok(self.live_context(context)?.null_stream);
        }
        match self.queues.streams.get(&stream) {
            Some(s) if s.context == context => Ok(stream),
            Some(_) => Err(Fault::violation(
                Code::InvalidHandle,
                format!("stream {stream:#x} belongs to another context"),
            )),
            None => Err(self.unknown(stream, "stream")),
        }
    }

    /// The context a stream belongs to (0: `fallback`'s default stream).
    pub fn stream_context(&self, stream: u64, fallback: u64) -> Outcome<u64> {
        if stream == 0 {
            return Ok(fallback);
        }
        self.queues
            .streams
            .get(&stream)
            .map(|s| s.context)
            .ok_or_else(|| self.unknown(stream, "stream"))
    }

    pub fn create_stream(&mut self, context: u64, blocking: bool) -> Outcome<u64> {
        self.live_context(context)?;
        let id = self.handle();
        self.queues.streams.insert(
            id,
            Stream {
                context,
                null: false,
                blocking,
                queue: VecDeque::new(),
                capture: None,
            },
        );
        Ok(id)
    }

    pub fn destroy_stream(&mut self, stream: u64) -> Outcome<()> {
        let Some(state) = self.queues.streams.get(&stream).filter(|s| !s.null) else {
            return Err(self.unknown(stream, "stream"));
        };
        let (queued, capturing) = (state.queue.len(), state.capture.is_some());
        // The driver lets queued work finish after the destroy; it still runs here.
        self.run_until(stream, u64::MAX);
        self.queues.streams.remove(&stream);
        self.bury(stream, "stream");
        if capturing {
            return Err(Fault::violation(
                Code::CaptureInvalidated,
                format!("stream {stream:#x} destroyed while capturing"),
            ));
        }
        if queued > 0 {
            // Allowed by the drivers, but the runtime promises to wait for a stream's work before
            // its buffers may go: work still queued here is work nobody waited for.
            crate::record::line(&format!("violation (destroying a stream): stream {stream:#x} destroyed with {queued} operations queued that nobody waited for"));
        }
        Ok(())
    }

    /// Queues `work` on `stream` (or adds it to the stream's capture).
    pub fn enqueue(&mut self, stream: u64, work: Work) -> Outcome<()> {
        let capturing = CAPTURING.get();
        let state = self
            .queues
            .streams
            .get_mut(&stream)
            .ok_or_else(|| Fault::violation(Code::InvalidHandle, "no such stream"))?;
        if let Some(capture) = &mut state.capture {
            capture.nodes.push(work);
            return Ok(());
        }
        if state.null && capturing != 0 {
            self.queues
                .invalidate(capturing, "work on the legacy default stream");
            return Err(Fault::violation(
                Code::CaptureUnsupported,
                "work queued on the legacy default stream while this thread captures",
            ));
        }
        let seq = self.next_seq;
        self.next_seq += 1;
        state.queue.push_back((seq, work));
        Ok(())
    }

    /// Runs `stream`'s work queued up to `upto`, and what that work waits for.
    fn run_until(&mut self, stream: u64, upto: u64) {
        loop {
            let Some(state) = self.queues.streams.get(&stream) else {
                return;
            };
            let Some((seq, work)) = state.queue.front() else {
                return;
            };
            if *seq > upto {
                return;
            }
            let (seq, context, null, blocking) = (*seq, state.context, state.null, state.blocking);
            if let Work::Wait {
                stream: other,
                seq: until,
            } = work
            {
                let (other, until) = (*other, *until);
                self.run_until(other, until);
            }
            if null {
                let others: Vec<u64> = self
                    .queues
                    .streams
                    .iter()
                    .filter(|(id, s)| {
                        s.context == context && s.blocking && !s.null && **id != stream
                    })
                    .map(|(id, _)| *id)
                    .collect();
                for other in others {
                    self.run_until(other, seq - 1);
                }
            } else if blocking {
                if let Some(null_stream) = self.contexts.get(&context).map(|c| c.null_stream) {
                    self.run_until(null_stream, seq - 1);
                }
            }
            let Some((_, work)) = self
                .queues
                .streams
                .get_mut(&stream)
                .and_then(|s| s.queue.pop_front())
            else {
                return;
            };
            let device = self.contexts.get(&context).map(|c| c.device);
            self.perform(work, device);
        }
    }

    /// Does one piece of queued work now.
    fn perform(&mut self, work: Work, device: Option<usize>) {
        match work {
            Work::Copy { to, from, bytes } => {
                if let Err(fault) = self.copy_now(&to, &from, bytes, device) {
                    self.late_violation(format!(
                        "a queued copy of {bytes} bytes: {}",
                        fault.message
                    ));
                }
                self.tick(1);
            }
            Work::PeerCopy { to, from, bytes } => {
                if let Err(fault) =
                    self.copy_now(&Place::Memory(to), &Place::Memory(from), bytes, None)
                {
                    self.late_violation(format!(
                        "a queued peer copy of {bytes} bytes: {}",
                        fault.message
                    ));
                }
                self.tick(1);
            }
            Work::Fill { to, pattern, count } => {
                if let Err(fault) = self.write_pattern(to, pattern, count, device) {
                    self.late_violation(format!("a queued fill: {}", fault.message));
                }
                self.tick(1);
            }
            Work::Launch {
                kernel,
                module,
                pointers,
            } => {
                if !self.module_loaded(module) {
                    self.late_violation(format!(
                        "kernel `{kernel}` ran after its module was unloaded"
                    ));
                }
                for pointer in pointers {
                    if let Err(fault) = self.span(pointer, 0, device) {
                        self.late_violation(format!(
                            "kernel `{kernel}` ran with a pointer argument: {}",
                            fault.message
                        ));
                    }
                }
                self.tick(10);
            }
            Work::Record { event } => {
                let now = self.tick(0);
                if let Some(e) = self.queues.events.get_mut(&event) {
                    e.done_at = Some(now);
                }
            }
            Work::Wait { .. } => {}
        }
    }

    /// Copies `bytes` from one place to another, checking both.
    pub(super) fn copy_now(
        &mut self,
        to: &Place,
        from: &Place,
        bytes: usize,
        device: Option<usize>,
    ) -> Outcome<()> {
        if bytes == 0 {
            return Ok(());
        }
        let source: *const u8 = match from {
            Place::Memory(address) => self.span(*address, bytes, device)?,
            Place::Host(pointer) => *pointer as *const u8,
            Place::Staged(data) => data.as_ptr(),
        };
        let target: *mut u8 = match to {
            Place::Memory(address) => self.span(*address, bytes, device)?,
            Place::Host(pointer) => *pointer as *mut u8,
            Place::Staged(_) => {
                return Err(Fault::violation(
                    Code::InvalidValue,
                    "a copy into staged bytes",
                ))
            }
        };
        // SAFETY: memory of the double's was checked by `span`; host memory is the caller's,
        // valid for `bytes` as the copy's contract requires; `copy` allows overlap.
        unsafe { std::ptr::copy(source, target, bytes) };
        Ok(())
    }

    /// Where a caller's pointer goes in a queued copy: memory the double knows is read or written
    /// when the copy runs; pageable host memory is `Host`.
    pub fn place(&self, pointer: u64) -> Place {
        if self.known(pointer) || is_device_address(pointer) {
            Place::Memory(pointer)
        } else {
            Place::Host(pointer)
        }
    }

    fn stream_device(&self, stream: u64) -> Option<usize> {
        let context = self.queues.streams.get(&stream)?.context;
        self.contexts.get(&context).map(|c| c.device)
    }

    fn capturing(&self, stream: u64) -> bool {
        self.queues
            .streams
            .get(&stream)
            .is_some_and(|s| s.capture.is_some())
    }

    /// Checks a copy's memory now and queues it. Pageable host memory is read now (staged, as the
    /// driver stages it) or written once the stream reaches the copy, before the call returns, as
    /// the driver does with pageable memory; captured copies read and write it when the graph runs.
    pub fn queue_copy(&mut self, stream: u64, to: Place, from: Place, bytes: usize) -> Outcome<()> {
        let device = self.stream_device(stream);
        for place in [&to, &from] {
            if let Place::Memory(address) = place {
                self.span(*address, bytes, device)?;
            }
        }
        let capturing = self.capturing(stream);
        let from = match from {
            Place::Host(pointer) if !capturing && bytes > 0 => {
                // SAFETY: the caller's host memory holds `bytes` bytes, as the copy requires.
                Place::Staged(
                    unsafe { std::slice::from_raw_parts(pointer as *const u8, bytes) }.to_vec(),
                )
            }
            other => other,
        };
        let to_pageable = matches!(to, Place::Host(_));
        self.enqueue(stream, Work::Copy { to, from, bytes })?;
        if to_pageable && !capturing {
            let seq = self.next_seq - 1;
            self.run_until(stream, seq);
        }
        Ok(())
    }

    pub fn queue_fill(
        &mut self,
        stream: u64,
        to: u64,
        pattern: Pattern,
        count: usize,
    ) -> Outcome<()> {
        let device = self.stream_device(stream);
        self.span(to, pattern.span_bytes(count)?, device)?;
        self.enqueue(stream, Work::Fill { to, pattern, count })
    }

    /// `[address, address + bytes)` is memory `device` reaches.
    pub fn check_on_device(&mut self, address: u64, bytes: usize, device: usize) -> Outcome<()> {
        self.span(address, bytes, Some(device)).map(|_| ())
    }

    pub fn queue_peer_copy(
        &mut self,
        stream: u64,
        to: u64,
        from: u64,
        bytes: usize,
    ) -> Outcome<()> {
        self.enqueue(stream, Work::PeerCopy { to, from, bytes })
    }

    /// Everything queued on `stream` so far has run.
    pub fn synchronize_stream(&mut self, stream: u64) -> Outcome<()> {
        if self
            .queues
            .streams
            .get(&stream)
            .is_some_and(|s| s.capture.is_some())
        {
            self.queues
                .invalidate(stream, "synchronizing the capturing stream");
            return Err(Fault::violation(
                Code::CaptureUnsupported,
                format!("stream {stream:#x} synchronized while capturing"),
            ));
        }
        let upto = self.next_seq;
        self.run_until(stream, upto);
        Ok(())
    }

    pub fn synchronize_context(&mut self, context: u64) {
        let streams: Vec<u64> = self
            .queues
            .streams
            .iter()
            .filter(|(_, s)| s.context == context)
            .map(|(id, _)| *id)
            .collect();
        let upto = self.next_seq;
        for stream in streams {
            self.run_until(stream, upto);
        }
    }

    pub(super) fn synchronize_all(&mut self) {
        let contexts: Vec<u64> = self.contexts.keys().copied().collect();
        for context in contexts {
            self.synchronize_context(context);
        }
    }

    pub fn create_event(&mut self, context: u64, timing: bool) -> Outcome<u64> {
        self.live_context(context)?;
        let id = self.handle();
        self.queues.events.insert(
            id,
            Event {
                context,
                timing,
                recorded: None,
                done_at: None,
            },
        );
        Ok(id)
    }

    fn event(&self, event: u64) -> Outcome<&Event> {
        self.queues
            .events
            .get(&event)
            .ok_or_else(|| self.unknown(event, "event"))
    }

    pub fn destroy_event(&mut self, event: u64) -> Outcome<()> {
        self.event(event)?;
        self.queues.events.remove(&event);
        self.bury(event, "event");
        Ok(())
    }

    pub fn record_event(&mut self, event: u64, stream: u64) -> Outcome<()> {
        let context = self.event(event)?.context;
        if self.stream_context(stream, context)? != context {
            return Err(Fault::violation(
                Code::InvalidHandle,
                "an event recorded on a stream of another context",
            ));
        }
        let stream = self.stream_in(stream, context)?;
        self.enqueue(stream, Work::Record { event })?;
        let capturing = self
            .queues
            .streams
            .get(&stream)
            .is_some_and(|s| s.capture.is_some());
        if !capturing {
            let seq = self.next_seq - 1;
            if let Some(e) = self.queues.events.get_mut(&event) {
                e.recorded = Some((stream, seq));
                e.done_at = None;
            }
        }
        Ok(())
    }

    pub fn stream_wait_event(&mut self, stream: u64, event: u64, context: u64) -> Outcome<()> {
        let recorded = self.event(event)?.recorded;
        let stream = self.stream_in(stream, context)?;
        if let Some((other, seq)) = recorded {
            self.enqueue(stream, Work::Wait { stream: other, seq })?;
        }
        Ok(())
    }

    /// Waits for the event's recorded work (an event never recorded is complete).
    pub fn synchronize_event(&mut self, event: u64) -> Outcome<()> {
        if let Some((stream, seq)) = self.event(event)?.recorded {
            self.run_until(stream, seq);
        }
        Ok(())
    }

    pub fn elapsed_ms(&mut self, start: u64, end: u64) -> Outcome<f32> {
        let mut times = [0u64; 2];
        for (slot, event) in [start, end].into_iter().enumerate() {
            let state = self.event(event)?;
            if !state.timing {
                return Err(Fault::violation(
                    Code::InvalidHandle,
                    format!("event {event:#x} was created without timing"),
                ));
            }
            if state.recorded.is_none() {
                return Err(Fault::violation(
                    Code::InvalidHandle,
                    format!("event {event:#x} was never recorded"),
                ));
            }
            times[slot] = state.done_at.ok_or_else(|| {
                Fault::expected(
                    Code::NotReady,
                    format!("event {event:#x} has not completed"),
                )
            })?;
        }
        Ok((times[1] as f32 - times[0] as f32) / 1000.0)
    }

    pub(super) fn undestroyed_queues(&self) -> Vec<(u64, String)> {
        self.queues.undestroyed()
    }
}

impl World {
    /// Whether launches of `module`'s kernels are queued on any stream.
    pub(super) fn work_queued_for(&self, module: u64) -> bool {
        self.queues
            .streams
            .values()
            .flat_map(|s| &s.queue)
            .any(|(_, work)| matches!(work, Work::Launch { module: m, .. } if *m == module))
    }
}
