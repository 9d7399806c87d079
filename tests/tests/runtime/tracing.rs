//! The runtime's `tracing` events (gpu-embed's feature `tracing`): a module load, a launch with
//! its kernel, grid and block, copies, a synchronization and a free, captured on the host device.

use gpu_embed::{Device, DeviceBuffer, LaunchConfig};
use std::io::Write;
use std::sync::{Arc, Mutex};

/// Collects what the subscriber writes.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

/// What the runtime's events, every level, say while `work` runs on this thread (also for
/// `double/cuda.rs`).
pub fn traced(work: impl FnOnce()) -> String {
    let captured = Captured::default();
    let writer = captured.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::TRACE)
        .with_ansi(false)
        .with_writer(move || writer.clone())
        .finish();
    tracing::subscriber::with_default(subscriber, work);
    let bytes = captured.0.lock().unwrap().clone();
    String::from_utf8(bytes).unwrap()
}

impl Write for Captured {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[test]
fn loads_launches_copies_synchronizations_and_frees_are_traced() {
    // In a process of its own: a module loads once per process, and `tracing` caches, per event
    // site, that no subscriber wanted it when another test's launch passed there first.
    if !crate::rerun::in_own_process(
        module_path!(),
        "loads_launches_copies_synchronizations_and_frees_are_traced",
        &[],
    ) {
        return;
    }
    let text = traced(|| {
        let host = Device::host();
        let stream = host.create_stream().unwrap();
        let x = DeviceBuffer::from_slice(&host, &[1.0f32; 300]).unwrap();
        let config = LaunchConfig::for_elements(300, 128);
        // SAFETY: the kernel updates x[i] for i < 300; x holds 300 elements.
        unsafe { gpu_tests::vk::scale(&stream, &config, &x, 2.0, 300) }.unwrap();
        stream.synchronize().unwrap();
        assert_eq!(x.to_vec().unwrap(), vec![2.0; 300]);
    });
    for expected in [
        "module loaded",
        "module=\"vk\"",
        "launch",
        "kernel=\"scale\"",
        "grid=[3, 1, 1]",
        "block=[128, 1, 1]",
        "copy to device",
        "copy to host",
        "synchronize stream",
        "free",
        "gpu_embed",
    ] {
        assert!(text.contains(expected), "no `{expected}` in:\n{text}");
    }
}
