//! The documented opt-out of cross-stream ordering (`Device::disable_tracking`). It changes the
//! host device for the whole process, and each test's outcome depends on host streams running
//! lazily, so each test runs in a process of its own.

use crate::rerun::in_own_process;
use gpu_embed::{Device, DeviceBuffer, LaunchConfig};

#[test]
fn without_tracking_a_kernel_on_another_stream_can_see_the_old_data() {
    if !in_own_process(
        module_path!(),
        "without_tracking_a_kernel_on_another_stream_can_see_the_old_data",
        &[],
    ) {
        return;
    }
    let host = Device::host();
    // SAFETY: the streams below share `x` on purpose, unordered; the kernel reads no sizes or
    // indices from it.
    unsafe { host.disable_tracking() };
    let (a, b) = (host.create_stream().unwrap(), host.create_stream().unwrap());
    let n = 1000;
    let x = DeviceBuffer::<f32>::alloc(&host, n).unwrap();
    a.fill(&x, 3.0).unwrap();
    let config = LaunchConfig::for_elements(n, 128);
    // SAFETY: the kernel updates x[i] for i < n; x holds n elements.
    unsafe { gpu_tests::vk::scale(&b, &config, &x, 2.0, n) }.unwrap();
    let mut out = vec![1.0f32; n];
    b.copy_to_host(&mut out, &x).unwrap();
    // B ran before A's fill (host streams run lazily, and nothing ordered them): the old zeros.
    assert_eq!(out, vec![0.0; n]);
    // Dropping x still waits (for the whole device, as its work is not tracked).
    drop(x);
    a.synchronize().unwrap();
}

#[test]
fn without_tracking_a_copy_on_another_stream_can_run_first() {
    if !in_own_process(
        module_path!(),
        "without_tracking_a_copy_on_another_stream_can_run_first",
        &[],
    ) {
        return;
    }
    let host = Device::host();
    // SAFETY: as above: the copy below is unordered on purpose and no kernel reads its data.
    unsafe { host.disable_tracking() };
    let n = 1 << 16;
    let (first, second) = (host.create_stream().unwrap(), host.create_stream().unwrap());
    let x = DeviceBuffer::<u32>::alloc(&host, n).unwrap();
    let y = DeviceBuffer::<u32>::alloc(&host, n).unwrap();
    first.fill(&x, 7).unwrap();
    second.copy(&y, &x).unwrap();
    let mut seen = vec![1u32; n];
    second.copy_to_host(&mut seen, &y).unwrap();
    assert!(
        seen.iter().all(|&v| v == 0),
        "the copy ran after the fill unasked"
    );
    first.synchronize().unwrap();
}
