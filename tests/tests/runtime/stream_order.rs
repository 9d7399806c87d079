//! Streams that share a buffer, on the host device: work on one stream waits for the other
//! streams' work on the same buffer without any user event, and dropping a buffer waits for its
//! own work only (gpu-embed's `tracking.rs`). Host streams run lazily, only when something needs
//! them, so an ordering nobody asked for shows: each test here runs in a process of its own (a
//! default-stream operation in a concurrent test would run every queued stream), and again,
//! one at a time, under memcheck.

use crate::rerun::in_own_process;
use gpu_embed::{Device, DeviceBuffer, LaunchConfig};

/// This module's tests again, under valgrind's memcheck: no invalid access.
#[test]
fn memcheck() {
    crate::rerun::memcheck_module(module_path!());
}

#[test]
fn a_copy_on_one_stream_sees_what_another_stream_wrote() {
    if !in_own_process(
        module_path!(),
        "a_copy_on_one_stream_sees_what_another_stream_wrote",
        &[],
    ) {
        return;
    }
    let host = Device::host();
    let n = 1 << 16;
    let (first, second) = (host.create_stream().unwrap(), host.create_stream().unwrap());
    let x = DeviceBuffer::<u32>::alloc(&host, n).unwrap();
    let y = DeviceBuffer::<u32>::alloc(&host, n).unwrap();
    first.fill(&x, 7).unwrap();
    second.copy(&y, &x).unwrap();
    let mut seen = vec![1u32; n];
    // Only the second stream is asked for: it waited for the first's fill of x on its own.
    second.copy_to_host(&mut seen, &y).unwrap();
    assert!(seen.iter().all(|&v| v == 7), "the copy ran before the fill");
}

/// `x *= factor` on `stream` (the tests kernel `vk::scale`, built for the host too).
fn scale_on(stream: &gpu_embed::Stream, x: &DeviceBuffer<f32>, factor: f32) {
    let config = LaunchConfig::for_elements(x.len(), 128);
    // SAFETY: the kernel updates x[i] for i < len; x holds len elements.
    unsafe { gpu_tests::vk::scale(stream, &config, x, factor, x.len()) }.unwrap();
}

#[test]
fn a_kernel_on_one_stream_sees_what_another_stream_wrote_without_a_user_event() {
    if !in_own_process(
        module_path!(),
        "a_kernel_on_one_stream_sees_what_another_stream_wrote_without_a_user_event",
        &[],
    ) {
        return;
    }
    let host = Device::host();
    let (a, b) = (host.create_stream().unwrap(), host.create_stream().unwrap());
    let n = 1000;
    let x = DeviceBuffer::<f32>::alloc(&host, n).unwrap();
    // Queued on A (host streams run lazily: nothing has run yet), then a kernel on B reading it.
    a.fill(&x, 3.0).unwrap();
    scale_on(&b, &x, 2.0);
    let mut out = vec![0.0f32; n];
    // Only B is asked for; it waited for A's fill on its own.
    b.copy_to_host(&mut out, &x).unwrap();
    assert_eq!(out, vec![6.0; n]);
    // And a write on A after B's read and write waits for them: 6 * 10, not 3 * 10 or 3.
    scale_on(&a, &x, 10.0);
    a.copy_to_host(&mut out, &x).unwrap();
    assert_eq!(out, vec![60.0; n]);
}

#[test]
fn dropping_a_buffer_waits_for_its_own_work_not_for_other_streams() {
    if !in_own_process(
        module_path!(),
        "dropping_a_buffer_waits_for_its_own_work_not_for_other_streams",
        &[],
    ) {
        return;
    }
    let host = Device::host();
    let (a, b) = (host.create_stream().unwrap(), host.create_stream().unwrap());
    let x = DeviceBuffer::<f32>::alloc(&host, 1000).unwrap();
    let y = DeviceBuffer::<f32>::alloc(&host, 1000).unwrap();
    a.fill(&x, 1.0).unwrap();
    scale_on(&a, &x, 2.0);
    b.fill(&y, 5.0).unwrap();
    let b_done = host.create_event().unwrap();
    b.record(&b_done).unwrap();
    drop(x);
    // B's queued work has not run: dropping x waited for A's work on x only.
    assert!(!b_done.query().unwrap());
    assert_eq!(y.to_vec().unwrap(), vec![5.0; 1000]);
    b.synchronize().unwrap();
    assert!(b_done.query().unwrap());
}

#[test]
fn a_buffer_whose_address_was_handed_out_waits_for_the_whole_device() {
    if !in_own_process(
        module_path!(),
        "a_buffer_whose_address_was_handed_out_waits_for_the_whole_device",
        &[],
    ) {
        return;
    }
    let host = Device::host();
    let (a, b) = (host.create_stream().unwrap(), host.create_stream().unwrap());
    let x = DeviceBuffer::<f32>::alloc(&host, 100).unwrap();
    let y = DeviceBuffer::<f32>::alloc(&host, 100).unwrap();
    // Work through the raw address is nobody's to track.
    let _address = x.device_ptr();
    a.fill(&x, 1.0).unwrap();
    b.fill(&y, 5.0).unwrap();
    let b_done = host.create_event().unwrap();
    b.record(&b_done).unwrap();
    drop(x);
    assert!(b_done.query().unwrap(), "the drop waited for every stream");
}

#[test]
fn a_buffers_helpers_wait_for_its_own_work_not_for_unrelated_streams() {
    if !in_own_process(
        module_path!(),
        "a_buffers_helpers_wait_for_its_own_work_not_for_unrelated_streams",
        &[],
    ) {
        return;
    }
    let host = Device::host();
    let (a, b) = (host.create_stream().unwrap(), host.create_stream().unwrap());
    let x = DeviceBuffer::<f32>::alloc(&host, 1000).unwrap();
    let y = DeviceBuffer::<f32>::alloc(&host, 1000).unwrap();
    a.fill(&x, 4.0).unwrap();
    b.fill(&y, 5.0).unwrap();
    let b_done = host.create_event().unwrap();
    b.record(&b_done).unwrap();
    // x's helpers wait for A's fill of x, and for nothing on B.
    assert_eq!(x.to_vec().unwrap(), vec![4.0; 1000]);
    assert!(!b_done.query().unwrap(), "reading x ran stream B's work");
    let mut z = DeviceBuffer::<f32>::alloc(&host, 1000).unwrap();
    z.copy_from_buffer(&x).unwrap();
    z.fill(1.0).unwrap();
    assert_eq!(z.to_vec().unwrap(), vec![1.0; 1000]);
    assert!(!b_done.query().unwrap());
    assert_eq!(y.to_vec().unwrap(), vec![5.0; 1000]);
    b.synchronize().unwrap();
    assert!(b_done.query().unwrap());
}
