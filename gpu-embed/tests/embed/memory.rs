//! Device memory on the host backend, which follows the same rules as the GPU backends.

use gpu_embed::{Device, DeviceBuffer};

/// This binary's host-device tests again, under valgrind's memcheck: no invalid access.
#[test]
fn memcheck() {
    crate::common::memcheck_module(module_path!());
}

#[test]
fn a_safe_allocation_starts_zeroed() {
    let host = Device::host();
    // Memory a freed buffer filled is likely to come back.
    for _ in 0..4 {
        drop(DeviceBuffer::from_slice(&host, &[f32::NAN; 4096]).unwrap());
        let fresh = DeviceBuffer::<f32>::alloc(&host, 4096).unwrap();
        assert!(fresh.to_vec().unwrap().iter().all(|&x| x == 0.0));
    }
    let empty = DeviceBuffer::<u8>::alloc(&host, 0).unwrap();
    assert!(empty.to_vec().unwrap().is_empty());
}

#[test]
fn copies_check_lengths() {
    let host = Device::host();
    let mut buffer = DeviceBuffer::from_slice(&host, &[1u16, 2, 3]).unwrap();
    assert!(buffer.copy_from(&[1, 2]).is_err());
    let mut out = [0u16; 4];
    assert!(buffer.copy_to(&mut out).is_err());
    buffer.copy_from(&[4, 5, 6]).unwrap();
    assert_eq!(buffer.to_vec().unwrap(), [4, 5, 6]);
}
