//! At exit, what the program never freed or destroyed, one `leak` line each: allocations,
//! streams, events, graphs and instances. Loaded modules and retained contexts are listed as
//! `kept` lines: a runtime may rightly keep them for the life of the process.

use super::{world, World};
use crate::record;

extern "C" {
    /// The C library's `atexit`: runs `function` when the process exits normally.
    fn atexit(function: extern "C" fn()) -> i32;
}

extern "C" fn report() {
    let Ok(world) = world().try_lock() else {
        record::line("leak report skipped: the double was busy at exit");
        return;
    };
    world.report_leaks();
}

/// Registers the exit report (once, when the state is made).
pub(super) fn report_at_exit() {
    // SAFETY: registers a function with no preconditions, which lives as long as the process
    // (this library is never unloaded: gpu-embed keeps its drivers for the process's life).
    unsafe { atexit(report) };
}

impl World {
    fn report_leaks(&self) {
        for (number, kind, bytes, base) in self.live_allocations() {
            record::line(&format!(
                "leak allocation #{number}: {kind:?}, {bytes} bytes at {base:#x}"
            ));
        }
        for (context, thing) in self.undestroyed_queues() {
            let device = self.contexts.get(&context).map(|c| &self.devices[c.device]);
            let on = device.map_or_else(String::new, |d| {
                format!(" on {:?} device {}", d.vendor, d.ordinal)
            });
            record::line(&format!("leak {thing}{on}"));
        }
        record::line(&format!("kept {} modules", self.loaded_modules()));
        for device in &self.devices {
            if device.primary_retains > 0 {
                record::line(&format!(
                    "kept {:?} device {}'s primary context, retained {} times",
                    device.vendor, device.ordinal, device.primary_retains
                ));
            }
        }
        record::line("exit");
    }
}
