//! Managed memory (one address for the host and the device) and copies between devices: on the
//! host device, lavapipe and Intel's CPU runtime for OpenCL here, on GPUs where present (ignored
//! otherwise).

use gpu_embed::{Device, DeviceBuffer, ErrorKind, LaunchConfig};
use gpu_tests::vk;

/// x *= factor on `device`'s default stream.
fn scale(device: &Device, x: &DeviceBuffer<f32>, factor: f32) {
    let config = LaunchConfig::for_elements(x.len(), 128);
    // SAFETY: the kernel updates x[i] for i < len; x holds len elements.
    unsafe { vk::scale(device, &config, x, factor, x.len()) }.unwrap();
}

/// Managed memory written on the host, scaled by a kernel, read back on the host, no copy.
fn managed_round_trip(device: &Device) {
    let n = 1000;
    let mut x = DeviceBuffer::<f32>::alloc_managed(device, n).unwrap();
    {
        let mut host = x.host_slice().unwrap();
        assert!(
            host.iter().all(|&v| v == 0.0),
            "managed memory starts zeroed"
        );
        for (i, v) in host.iter_mut().enumerate() {
            *v = i as f32;
        }
    }
    scale(device, &x, 2.0);
    // The slice waits for the kernel.
    let host = x.host_slice().unwrap();
    let want: Vec<f32> = (0..n).map(|i| 2.0 * i as f32).collect();
    assert_eq!(&host[..], &want[..], "on {}", device.name());
    drop(host);
    assert_eq!(x.to_vec().unwrap(), want);
}

#[test]
fn managed_memory_is_shared_by_the_host_and_kernels_on_the_host_device() {
    managed_round_trip(&Device::host());
    let mut empty = DeviceBuffer::<u64>::alloc_managed(&Device::host(), 0).unwrap();
    assert!(empty.host_slice().unwrap().is_empty());
}

/// On OpenCL devices managed memory is fine-grained buffer SVM (Intel's CPU runtime has it);
/// a device without it says so.
#[test]
fn managed_memory_is_shared_by_the_host_and_kernels_on_opencl() {
    for device in gpu_tests::opencl_devices() {
        // Intel's CPU runtime has fine-grained (even system) SVM.
        assert!(
            device.limits().managed_memory || !device.name().contains("Intel(R) OpenCL"),
            "{} has no managed memory",
            device.name()
        );
        if device.limits().managed_memory {
            managed_round_trip(&device);
        } else {
            let error = DeviceBuffer::<f32>::alloc_managed(&device, 4).unwrap_err();
            assert_eq!(error.kind(), ErrorKind::NotSupported, "{error}");
        }
    }
}

#[test]
fn only_managed_memory_has_a_host_slice() {
    let host = Device::host();
    let mut plain = DeviceBuffer::<f32>::alloc(&host, 4).unwrap();
    let error = plain.host_slice().unwrap_err();
    assert_eq!(error.kind(), ErrorKind::InvalidArgument);
    assert!(error.to_string().contains("alloc_managed"), "{error}");
    for device in gpu_tests::vulkan_devices() {
        assert!(!device.limits().managed_memory);
        let error = DeviceBuffer::<f32>::alloc_managed(&device, 4).unwrap_err();
        assert_eq!(error.kind(), ErrorKind::NotSupported, "{error}");
        assert!(error.to_string().contains("no managed memory"), "{error}");
    }
}

/// A graph cannot replay work on a managed buffer while the host holds its slice, nor after
/// that slice was leaked.
#[test]
fn graphs_do_not_replay_under_a_host_slice() {
    let host = Device::host();
    let stream = host.create_stream().unwrap();
    let mut x = DeviceBuffer::<f32>::alloc_managed(&host, 256).unwrap();
    stream.begin_capture().unwrap();
    let config = LaunchConfig::for_elements(256, 128);
    // SAFETY: as in `scale`.
    unsafe { vk::scale(&stream, &config, &x, 3.0, 256) }.unwrap();
    let graph = stream.end_capture().unwrap();
    x.host_slice().unwrap().fill(1.0);
    // SAFETY: the captured launch's contract holds; the slice above is gone.
    unsafe { graph.launch(&stream) }.unwrap();
    let slice = x.host_slice().unwrap();
    assert!(slice.iter().all(|&v| v == 3.0));
    // SAFETY: refused before anything is queued.
    let error = unsafe { graph.launch(&stream) }.unwrap_err();
    assert!(
        error.to_string().contains("borrowed on the host"),
        "{error}"
    );
    std::mem::forget(slice);
    // SAFETY: as above.
    assert!(unsafe { graph.launch(&stream) }.is_err());
    // The buffer itself is still usable and freed normally.
    assert!(x.to_vec().unwrap().iter().all(|&v| v == 3.0));
}

/// Copies between devices of different drivers go through the host, in both directions, for
/// whole buffers and slices.
#[test]
fn copies_between_the_host_device_and_vulkan_devices() {
    let host = Device::host();
    let host_stream = host.create_stream().unwrap();
    let data: Vec<u32> = (0..4096).collect();
    let on_host = DeviceBuffer::from_slice(&host, &data).unwrap();
    for device in gpu_tests::vulkan_devices() {
        let stream = device.create_stream().unwrap();
        let there = DeviceBuffer::<u32>::alloc(&device, 4096).unwrap();
        stream.copy_from_peer(&there, &on_host).unwrap();
        assert_eq!(there.to_vec().unwrap(), data);
        let back = DeviceBuffer::<u32>::alloc(&host, 1000).unwrap();
        host_stream
            .copy_from_peer(&back, &there.slice(96..1096).unwrap())
            .unwrap();
        assert_eq!(back.to_vec().unwrap(), data[96..1096]);
        let error = stream.copy_from_peer(&there, &there).unwrap_err();
        assert!(error.to_string().contains("use Stream::copy"), "{error}");
        let error = stream.copy_from_peer(&back, &on_host).unwrap_err();
        assert!(error.to_string().contains("the stream on"), "{error}");
        stream.begin_capture().unwrap();
        let error = stream.copy_from_peer(&there, &on_host).unwrap_err();
        assert!(error.to_string().contains("cannot be captured"), "{error}");
        assert!(stream.end_capture().unwrap().is_empty());
        let error = device.enable_peer_access(&host).unwrap_err();
        assert_eq!(error.kind(), ErrorKind::NotSupported, "{error}");
    }
    let error = host.enable_peer_access(&host).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::InvalidArgument, "{error}");
    assert!(gpu_embed::take_vulkan_validation_messages().is_empty());
}

#[test]
#[ignore = "needs a GPU; run scripts/gpu-tests.sh on a GPU machine"]
fn managed_memory_on_a_gpu() {
    let device = Device::default_gpu().expect("a GPU");
    if !device.limits().managed_memory {
        eprintln!(
            "skipped: {} has no concurrent managed access",
            device.name()
        );
        return;
    }
    managed_round_trip(&device);
}

/// Two GPUs of one driver: a queued peer copy; with one GPU, a copy from it to the host device
/// (through host memory).
#[test]
#[ignore = "needs a GPU; run scripts/gpu-tests.sh on a GPU machine"]
fn copies_between_gpus() {
    let gpus = Device::gpus().expect("a GPU");
    let first = gpus.first().expect("a GPU").clone();
    let data: Vec<f32> = (0..1 << 20).map(|i| i as f32).collect();
    let source = DeviceBuffer::from_slice(&first, &data).unwrap();
    let peer = gpus
        .iter()
        .find(|d| !d.is_same(&first) && d.vendor() == first.vendor())
        .cloned();
    let target_device = match &peer {
        Some(peer) => {
            // Access is optional for copies; where the GPUs reach each other it makes them direct.
            if let Err(e) = peer.enable_peer_access(&first) {
                eprintln!("no peer access ({e}); the copy goes through the host");
            }
            peer.clone()
        }
        None => {
            eprintln!(
                "one {} GPU: copying to the host device instead",
                first.vendor()
            );
            Device::host()
        }
    };
    let stream = target_device.create_stream().unwrap();
    let target = DeviceBuffer::<f32>::alloc(&target_device, data.len()).unwrap();
    stream.copy_from_peer(&target, &source).unwrap();
    // The source may be dropped at once: its drop waits for the copy.
    drop(source);
    assert_eq!(target.to_vec().unwrap(), data);
}
