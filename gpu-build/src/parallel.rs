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
        match self.take() {
            Some(index) => {
                self.run(index);
                true
            }
            None => false,
        }
    }

    /// Claims the next item, unless an item has failed. A claimed item is always run: the
    /// failure check comes before the claim, so no index is taken and then dropped.
    fn take(&self) -> Option<usize> {
        if self.failed.load(Ordering::Acquire) {
            return None;
        }
        let index = self.next.fetch_add(1, Ordering::Relaxed);
        (index < self.items.len()).then_some(index)
    }

    fn run(&self, index: usize) {
        let result = (self.work)(&self.items[index]);
        if result.is_err() {
            self.failed.store(true, Ordering::Release);
        }
        *self.slots[index].lock().unwrap_or_else(|p| p.into_inner()) = Some(result);
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
            let start_worker = |workers: &mut Vec<_>, token: jobserver::Acquired| {
                let index = workers.len() + 1;
                workers.push(spawn(scope, index, move || {
                    let _token = token;
                    while queue.step() {}
                }));
            };
            let mut workers = Vec::new();
            let client = jobserver().filter(|_| extra_workers > 0);
            let (granted, tokens) = mpsc::channel();
            let helper = client.and_then(|client| {
                client
                    .clone()
                    .into_helper_thread(move |token| drop(granted.send(token)))
                    .ok()
            });
            if let Some(helper) = &helper {
                (0..extra_workers).for_each(|_| helper.request_token());
            }
            // Tokens the jobserver holds now reach the helper within microseconds: their workers
            // start before the first item, not after it (this thread looks for grants only
            // between items; measured, the second worker of a four-task build started one whole
            // task late). Bounded: another process may take a token first.
            let ready = client
                .and_then(|client| client.available().ok())
                .unwrap_or(0);
            for _ in 0..ready.min(extra_workers) {
                match tokens.recv_timeout(std::time::Duration::from_millis(20)) {
                    Ok(Ok(token)) => start_worker(&mut workers, token),
                    _ => break,
                }
            }
            loop {
                // Each granted token starts a worker that holds it until the queue is empty.
                while let Ok(Ok(token)) = tokens.try_recv() {
                    start_worker(&mut workers, token);
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
    collect(queue.slots)
}

/// The results in item order, or the first error in item order. Any failed slot is an error,
/// whatever else the slots hold: items after a failure may have been skipped (empty slots), and
/// an empty slot may come before the failed one when threads claimed items in another order.
fn collect<R>(slots: Vec<Mutex<Option<Result<R>>>>) -> Result<Vec<R>> {
    let slots: Vec<Option<Result<R>>> = slots
        .into_iter()
        .map(|slot| slot.into_inner().unwrap_or_else(|p| p.into_inner()))
        .collect();
    let mut results = Vec::with_capacity(slots.len());
    let mut skipped = 0;
    for slot in slots {
        match slot {
            Some(Ok(value)) => results.push(value),
            Some(Err(error)) => return Err(error),
            None => skipped += 1,
        }
    }
    if skipped > 0 {
        // Only a failure makes workers skip items, and failures were returned above.
        return Err(Error::new(
            ErrorKind::Codegen,
            format!("internal error: {skipped} compile tasks did not run and none failed"),
        ));
    }
    Ok(results)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A token the jobserver holds when work starts gives the second worker its first item at
    /// once: item 0 waits (up to 10 s) for item 1 to start, which never happens while the only
    /// running thread is item 0's.
    #[test]
    fn a_free_token_starts_a_worker_before_the_first_item_ends() {
        if std::thread::available_parallelism().map_or(1, |n| n.get()) < 2 {
            eprintln!("skipped: one core, so one worker");
            return;
        }
        let started = (Mutex::new(false), std::sync::Condvar::new());
        let results = run_all(&[0usize, 1], |&item| {
            let (flag, signal) = &started;
            let mut flag = flag.lock().unwrap();
            if item == 1 {
                *flag = true;
                signal.notify_all();
                return Ok(item);
            }
            let (flag, wait) = signal
                .wait_timeout_while(flag, std::time::Duration::from_secs(10), |started| {
                    !*started
                })
                .unwrap();
            if wait.timed_out() || !*flag {
                return Err(Error::new(
                    ErrorKind::Codegen,
                    "item 1 never started beside item 0",
                ));
            }
            Ok(item)
        });
        assert_eq!(results.map_err(|e| e.to_string()), Ok(vec![0, 1]));
    }

    fn queue<'a, F>(items: &'a [usize], work: &'a F) -> Queue<'a, usize, usize, F> {
        Queue {
            items,
            work,
            next: AtomicUsize::new(0),
            failed: AtomicBool::new(false),
            slots: items.iter().map(|_| Mutex::new(None)).collect(),
        }
    }

    fn fails_at_4(item: &usize) -> Result<usize> {
        if *item == 4 {
            Err(Error::new(ErrorKind::Codegen, "item 4 failed"))
        } else {
            Ok(*item * 10)
        }
    }

    /// The interleaving of the lost-error bug, step by step on one thread: worker A claims item 3,
    /// worker B claims item 4 and fails, then A goes on. A must still run item 3 and the
    /// collector must return B's error.
    #[test]
    fn a_failure_while_another_worker_holds_a_claim_is_reported() {
        let items: Vec<usize> = (0..6).collect();
        let queue = queue(&items, &fails_at_4);
        for _ in 0..3 {
            assert!(queue.step());
        }
        let claimed_by_a = queue.take();
        assert_eq!(claimed_by_a, Some(3));
        assert!(queue.step(), "B runs item 4");
        assert!(queue.failed.load(Ordering::Acquire));
        queue.run(3);
        assert!(!queue.step(), "nothing is claimed after a failure");
        let slots = &queue.slots;
        assert!(slots[3].lock().unwrap().is_some(), "A's claimed item ran");
        assert!(slots[5].lock().unwrap().is_none(), "item 5 was skipped");
        let error = collect(queue.slots).expect_err("the failure is returned");
        assert_eq!(error.message(), "item 4 failed");
    }

    /// The state the old collector turned into success: an empty slot before the failed one.
    #[test]
    fn an_empty_slot_before_a_failure_does_not_hide_it() {
        let slot = |value: Option<Result<usize>>| Mutex::new(value);
        let slots = vec![
            slot(Some(Ok(0))),
            slot(Some(Ok(1))),
            slot(Some(Ok(2))),
            slot(None),
            slot(Some(Err(Error::new(ErrorKind::Codegen, "item 4 failed")))),
        ];
        let error = collect(slots).expect_err("the failure is returned");
        assert_eq!(error.message(), "item 4 failed");
        let unexplained = collect(vec![slot(Some(Ok(0))), slot(None)]);
        assert!(
            unexplained.is_err(),
            "a skipped item without a failure is an error too"
        );
    }

    #[test]
    fn run_all_returns_every_result_in_order_or_the_first_error() {
        let items: Vec<usize> = (0..64).collect();
        let doubled = run_all(&items, |item| Ok(item * 2)).unwrap();
        assert_eq!(doubled, items.iter().map(|i| i * 2).collect::<Vec<_>>());
        let error = run_all(&items, fails_at_4).expect_err("item 4 fails");
        assert_eq!(error.message(), "item 4 failed");
    }
}
