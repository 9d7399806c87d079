//! Running compile tasks in parallel, within the parallelism cargo grants: a build script shares
//! cargo's jobserver, so every thread beyond the first works under a token from it (as `cc` and
//! rustc do). Tokens are requested through the jobserver's helper thread and a worker starts
//! when one arrives; the first thread never waits for a token, and pending requests are dropped
//! once the work is done, so build scripts holding every token cannot wait on each other.

use crate::error::{Error, ErrorKind, Result};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc, Mutex, OnceLock};
use std::thread::{Scope, ScopedJoinHandle};

/// MLIR's parser and LLVM recurse; a large stack turns pathological input into the nesting
/// check's error rather than a stack overflow.
const WORKER_STACK: usize = 256 << 20;

/// Cargo's jobserver, or one of our own outside cargo; `None` if neither can be had (then
/// everything runs on one thread).
fn jobserver() -> Option<&'static jobserver::Client> {
    static CLIENT: OnceLock<Option<jobserver::Client>> = OnceLock::new();
    CLIENT
        .get_or_init(|| {
            // SAFETY: called once per process, before any other code could take the inherited
            // jobserver descriptors.
            unsafe { jobserver::Client::from_env() }.or_else(|| {
                let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
                jobserver::Client::new(cores).ok()
            })
        })
        .as_ref()
}

/// The shared state of one `run_all`: the next item to take and a slot per result.
struct Queue<'a, T, R, F> {
    items: &'a [T],
    work: &'a F,
    next: AtomicUsize,
    failed: AtomicBool,
    slots: Vec<Mutex<Option<Result<R>>>>,
}

impl<T, R, F: Fn(&T) -> Result<R>> Queue<'_, T, R, F> {
    /// Runs the next item; `false` when none is left (or an item failed).
    fn step(&self) -> bool {
        let index = self.next.fetch_add(1, Ordering::Relaxed);
        if index >= self.items.len() || self.failed.load(Ordering::Relaxed) {
            return false;
        }
        let result = (self.work)(&self.items[index]);
        self.failed.fetch_or(result.is_err(), Ordering::Relaxed);
        *self.slots[index].lock().unwrap_or_else(|p| p.into_inner()) = Some(result);
        true
    }
}

/// A compiler thread with a large stack.
fn spawn<'scope, O: Send + 'scope>(
    scope: &'scope Scope<'scope, '_>,
    index: usize,
    body: impl FnOnce() -> O + Send + 'scope,
) -> Result<ScopedJoinHandle<'scope, O>> {
    std::thread::Builder::new()
        .name(format!("gpu-build-{index}"))
        .stack_size(WORKER_STACK)
        .spawn_scoped(scope, body)
        .map_err(|e| {
            Error::new(
                ErrorKind::Io,
                format!("cannot start a compiler thread: {e}"),
            )
        })
}

fn join<O>(handle: ScopedJoinHandle<'_, O>) -> Result<O> {
    handle
        .join()
        .map_err(|_| Error::new(ErrorKind::Codegen, "a compiler thread panicked"))
}

/// Runs `work` on every item and returns the results in order, or the first error (in item
/// order). After an error, items not yet started are skipped.
pub(crate) fn run_all<T: Sync, R: Send>(
    items: &[T],
    work: impl Fn(&T) -> Result<R> + Sync,
) -> Result<Vec<R>> {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let extra_workers = items.len().min(cores).saturating_sub(1);
    let queue = Queue {
        items,
        work: &work,
        next: AtomicUsize::new(0),
        failed: AtomicBool::new(false),
        slots: items.iter().map(|_| Mutex::new(None)).collect(),
    };
    std::thread::scope(|scope| {
        let queue = &queue;
        let first = spawn(scope, 0, move || {
            let (granted, tokens) = mpsc::channel();
            let helper = jobserver()
                .filter(|_| extra_workers > 0)
                .and_then(|client| {
                    client
                        .clone()
                        .into_helper_thread(move |token| drop(granted.send(token)))
                        .ok()
                });
            if let Some(helper) = &helper {
                (0..extra_workers).for_each(|_| helper.request_token());
            }
            let mut workers = Vec::new();
            loop {
                // Each granted token starts a worker that holds it until the queue is empty.
                while let Ok(Ok(token)) = tokens.try_recv() {
                    workers.push(spawn(scope, workers.len() + 1, move || {
                        let _token = token;
                        while queue.step() {}
                    }));
                }
                if !queue.step() {
                    break;
                }
            }
            // Stops asking for tokens this run no longer needs.
            drop(helper);
            workers.into_iter().try_for_each(|worker| join(worker?))
        })?;
        join(first)?
    })?;
    let mut results = Vec::with_capacity(items.len());
    for slot in queue.slots {
        match slot.into_inner().unwrap_or_else(|p| p.into_inner()) {
            Some(Ok(value)) => results.push(value),
            Some(Err(error)) => return Err(error),
            // Skipped: only items taken after a failure are, and the failed item was taken before
            // them, so its error has already been returned.
            None => break,
        }
    }
    Ok(results)
}
