//! The threads a host launch runs its blocks on: the launching thread, and whichever of a few
//! long-lived helper threads join while it still runs.
//!
//! A launch opens a job (its work, and how many helpers may join it), wakes the helpers and runs
//! the work itself; the work hands out blocks until none are left, so any number of threads
//! running it at once finish the grid. When the launching thread's own call returns, it closes
//! the job (no helper joins after that) and waits for the helpers that did join. So a launch too
//! small to be worth waking anybody for ends on the launching thread alone, as soon as its
//! blocks are done, and a large one is spread over every core.
//!
//! Helpers stay awake a little after a job, so launches issued back to back find them running.
//! What this replaced, and why not a general pool (measured with `cargo bench -p sample-project
//! --bench launch_overhead`, a 4-block kernel, on a 2-core machine): a thread spawned per launch
//! cost 65-90 us a launch and, placed next to its parent, doubled a 2 ms stencil's time in a
//! third of the runs; rayon's `ThreadPool::broadcast` cost 46-49 us, as every pool thread must
//! take part and the launching thread sleeps until the last is done.

use std::any::Any;
use std::panic::{self, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard, Once, OnceLock};
use std::time::{Duration, Instant};

/// How long a helper keeps looking for the next job before it sleeps.
const STAY_AWAKE: Duration = Duration::from_micros(500);
/// Checks of a waiting helper (or launching thread) before it starts yielding its core.
const SPINS: u32 = 2000;

/// Runs `work` on this thread and on up to `helpers` helper threads at once, returning when
/// every thread that ran it has returned. `work` must finish the job however many threads run
/// it (one included): helpers may not join at all. A panic in any call is raised here, after
/// every call has returned.
pub(super) fn run_together(helpers: usize, work: &(dyn Fn() + Sync)) {
    // Without helpers to ask (a one-block launch, one core), the helpers are never started.
    let Some(pool) = (helpers > 0).then(pool).filter(|pool| pool.threads > 0) else {
        work();
        return;
    };
    let _one_job_at_a_time = lock(&pool.submit);
    // SAFETY: only the lifetime is erased. Helpers call the work only after joining the open
    // job, and `Closer` (dropped before this function returns or unwinds) closes the job and
    // waits until every helper that joined has returned from the work, so no call outlives
    // the borrow.
    let erased: *const (dyn Fn() + Sync + 'static) = unsafe {
        std::mem::transmute::<*const (dyn Fn() + Sync + '_), *const (dyn Fn() + Sync + 'static)>(
            work,
        )
    };
    *lock(&pool.job) = Some(Job {
        work: Work(erased),
        seats: helpers.min(pool.threads),
    });
    pool.generation.fetch_add(1, Ordering::Release);
    if *lock(&pool.sleepers) > 0 {
        pool.wake.notify_all();
    }
    let closer = Closer(pool);
    work();
    drop(closer);
    if let Some(payload) = lock(&pool.panicked).take() {
        panic::resume_unwind(payload);
    }
}

/// The work of the open job, its lifetime erased (see `run_together`).
#[derive(Clone, Copy)]
struct Work(*const (dyn Fn() + Sync));

// SAFETY: the work is `Sync`, so calling it from several threads at once is sound; the pointer
// is only dereferenced while `run_together` keeps the borrow alive.
unsafe impl Send for Work {}

struct Job {
    work: Work,
    /// How many more helpers may join.
    seats: usize,
}

struct Pool {
    /// Helper threads started.
    threads: usize,
    /// The open job. Helpers join it, and the launching thread closes it, under this lock.
    job: Mutex<Option<Job>>,
    /// Counts the jobs opened: what waiting helpers watch.
    generation: AtomicU64,
    /// Helpers inside a job's work.
    inside: AtomicUsize,
    /// The first panic a helper's call raised, for the launching thread to raise again.
    panicked: Mutex<Option<Box<dyn Any + Send>>>,
    /// How many helpers sleep, and where they are woken.
    sleepers: Mutex<usize>,
    wake: Condvar,
    /// One launching thread at a time (launches already run one at a time; this keeps the pool
    /// sound on its own).
    submit: Mutex<()>,
}

/// The pool, its helpers started on first use: one per core besides the launching thread's.
fn pool() -> &'static Pool {
    static POOL: OnceLock<Pool> = OnceLock::new();
    static STARTED: Once = Once::new();
    let pool = POOL.get_or_init(|| {
        let cores = super::machine::cores();
        Pool {
            threads: cores.saturating_sub(1),
            job: Mutex::new(None),
            generation: AtomicU64::new(0),
            inside: AtomicUsize::new(0),
            panicked: Mutex::new(None),
            sleepers: Mutex::new(0),
            wake: Condvar::new(),
            submit: Mutex::new(()),
        }
    });
    STARTED.call_once(|| {
        for index in 0..pool.threads {
            // A helper that cannot be started leaves its seats empty: jobs still finish on the
            // threads that run them.
            let _ = std::thread::Builder::new()
                .name(format!("gpu-embed host {}", index + 1))
                .spawn(move || serve(pool));
        }
    });
    pool
}

/// A helper's life: wait for a job, join it while it is open, again.
fn serve(pool: &'static Pool) {
    let mut seen = 0;
    loop {
        seen = pool.next_job(seen);
        pool.join();
    }
}

impl Pool {
    /// Waits until a job newer than `seen` was opened, and returns its generation: checking, then
    /// yielding the core, then asleep.
    fn next_job(&self, seen: u64) -> u64 {
        let started = Instant::now();
        let mut checks = 0;
        loop {
            let now = self.generation.load(Ordering::Acquire);
            if now != seen {
                return now;
            }
            if checks < SPINS {
                checks += 1;
                std::hint::spin_loop();
            } else if started.elapsed() < STAY_AWAKE {
                std::thread::yield_now();
            } else {
                break;
            }
        }
        // The count goes up before the last check, both under the lock the launching thread
        // takes after opening its job: either this check sees the job or the launch sees a
        // sleeper to wake.
        let mut sleepers = lock(&self.sleepers);
        *sleepers += 1;
        while self.generation.load(Ordering::Acquire) == seen {
            sleepers = self
                .wake
                .wait(sleepers)
                .unwrap_or_else(|poisoned| poisoned.into_inner());
        }
        *sleepers -= 1;
        self.generation.load(Ordering::Acquire)
    }

    /// Runs the open job's work if a seat is left.
    fn join(&self) {
        let work = {
            let mut job = lock(&self.job);
            match job.as_mut() {
                Some(job) if job.seats > 0 => {
                    job.seats -= 1;
                    self.inside.fetch_add(1, Ordering::Relaxed);
                    job.work
                }
                _ => return,
            }
        };
        // SAFETY: joined while the job was open, so the launching thread waits for `inside` to
        // fall back before the work's borrow ends.
        let called = panic::catch_unwind(AssertUnwindSafe(|| unsafe { (*work.0)() }));
        if let Err(payload) = called {
            lock(&self.panicked).get_or_insert(payload);
        }
        // Release: what the work wrote is seen by the launching thread once it sees the count.
        self.inside.fetch_sub(1, Ordering::Release);
    }
}

/// Closes the open job and waits for the helpers inside it, also when the launching thread's
/// own call panics.
struct Closer(&'static Pool);

impl Drop for Closer {
    fn drop(&mut self) {
        *lock(&self.0.job) = None;
        let mut checks = 0;
        while self.0.inside.load(Ordering::Acquire) != 0 {
            if checks < SPINS {
                checks += 1;
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Hands out `total` items; returns how often each was taken.
    fn share_out(helpers: usize, total: usize) -> Vec<usize> {
        let next = AtomicUsize::new(0);
        let taken: Vec<AtomicUsize> = (0..total).map(|_| AtomicUsize::new(0)).collect();
        run_together(helpers, &|| loop {
            let item = next.fetch_add(1, Ordering::Relaxed);
            if item >= total {
                return;
            }
            taken[item].fetch_add(1, Ordering::Relaxed);
        });
        taken.into_iter().map(AtomicUsize::into_inner).collect()
    }

    #[test]
    fn every_item_runs_once_whoever_joins() {
        for round in 0..2000 {
            let helpers = round % 4;
            let total = [0, 1, 3, 100, 10_000][round % 5];
            assert!(
                share_out(helpers, total).iter().all(|&n| n == 1),
                "round {round}: {helpers} helpers, {total} items"
            );
        }
    }

    /// A launch with one helper seat in which the launching thread's call returns as soon as
    /// a helper has joined, and the helper's call runs `helper`; false where there are no
    /// helper threads (one core).
    fn with_one_helper(helper: impl Fn() + Sync) -> bool {
        if pool().threads == 0 {
            eprintln!("skipped: one core, no helper threads");
            return false;
        }
        let launcher = std::thread::current().id();
        let joined = AtomicUsize::new(0);
        run_together(1, &|| {
            if std::thread::current().id() == launcher {
                while joined.load(Ordering::SeqCst) == 0 {
                    std::thread::yield_now();
                }
            } else {
                joined.fetch_add(1, Ordering::SeqCst);
                helper();
            }
        });
        true
    }

    #[test]
    fn every_call_ends_before_the_launch_returns() {
        // The helper's call is still busy with a borrowed counter when the launching thread's
        // returns; the counter must not be gone yet.
        for _ in 0..20 {
            let finished = AtomicUsize::new(0);
            let ran = with_one_helper(|| {
                std::thread::sleep(Duration::from_millis(2));
                finished.fetch_add(1, Ordering::SeqCst);
            });
            if !ran {
                return;
            }
            assert_eq!(finished.load(Ordering::SeqCst), 1);
        }
    }

    #[test]
    fn a_helpers_panic_reaches_the_launching_thread_after_every_call() {
        let payload = panic::catch_unwind(AssertUnwindSafe(|| {
            with_one_helper(|| panic!("helper failed"));
        }));
        if pool().threads == 0 {
            return;
        }
        let payload = payload.expect_err("the helper's panic is raised on the launching thread");
        assert_eq!(payload.downcast_ref::<&str>(), Some(&"helper failed"));
        // The pool still serves launches.
        assert!(share_out(pool().threads, 1000).iter().all(|&n| n == 1));
    }
}
