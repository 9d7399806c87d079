//! Graphs: work captured on a stream once and replayed with one call, on every device.
//!
//! Between [`Stream::begin_capture`] and [`Stream::end_capture`], the launches, device-to-device
//! copies and fills queued on the stream are recorded instead of run: a launch with a copy of
//! its parameter values, each operation with the buffers it uses. On CUDA and HIP,
//! `end_capture` also queues the recorded work once on a capturing stream of the driver and
//! instantiates the driver's own graph (`cuGraphInstantiate`, `hipGraphInstantiate`), so a
//! replay is one `cuGraphLaunch` without the driver's per-launch work; elsewhere (the host,
//! Vulkan) the runtime queues the operations again itself.
//!
//! [`Graph::launch`] keeps the buffers' tracking either way: the replay waits for other
//! streams' work on its buffers and marks them (`tracking.rs`), once around the whole graph
//! (its operations follow each other on the replaying stream). cudarc's tracking, by contrast,
//! breaks CUDA's stream capture (cudarc #590): here no event is recorded into a driver's
//! capture. A graph
//! holds its buffers weakly: a replay after one of them was dropped is an error, never a launch
//! on freed memory.
use crate::device::{Device, LoadedFunction};
use crate::driver::{GraphHandle, Pattern, StreamHandle};
use crate::error::{Error, ErrorKind, Result};
use crate::stream::{Queue, Stream};
use crate::tracking::{lock, mark_end, Access, BufferTracking, TrackingGuard};
use std::collections::HashMap;
use std::ffi::c_void;
use std::sync::{Arc, Mutex, MutexGuard, Weak};

/// A buffer an operation uses, and how.
#[derive(Clone)]
struct Use {
    tracking: Weak<BufferTracking>,
    access: Access,
}

/// One captured operation.
enum Op {
    Launch {
        /// The kernel's function, with what its replay leaves for a fault report to name.
        function: &'static LoadedFunction,
        grid: [u32; 3],
        block: [u32; 3],
        shared: u32,
        /// Each parameter's value, in an 8-byte slot (every lowered parameter is 1 to 8 bytes).
        params: Vec<u64>,
        sizes: Vec<usize>,
    },
    Copy {
        target: u64,
        source: u64,
        bytes: usize,
    },
    Fill {
        target: u64,
        pattern: Pattern,
        count: usize,
    },
}

/// Captured operations, each with the buffers it uses.
type Ops = Vec<(Op, Vec<Use>)>;

/// A graph's buffers, each once, with its strongest use in the graph.
type GraphBuffers = Vec<(Weak<BufferTracking>, Access)>;

/// One stream's capture: the operations so far, and whether the stream still exists.
struct Capture {
    stream: Weak<()>,
    ops: Ops,
}

/// The operations being captured, by stream id.
static CAPTURES: Mutex<Option<HashMap<u64, Capture>>> = Mutex::new(None);

fn captures() -> MutexGuard<'static, Option<HashMap<u64, Capture>>> {
    CAPTURES
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The error for work a capture cannot record.
pub(crate) fn not_capturable(what: &str) -> Error {
    Error::new(
        ErrorKind::InvalidArgument,
        format!(
            "{what} cannot be captured into a graph (a graph replays launches, copies between \
             device buffers and fills); queue it on another stream, or end the capture first"
        ),
    )
}

fn record(stream: &Stream, op: Op, uses: Vec<Use>) {
    if let Some(capture) = captures()
        .as_mut()
        .and_then(|captures| captures.get_mut(&stream.id()))
    {
        capture.ops.push((op, uses));
    }
}

/// A launch as a capture records it.
pub(crate) struct CapturedLaunch<'a> {
    pub function: &'static LoadedFunction,
    pub grid: [u32; 3],
    pub block: [u32; 3],
    pub shared: u32,
    pub params: &'a [*mut c_void],
    pub sizes: &'a [usize],
}

/// Records a launch on a capturing stream: the function, the configuration and a copy of each
/// parameter's value; every buffer in `uses` as written.
pub(crate) fn record_launch(
    stream: &Stream,
    launch: CapturedLaunch,
    uses: &[&Arc<BufferTracking>],
) -> Result<()> {
    let CapturedLaunch {
        function,
        grid,
        block,
        shared,
        params,
        sizes,
    } = launch;
    let mut values = Vec::with_capacity(params.len());
    for (&param, &size) in params.iter().zip(sizes) {
        if size > size_of::<u64>() {
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                format!(
                    "launching `{}` into a graph: a parameter of {size} bytes",
                    function.launch.kernel
                ),
            ));
        }
        let mut slot = 0u64;
        // SAFETY: the launch's caller guarantees each parameter points at `size` readable bytes
        // (`launch`'s contract); `size` fits the slot.
        unsafe {
            std::ptr::copy_nonoverlapping(
                param.cast::<u8>(),
                (&mut slot as *mut u64).cast::<u8>(),
                size,
            )
        };
        values.push(slot);
    }
    let uses = uses
        .iter()
        .map(|tracking| Use {
            tracking: Arc::downgrade(tracking),
            access: Access::Write,
        })
        .collect();
    let op = Op::Launch {
        function,
        grid,
        block,
        shared,
        params: values,
        sizes: sizes.to_vec(),
    };
    record(stream, op, uses);
    Ok(())
}

/// Records a copy of `bytes` between two device ranges (checked by the caller).
pub(crate) fn record_copy(
    stream: &Stream,
    (target, target_tracking): (u64, &Arc<BufferTracking>),
    (source, source_tracking): (u64, &Arc<BufferTracking>),
    bytes: usize,
) {
    let uses = vec![
        Use {
            tracking: Arc::downgrade(target_tracking),
            access: Access::Write,
        },
        Use {
            tracking: Arc::downgrade(source_tracking),
            access: Access::Read,
        },
    ];
    record(
        stream,
        Op::Copy {
            target,
            source,
            bytes,
        },
        uses,
    );
}

/// Records a fill of `count` patterns from `target` (checked by the caller).
pub(crate) fn record_fill(
    stream: &Stream,
    (target, tracking): (u64, &Arc<BufferTracking>),
    pattern: Pattern,
    count: usize,
) {
    let uses = vec![Use {
        tracking: Arc::downgrade(tracking),
        access: Access::Write,
    }];
    record(
        stream,
        Op::Fill {
            target,
            pattern,
            count,
        },
        uses,
    );
}

impl Stream {
    /// Starts capturing: the launches, device-to-device copies and fills queued on this stream
    /// from now on are recorded into a graph ([`Stream::end_capture`]) instead of run. Copies
    /// with host memory are refused while it captures; events and synchronization work as
    /// usual (on what is really queued).
    pub fn begin_capture(&self) -> Result<()> {
        let mut captures = captures();
        let captures = captures.get_or_insert_with(HashMap::new);
        // Captures of streams dropped while capturing go now.
        captures.retain(|_, capture| capture.stream.strong_count() > 0);
        if captures.contains_key(&self.id()) {
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                "the stream is capturing already",
            ));
        }
        let capture = Capture {
            stream: self.liveness(),
            ops: Vec::new(),
        };
        captures.insert(self.id(), capture);
        self.set_capturing(true);
        Ok(())
    }

    /// Ends the capture: the graph of what was queued since [`Stream::begin_capture`].
    pub fn end_capture(&self) -> Result<Graph> {
        let ops = {
            let mut captures = captures();
            let capture = captures
                .as_mut()
                .and_then(|captures| captures.remove(&self.id()))
                .ok_or_else(|| {
                    Error::new(ErrorKind::InvalidArgument, "the stream is not capturing")
                })?;
            self.set_capturing(false);
            capture.ops
        };
        let device = self.device().clone();
        let executable = if ops.is_empty() {
            None
        } else {
            let driver = device.current()?;
            let mut parameters = Parameters::default();
            let mut queue_all = |stream: &StreamHandle| {
                ops.iter().try_for_each(|(op, _)| {
                    // SAFETY: queued on a capturing stream, where nothing runs: the driver's
                    // graph only records it (its memory is checked at each replay).
                    unsafe { replay(&*driver, op, stream, &mut parameters) }
                })
            };
            driver
                .instantiate_graph(&mut queue_all)
                .map_err(|e| device.context(e))?
        };
        let buffers = graph_buffers(&ops);
        Ok(Graph {
            device,
            ops: ops.into_iter().map(|(op, _)| op).collect(),
            buffers,
            executable,
        })
    }
}

/// Work captured on a stream, replayed with [`Graph::launch`].
pub struct Graph {
    device: Device,
    ops: Vec<Op>,
    /// Every buffer the graph uses, once, in the order a replay locks them (by address, so two
    /// replays never wait for each other's locks in a circle), with its strongest use. Found
    /// once here, not at each replay: a replay of 10,000 launches looked up 30,000 uses.
    buffers: GraphBuffers,
    /// The driver's instantiated graph of `ops` (CUDA, HIP).
    executable: Option<GraphHandle>,
}

/// The buffers of `ops`, each once, by address, with its strongest use.
fn graph_buffers(ops: &Ops) -> GraphBuffers {
    let mut buffers: GraphBuffers = ops
        .iter()
        .flat_map(|(_, uses)| uses)
        .map(|used| (used.tracking.clone(), used.access))
        .collect();
    // A Weak keeps its allocation, so an address names one buffer while the graph holds it.
    buffers.sort_by_key(|(tracking, _)| tracking.as_ptr() as usize);
    buffers.dedup_by(|(later, later_access), (first, first_access)| {
        let same = later.ptr_eq(first);
        if same && *later_access == Access::Write {
            *first_access = Access::Write;
        }
        same
    });
    buffers
}

impl Drop for Graph {
    fn drop(&mut self) {
        if let (Some(executable), Ok(driver)) = (self.executable.take(), self.device.current()) {
            driver.destroy_graph(executable);
        }
    }
}

impl std::fmt::Debug for Graph {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Graph({} operations on {})",
            self.ops.len(),
            self.device.name()
        )
    }
}

impl Graph {
    /// How many operations it replays.
    pub fn len(&self) -> usize {
        self.ops.len()
    }

    /// Whether it replays nothing.
    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }

    /// Queues the captured work on `stream` (of the graph's device), in order: the replay waits
    /// for other streams' work on the graph's buffers first, and marks them after it, so other
    /// streams and the buffers' drops wait for it. An error, before anything is queued, when a
    /// buffer the graph uses was dropped.
    ///
    /// # Safety
    /// What each captured launch's `# Safety` section asked of its caller holds again now, and
    /// memory the captured launches reach through pointer arguments (`DevicePtr`, which no
    /// buffer tracks) is still allocated. Memref arguments' buffers are checked here.
    pub unsafe fn launch(&self, stream: &Stream) -> Result<()> {
        if !stream.device().is_same(&self.device) {
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                format!(
                    "a graph of {} launched on a stream of {}",
                    self.device.name(),
                    stream.device().name()
                ),
            ));
        }
        if stream.capturing() {
            return Err(not_capturable("a graph's launch"));
        }
        // Every buffer the graph uses, alive, locked for the whole replay (in address order):
        // none can be dropped half-way, and a drop that came first is seen (`retired`).
        let buffers = self
            .buffers
            .iter()
            .map(|(tracking, _)| tracking.upgrade().ok_or_else(dropped))
            .collect::<Result<Vec<_>>>()?;
        let mut guards: Vec<TrackingGuard> = buffers.iter().map(|b| lock(b)).collect();
        if guards.iter().any(|guard| guard.retired()) {
            return Err(dropped());
        }
        if guards.iter().any(|guard| guard.on_host()) {
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                "a managed buffer this graph uses is borrowed on the host \
                 (DeviceBuffer::host_slice); replay the graph once that slice is dropped",
            ));
        }
        let queue = Queue::Stream(stream);
        let driver = self.device.current()?;
        // Each buffer waits once, for what its strongest use in the graph must follow: the
        // operations run in order on `stream`, so each follows the ones before it.
        for (guard, (_, access)) in guards.iter().zip(&self.buffers) {
            guard.before(&queue, *access)?;
        }
        match &self.executable {
            Some(executable) => {
                // SAFETY: the graph's buffers are alive and locked; the caller guarantees what
                // the captured launches' contracts asked (see `# Safety`).
                unsafe { driver.launch_graph(executable, stream.raw()) }
                    .map_err(|e| self.device.context(e))?;
                self.replayed(stream, &queue, &mut guards, &self.ops);
                Ok(())
            }
            None => {
                // The runtime queues each operation again; what it queued before a failure is
                // marked as the whole graph would have been.
                let mut parameters = Parameters::default();
                let mut queued = 0;
                let result = self.ops.iter().try_for_each(|op| {
                    // SAFETY: the operation as it was captured, its buffers alive and locked;
                    // the caller guarantees what its launch's own contract asked (see
                    // `# Safety`).
                    unsafe { replay(&*driver, op, stream.raw(), &mut parameters) }
                        .map_err(|e| self.device.context(e))?;
                    queued += 1;
                    Ok(())
                });
                if queued > 0 {
                    self.replayed(stream, &queue, &mut guards, &self.ops[..queued]);
                }
                result
            }
        }
    }

    /// After `queued` (the graph's operations that were queued on `stream`): the last launch
    /// among them is remembered for fault reports, and every buffer of the graph is marked
    /// once, after them all (later than an early operation's own end: the buffer's next user
    /// waits a little longer, never too little).
    fn replayed(
        &self,
        stream: &Stream,
        queue: &Queue,
        guards: &mut [TrackingGuard],
        queued: &[Op],
    ) {
        let last_launch = queued.iter().rev().find_map(|op| match op {
            Op::Launch { function, .. } => Some(&function.launch),
            _ => None,
        });
        if let Some(launched) = last_launch {
            self.device.launched(launched);
            stream.launched(launched);
        }
        let end = mark_end(queue);
        for (guard, (_, access)) in guards.iter_mut().zip(&self.buffers) {
            guard.note(&end, *access);
        }
    }
}

fn dropped() -> Error {
    Error::new(
        ErrorKind::InvalidArgument,
        "a buffer this graph uses was dropped; capture the work again with live buffers",
    )
}

/// A launch's parameters as a driver takes them: a copy of the captured values, and a pointer
/// to each. One per replay, reused from launch to launch.
#[derive(Default)]
struct Parameters {
    values: Vec<u64>,
    pointers: Vec<*mut c_void>,
}

impl Parameters {
    /// Pointers to a fresh copy of `captured`.
    fn of(&mut self, captured: &[u64]) -> &mut [*mut c_void] {
        self.values.clear();
        self.values.extend_from_slice(captured);
        self.pointers.clear();
        self.pointers.extend(
            self.values
                .iter_mut()
                .map(|value| (value as *mut u64).cast::<c_void>()),
        );
        &mut self.pointers
    }
}

/// Queues one captured operation on `stream` (a driver's stream of the graph's device).
///
/// # Safety
/// As [`Graph::launch`]; the operation's buffers are alive (or `stream` is capturing).
unsafe fn replay(
    driver: &dyn crate::driver::Driver,
    op: &Op,
    stream: &StreamHandle,
    parameters: &mut Parameters,
) -> Result<()> {
    match op {
        Op::Launch {
            function,
            grid,
            block,
            shared,
            params,
            sizes,
            ..
        } => {
            let pointers = parameters.of(params);
            // SAFETY: the parameters as captured (each in an aligned 8-byte slot, its size
            // unchanged); the caller guarantees the rest.
            unsafe {
                driver.launch(
                    &function.handle,
                    *grid,
                    *block,
                    *shared,
                    stream,
                    pointers,
                    sizes,
                )
            }
        }
        Op::Copy {
            target,
            source,
            bytes,
        } => {
            // SAFETY: two ranges of live buffers, checked when captured; both stay allocated
            // until the copy has run (their drop waits for the mark noted after it).
            unsafe { driver.copy_on_device_async(*target, *source, *bytes, stream) }
        }
        Op::Fill {
            target,
            pattern,
            count,
        } => {
            // SAFETY: as above, for the filled range.
            unsafe { driver.fill_async(*target, *pattern, *count, stream) }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_capture_left_open_by_a_dropped_stream_is_discarded() {
        let host = Device::host();
        let dropped = host.create_stream().unwrap();
        dropped.begin_capture().unwrap();
        let id = dropped.id();
        drop(dropped);
        let stream = host.create_stream().unwrap();
        stream.begin_capture().unwrap();
        assert!(!captures().as_ref().unwrap().contains_key(&id));
        assert!(stream.end_capture().unwrap().is_empty());
    }
}
