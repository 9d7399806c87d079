//! Graphs: launches, device copies and fills captured on a stream and replayed, with the same
//! results as the direct calls, on the host, on every Vulkan device (lavapipe here), every
//! OpenCL device (Intel's CPU runtime here) and on an NVIDIA GPU (the driver's own graph; ignored without one); a replay
//! after a buffer it uses was dropped is an error; tracking holds across replays.

use gpu_embed::{Device, DeviceBuffer, ErrorKind, Graph, LaunchConfig, Stream};
use gpu_tests::vk;

const N: usize = 1000;

/// x *= 2; y = x; x += 0 (a fill of z with 1.5); x *= 3 — as direct calls or into a capture.
fn work(
    stream: &Stream,
    x: &DeviceBuffer<f32>,
    y: &DeviceBuffer<f32>,
    z: &DeviceBuffer<f32>,
) -> gpu_embed::Result<()> {
    let config = LaunchConfig::for_elements(N, 128);
    // SAFETY: the kernel updates x[i] for i < N; x holds N elements.
    unsafe { vk::scale(stream, &config, x, 2.0, N)? };
    stream.copy(y, x)?;
    stream.fill(z, 1.5)?;
    // SAFETY: as above.
    unsafe { vk::scale(stream, &config, x, 3.0, N)? };
    Ok(())
}

fn check_graph_on(device: &Device) {
    let stream = device.create_stream().unwrap();
    let start: Vec<f32> = (0..N).map(|i| i as f32).collect();
    // Direct calls.
    let (x, y, z) = (
        DeviceBuffer::from_slice(device, &start).unwrap(),
        DeviceBuffer::<f32>::alloc(device, N).unwrap(),
        DeviceBuffer::<f32>::alloc(device, N).unwrap(),
    );
    work(&stream, &x, &y, &z).unwrap();
    work(&stream, &x, &y, &z).unwrap();
    let direct = (
        x.to_vec().unwrap(),
        y.to_vec().unwrap(),
        z.to_vec().unwrap(),
    );
    // Captured once, replayed twice.
    let (gx, gy, gz) = (
        DeviceBuffer::from_slice(device, &start).unwrap(),
        DeviceBuffer::<f32>::alloc(device, N).unwrap(),
        DeviceBuffer::<f32>::alloc(device, N).unwrap(),
    );
    stream.begin_capture().unwrap();
    work(&stream, &gx, &gy, &gz).unwrap();
    let graph: Graph = stream.end_capture().unwrap();
    assert_eq!(graph.len(), 4);
    // Capturing ran nothing.
    assert_eq!(gx.to_vec().unwrap(), start);
    let other = device.create_stream().unwrap();
    // SAFETY: the captured launches' contracts hold (their buffers are the same, alive).
    unsafe { graph.launch(&stream).unwrap() };
    // A replay on another stream: ordered after the first by the buffers' tracking.
    // SAFETY: as above.
    unsafe { graph.launch(&other).unwrap() };
    let replayed = (
        gx.to_vec().unwrap(),
        gy.to_vec().unwrap(),
        gz.to_vec().unwrap(),
    );
    assert_eq!(replayed, direct, "on {}", device.name());
    // A copy with host memory cannot be captured.
    stream.begin_capture().unwrap();
    let error = stream.copy_to_device(&gx, &start).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::InvalidArgument);
    assert!(error.to_string().contains("cannot be captured"), "{error}");
    assert!(stream.end_capture().unwrap().is_empty());
    // A buffer the graph uses dropped: the replay is refused, nothing queued.
    drop(gz);
    // SAFETY: refused before anything is queued.
    let error = unsafe { graph.launch(&stream) }.unwrap_err();
    assert!(error.to_string().contains("was dropped"), "{error}");
    assert_eq!(gx.to_vec().unwrap(), direct.0);
}

#[test]
fn a_captured_graph_replays_like_the_direct_calls_on_the_host() {
    check_graph_on(&Device::host());
}

#[test]
fn a_captured_graph_replays_like_the_direct_calls_on_vulkan() {
    for device in gpu_tests::vulkan_devices() {
        check_graph_on(&device);
        assert!(gpu_embed::take_vulkan_validation_messages().is_empty());
    }
}

/// OpenCL has no graphs of its own: the runtime replays the captured work on the stream.
#[test]
fn a_captured_graph_replays_like_the_direct_calls_on_opencl() {
    for device in gpu_tests::opencl_devices() {
        check_graph_on(&device);
    }
}

/// On CUDA the graph is the driver's own (`cuGraphInstantiate`, one `cuGraphLaunch` per replay):
/// the same results, the same refusal after a drop.
#[test]
#[ignore = "needs a GPU; run scripts/gpu-tests.sh on a GPU machine"]
fn a_captured_graph_replays_like_the_direct_calls_on_a_gpu() {
    let device = Device::default_gpu().expect("a GPU");
    check_graph_on(&device);
}

#[test]
fn capture_is_per_stream_and_ends_once() {
    let host = Device::host();
    let stream = host.create_stream().unwrap();
    assert!(stream.end_capture().is_err());
    stream.begin_capture().unwrap();
    assert!(stream.begin_capture().is_err());
    // Another stream runs its work as usual.
    let other = host.create_stream().unwrap();
    let x = DeviceBuffer::<u32>::alloc(&host, 8).unwrap();
    other.fill(&x, 9).unwrap();
    assert_eq!(x.to_vec().unwrap(), vec![9; 8]);
    assert!(stream.end_capture().unwrap().is_empty());
}
