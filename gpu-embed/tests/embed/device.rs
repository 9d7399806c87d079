//! Device facts, fills and slices: on the host backend and on the first Vulkan device (lavapipe
//! where there is no GPU, under the validation layer) in every test run, and on the first GPU
//! with `--ignored` (`scripts/gpu-tests.sh`).

use gpu_embed::{f16, Device, DeviceBuffer, ErrorKind};

/// This binary's host-device tests again, under valgrind's memcheck: no invalid access.
#[test]
fn memcheck() {
    crate::common::memcheck_module(module_path!());
}

macro_rules! on_every_device {
    ($($check:ident),*) => {
        $(mod $check {
            #[test]
            fn host() {
                super::$check(&gpu_embed::Device::host());
            }

            #[test]
            fn vulkan() {
                crate::common::on_vulkan(super::$check);
            }

            #[test]
            #[ignore = "needs a GPU; run scripts/gpu-tests.sh on a GPU machine"]
            fn gpu() {
                super::$check(&gpu_embed::Device::default_gpu().expect("a GPU"));
            }
        })*
    };
}

on_every_device!(
    facts_are_plausible,
    fills_write_every_pattern,
    slices_are_bounds_checked
);

fn facts_are_plausible(device: &Device) {
    let limits = device.limits();
    assert!(limits.multiprocessors >= 1, "{limits:?}");
    if device.vendor() == gpu_embed::Vendor::Vulkan {
        // The subgroup size: 8 on lavapipe, 4 to 128 on GPUs.
        assert!(
            limits.warp_size.is_power_of_two() && limits.warp_size <= 128,
            "{limits:?}"
        );
    } else {
        assert!([1, 32, 64].contains(&limits.warp_size), "{limits:?}");
    }
    assert!(limits.max_threads_per_block >= 256, "{limits:?}");
    assert!(limits.max_block.iter().all(|&d| d >= 1), "{limits:?}");
    assert!(limits.max_grid[0] >= 65535, "{limits:?}");
    assert!(limits.shared_memory_per_block >= 16 * 1024, "{limits:?}");
    let memory = device.memory().unwrap();
    assert!(
        memory.total > 0 && memory.free <= memory.total,
        "{memory:?}"
    );
    assert_eq!(memory.total, limits.total_memory);
}

fn fills_write_every_pattern(device: &Device) {
    let mut bytes = DeviceBuffer::<u8>::alloc(device, 1001).unwrap();
    bytes.fill(0xa5).unwrap();
    assert!(bytes.to_vec().unwrap().iter().all(|&b| b == 0xa5));
    let mut halves = DeviceBuffer::<f16>::alloc(device, 333).unwrap();
    halves.fill(f16::from_f32(-1.5)).unwrap();
    assert!(halves
        .to_vec()
        .unwrap()
        .iter()
        .all(|&h| h == f16::from_f32(-1.5)));
    let mut words = DeviceBuffer::<f32>::alloc(device, 257).unwrap();
    words.fill(3.25).unwrap();
    assert!(words.to_vec().unwrap().iter().all(|&w| w == 3.25));
    // 8-byte values: one repeated byte by memset, anything else by a copy.
    let mut longs = DeviceBuffer::<u64>::alloc(device, 100).unwrap();
    longs.fill(u64::MAX).unwrap();
    assert!(longs.to_vec().unwrap().iter().all(|&l| l == u64::MAX));
    longs.fill(0x0102_0304_0506_0708).unwrap();
    assert!(longs
        .to_vec()
        .unwrap()
        .iter()
        .all(|&l| l == 0x0102_0304_0506_0708));
    let mut empty = DeviceBuffer::<u32>::alloc(device, 0).unwrap();
    empty.fill(7).unwrap();
}

fn slices_are_bounds_checked(device: &Device) {
    let buffer = DeviceBuffer::from_slice(device, &[0i32; 10]).unwrap();
    let slice = buffer.slice(2..7).unwrap();
    assert_eq!(
        (slice.offset(), slice.sizes(), slice.strides()),
        (2, [5], [1])
    );
    assert!(buffer.slice(10..10).is_ok());
    for (start, end) in [(3, 11), (11, 11), (5, 4)] {
        let error = buffer.slice(start..end).unwrap_err();
        assert_eq!(error.kind(), ErrorKind::InvalidArgument);
        assert!(
            error.message().contains("of a buffer of 10 elements"),
            "{error}"
        );
    }
}

on_every_device!(copies_on_the_device, raw_parts_round_trip);

fn copies_on_the_device(device: &Device) {
    let source = DeviceBuffer::from_slice(device, &[1u32, 2, 3, 4]).unwrap();
    let mut target = DeviceBuffer::<u32>::alloc(device, 4).unwrap();
    target.copy_from_buffer(&source).unwrap();
    assert_eq!(target.to_vec().unwrap(), [1, 2, 3, 4]);
    let short = DeviceBuffer::<u32>::alloc(device, 3).unwrap();
    assert!(target.copy_from_buffer(&short).is_err());
    if !device.is_same(&Device::host()) {
        let elsewhere = DeviceBuffer::from_slice(&Device::host(), &[0u32; 4]).unwrap();
        assert!(target.copy_from_buffer(&elsewhere).is_err());
    }
}

fn raw_parts_round_trip(device: &Device) {
    let buffer = DeviceBuffer::from_slice(device, &[5i16, 6, 7]).unwrap();
    let raw = buffer.into_raw();
    // SAFETY: the allocation `into_raw` gave up, of this device, with 3 initialized elements.
    let adopted = unsafe { DeviceBuffer::<i16>::from_raw_parts(device, raw, 3) };
    assert_eq!(adopted.device_ptr(), raw);
    assert_eq!(adopted.to_vec().unwrap(), [5, 6, 7]);
}

on_every_device!(events_time_work_in_order, streams_record_and_wait);

fn events_time_work_in_order(device: &Device) {
    let events: Vec<_> = (0..3).map(|_| device.create_event().unwrap()).collect();
    let mut big = DeviceBuffer::<u32>::alloc(device, 1 << 24).unwrap();
    device.record(&events[0]).unwrap();
    big.fill(1).unwrap();
    device.record(&events[1]).unwrap();
    for value in 2..5 {
        big.fill(value).unwrap();
    }
    device.record(&events[2]).unwrap();
    events[2].synchronize().unwrap();
    assert!(events.iter().all(|e| e.query().unwrap()));
    let first = events[0].elapsed_ms(&events[1]).unwrap();
    let both = events[0].elapsed_ms(&events[2]).unwrap();
    assert!(first > 0.0, "{first} ms");
    assert!(both >= first, "{both} ms < {first} ms");
    assert!(events[0].elapsed(&events[2]).unwrap().as_secs_f32() * 1e3 >= first);
    let error = events[2].elapsed(&events[0]).unwrap_err();
    assert!(error.message().contains("before the start"), "{error}");
}

fn streams_record_and_wait(device: &Device) {
    let (first, second) = (
        device.create_stream().unwrap(),
        device.create_stream().unwrap(),
    );
    let event = device.create_event().unwrap();
    first.record(&event).unwrap();
    second.wait(&event).unwrap();
    second.synchronize().unwrap();
    event.synchronize().unwrap();
    assert!(event.query().unwrap());
    let never = device.create_event().unwrap();
    assert!(
        never.query().unwrap(),
        "an event never recorded counts as complete"
    );
}
