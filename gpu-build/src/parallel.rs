//! Running compile tasks in parallel, within the parallelism cargo grants: a build script shares
//! cargo's jobserver, so each extra worker thread first takes a token from it (as `cc` does).
//! Extra workers only poll for a token while work remains: blocking on one would deadlock when
//! every token is held by build scripts waiting for their own workers.

use crate::error::{Error, ErrorKind, Result};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};

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

/// A jobserver token, or `None` once no work is left (or the jobserver fails).
fn wait_for_token(next: &AtomicUsize, items: usize) -> Option<jobserver::Acquired> {
    loop {
        if next.load(Ordering::Relaxed) >= items {
            return None;
        }
        match jobserver()?.try_acquire() {
            Ok(Some(token)) => return Some(token),
            Ok(None) => std::thread::sleep(std::time::Duration::from_millis(5)),
            Err(_) => return None,
        }
    }
}

/// Runs `work` on every item and returns the results in order, or the first error (in item
/// order). After an error, items not yet started are skipped.
pub(crate) fn run_all<T: Sync, R: Send>(
    items: &[T],
    work: impl Fn(&T) -> Result<R> + Sync,
) -> Result<Vec<R>> {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let workers = items.len().min(cores).max(1);
    let next = AtomicUsize::new(0);
    let failed = AtomicBool::new(false);
    let slots: Vec<Mutex<Option<Result<R>>>> = items.iter().map(|_| Mutex::new(None)).collect();
    let worker = |first: bool| {
        // The build script holds one token implicitly; every further worker needs its own.
        let _token = if first {
            None
        } else {
            Some(wait_for_token(&next, items.len())?)
        };
        loop {
            let index = next.fetch_add(1, Ordering::Relaxed);
            if index >= items.len() || failed.load(Ordering::Relaxed) {
                return Some(());
            }
            let result = work(&items[index]);
            failed.fetch_or(result.is_err(), Ordering::Relaxed);
            *slots[index].lock().unwrap_or_else(|p| p.into_inner()) = Some(result);
        }
    };
    std::thread::scope(|scope| {
        let handles: Vec<_> = (0..workers)
            .map(|i| {
                std::thread::Builder::new()
                    .name(format!("gpu-build-{i}"))
                    .stack_size(WORKER_STACK)
                    .spawn_scoped(scope, move || worker(i == 0))
            })
            .collect();
        for handle in handles {
            let handle = handle.map_err(|e| {
                Error::new(
                    ErrorKind::Io,
                    format!("cannot start a compiler thread: {e}"),
                )
            })?;
            handle
                .join()
                .map_err(|_| Error::new(ErrorKind::Codegen, "a compiler thread panicked"))?;
        }
        Ok::<_, Error>(())
    })?;
    let mut results = Vec::with_capacity(items.len());
    for slot in slots {
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
