//! Launch times (`GPU_MGPU_LAUNCH_TIMES=1`): each launch waits for its kernel and prints the
//! lines upstream's Vulkan runtime prints after each dispatch.

use crate::driver::{Driver, FunctionHandle, StreamHandle};
use crate::error::Result;
use std::ffi::c_void;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// A launch's configuration, as `mgpuLaunchKernel` received it.
pub(super) struct Launch<'a> {
    pub function: &'a FunctionHandle,
    pub grid: [u32; 3],
    pub block: [u32; 3],
    pub shared: u32,
    pub stream: &'a StreamHandle,
}

/// Whether `GPU_MGPU_LAUNCH_TIMES=1` asks for launch times (read once).
fn launch_times_requested() -> bool {
    static REQUESTED: OnceLock<bool> = OnceLock::new();
    *REQUESTED.get_or_init(|| std::env::var("GPU_MGPU_LAUNCH_TIMES").is_ok_and(|v| v == "1"))
}

/// Launches; with launch times requested, waits for the kernel and prints how long it ran
/// (between events recorded around it), how long the launch call took and how long the wait.
///
/// # Safety
/// `params` match the kernel's parameters.
pub(super) unsafe fn launch_timed(
    driver: &dyn Driver,
    launch: &Launch<'_>,
    params: &mut [*mut c_void],
    sizes: &[usize],
) -> Result<()> {
    let run = |params: &mut [*mut c_void]| {
        // SAFETY: the caller's guarantee.
        unsafe {
            driver.launch(
                launch.function,
                launch.grid,
                launch.block,
                launch.shared,
                launch.stream,
                params,
                sizes,
            )
        }
    };
    if !launch_times_requested() {
        return run(params);
    }
    let start = driver.create_event()?;
    let end = match driver.create_event() {
        Ok(end) => end,
        Err(error) => {
            driver.destroy_event(start);
            return Err(error);
        }
    };
    let timed = (|| {
        driver.record_event(&start, launch.stream)?;
        let submit = Instant::now();
        run(params)?;
        let submitted = submit.elapsed();
        driver.record_event(&end, launch.stream)?;
        let wait = Instant::now();
        driver.synchronize_event(&end)?;
        let waited = wait.elapsed();
        let kernel_ms = driver.elapsed_ms(&start, &end)?;
        print_launch_times(kernel_ms, submitted, waited);
        Ok(())
    })();
    driver.destroy_event(start);
    driver.destroy_event(end);
    timed
}

/// Upstream's Vulkan runtime's lines, after what the program's C code printed so far.
fn print_launch_times(kernel_ms: f32, submitted: Duration, waited: Duration) {
    use std::io::Write;
    extern "C" {
        fn fflush(stream: *mut c_void) -> i32;
    }
    // SAFETY: fflush(NULL) flushes every C output stream (the program's printing), so these
    // lines come after it.
    unsafe { fflush(std::ptr::null_mut()) };
    let mut out = std::io::stdout().lock();
    let _ = write!(
        out,
        "Compute shader execution time: {:.3}us\nCommand buffer submit time: {}us\nWait idle \
         time: {}us\n",
        f64::from(kernel_ms) * 1000.0,
        submitted.as_micros(),
        waited.as_micros()
    );
    let _ = out.flush();
}
