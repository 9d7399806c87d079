//! Probes from a review of the safe API, on the host device: each tried what safe code must not
//! be able to do (write into freed memory, overflow a size, misalign a reference, panic on an
//! odd type, copy between overlapping ranges). Each runs in a child process, so a crash is a
//! failed probe; `memcheck` runs them all again under valgrind's memcheck.

use crate::common::in_own_process;
use gpu_embed::{Device, DeviceBuffer, ErrorKind, PinnedBuffer, Pod};

#[test]
fn memcheck() {
    crate::common::memcheck_module(module_path!());
}

const N: usize = 1 << 16;

/// The review's leaked registration, in its scoped form: the slice handed to the closure is
/// swapped for another and the original leaked, then the program frees its memory and
/// allocates again. The queued copy has run into the program's memory before
/// `with_registered` returned, and never writes anywhere after.
#[test]
fn a_leaked_registration_cannot_outlive_its_scope() {
    if !in_own_process(
        module_path!(),
        "a_leaked_registration_cannot_outlive_its_scope",
        &[],
    ) {
        return;
    }
    let host = Device::host();
    let source = DeviceBuffer::from_slice(&host, &vec![7u32; N]).unwrap();
    let stream = host.create_stream().unwrap();
    let mut mine = vec![0u32; N];
    host.with_registered(&mut mine, |pinned| {
        stream.copy_device_to_pinned(pinned, &source).unwrap();
        let mut other = PinnedBuffer::<u32>::alloc(&host, N).unwrap();
        std::mem::swap(pinned, &mut other);
        std::mem::forget(other);
    })
    .unwrap();
    assert!(
        mine.iter().all(|&x| x == 7),
        "the copy ran before the scope ended"
    );
    drop(mine);
    let fresh = vec![0u32; N];
    stream.synchronize().unwrap();
    host.synchronize().unwrap();
    assert!(
        fresh.iter().all(|&x| x == 0),
        "nothing wrote into reused memory"
    );
}

/// A panic inside the scope still waits for the copies before the memory is the program's.
#[test]
fn a_panicking_registration_waits_for_its_copies() {
    if !in_own_process(
        module_path!(),
        "a_panicking_registration_waits_for_its_copies",
        &[],
    ) {
        return;
    }
    let host = Device::host();
    let source = DeviceBuffer::from_slice(&host, &vec![9u8; N]).unwrap();
    let stream = host.create_stream().unwrap();
    let mut mine = vec![0u8; N];
    let unwound = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        host.with_registered(&mut mine, |pinned| {
            stream.copy_device_to_pinned(pinned, &source).unwrap();
            panic!("the closure fails after queuing a copy");
        })
    }));
    assert!(unwound.is_err());
    assert!(mine.iter().all(|&x| x == 9));
}

#[test]
fn sizes_past_the_address_space_are_errors() {
    if !in_own_process(
        module_path!(),
        "sizes_past_the_address_space_are_errors",
        &[],
    ) {
        return;
    }
    let host = Device::host();
    for len in [usize::MAX, usize::MAX - 255, isize::MAX as usize] {
        let error = DeviceBuffer::<u8>::alloc(&host, len).unwrap_err();
        assert_eq!(error.kind(), ErrorKind::OutOfMemory, "{error}");
        let error = PinnedBuffer::<u8>::alloc(&host, len).unwrap_err();
        assert_eq!(error.kind(), ErrorKind::OutOfMemory, "{error}");
    }
    let error = DeviceBuffer::<u64>::alloc(&host, usize::MAX / 4).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::InvalidArgument, "{error}");
}

#[repr(C, align(512))]
#[derive(Clone, Copy)]
struct Aligned512([u8; 512]);
// SAFETY: plain bytes with no padding (512 bytes of size, 512 of alignment).
unsafe impl bytemuck::Zeroable for Aligned512 {}
// SAFETY: as above.
unsafe impl Pod for Aligned512 {}

/// The host's page-locked allocations are 256-byte aligned: a type that needs 512 gets an
/// aligned slice or an error, never a misaligned reference.
#[test]
fn page_locked_slices_are_aligned_for_their_type() {
    if !in_own_process(
        module_path!(),
        "page_locked_slices_are_aligned_for_their_type",
        &[],
    ) {
        return;
    }
    let host = Device::host();
    let (mut aligned, mut refused) = (0, 0);
    for _ in 0..16 {
        match PinnedBuffer::<Aligned512>::alloc(&host, 3) {
            Ok(buffer) => {
                let slice = buffer.as_slice().unwrap();
                assert!(slice.as_ptr().is_aligned());
                aligned += 1;
            }
            Err(error) => {
                assert_eq!(error.kind(), ErrorKind::InvalidArgument);
                assert!(error.message().contains("512-byte alignment"), "{error}");
                refused += 1;
            }
        }
    }
    println!("{aligned} aligned, {refused} refused");
}

#[test]
fn zero_sized_elements_fill_and_copy() {
    if !in_own_process(module_path!(), "zero_sized_elements_fill_and_copy", &[]) {
        return;
    }
    let host = Device::host();
    let mut units = DeviceBuffer::<()>::alloc(&host, 5).unwrap();
    units.fill(()).unwrap();
    assert_eq!(units.to_vec().unwrap(), vec![(); 5]);
    let stream = host.create_stream().unwrap();
    stream.fill(&units, ()).unwrap();
    let other = DeviceBuffer::<()>::alloc(&host, 5).unwrap();
    stream.copy(&other, &units).unwrap();
    stream.copy_to_device(&units, &[(); 5]).unwrap();
    stream.synchronize().unwrap();
    let mut pinned = PinnedBuffer::<()>::alloc(&host, 5).unwrap();
    stream.copy_device_to_pinned(&mut pinned, &units).unwrap();
    assert_eq!(pinned.as_slice().unwrap().len(), 5);
}

#[test]
fn empty_views_are_bounds_checked_too() {
    if !in_own_process(module_path!(), "empty_views_are_bounds_checked_too", &[]) {
        return;
    }
    let host = Device::host();
    let buffer = DeviceBuffer::<f32>::alloc(&host, 8).unwrap();
    let empty = DeviceBuffer::<f32>::alloc(&host, 0).unwrap();
    let stream = host.create_stream().unwrap();
    for offset in [9, usize::MAX / 4, usize::MAX] {
        let error = buffer.strided_view(offset, [0], [1]).unwrap_err();
        assert_eq!(error.kind(), ErrorKind::InvalidArgument, "{error}");
    }
    let error = buffer.strided_view(0, [0, usize::MAX], [1, 1]).unwrap_err();
    assert!(error.message().contains("does not fit"), "{error}");
    // The view at the end, without elements, is fine, and so is copying nothing through it.
    let end = buffer.strided_view(8, [0], [1]).unwrap();
    stream.copy(&end, &empty).unwrap();
    stream.synchronize().unwrap();
}

#[test]
fn overlapping_copies_on_the_device_are_refused() {
    if !in_own_process(
        module_path!(),
        "overlapping_copies_on_the_device_are_refused",
        &[],
    ) {
        return;
    }
    let host = Device::host();
    let data: Vec<u32> = (0..16).collect();
    let buffer = DeviceBuffer::from_slice(&host, &data).unwrap();
    let stream = host.create_stream().unwrap();
    let error = stream
        .copy(&buffer.slice(0..8).unwrap(), &buffer.slice(4..12).unwrap())
        .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::InvalidArgument);
    assert!(error.message().contains("overlap"), "{error}");
    // Disjoint parts of one buffer copy; a range onto itself is a no-op.
    stream
        .copy(&buffer.slice(0..8).unwrap(), &buffer.slice(8..16).unwrap())
        .unwrap();
    stream
        .copy(&buffer.slice(2..6).unwrap(), &buffer.slice(2..6).unwrap())
        .unwrap();
    stream.synchronize().unwrap();
    let expected: Vec<u32> = (8..16).chain(8..16).collect();
    assert_eq!(buffer.to_vec().unwrap(), expected);
}

/// Page-locked buffers that are dropped, leaked or read while copies are queued: every access
/// waits, a leak leaks.
#[test]
fn page_locked_buffers_wait_for_their_copies() {
    if !in_own_process(
        module_path!(),
        "page_locked_buffers_wait_for_their_copies",
        &[],
    ) {
        return;
    }
    let host = Device::host();
    let on_device = DeviceBuffer::from_slice(&host, &vec![3i32; N]).unwrap();
    let stream = host.create_stream().unwrap();
    let mut back = PinnedBuffer::<i32>::alloc(&host, N).unwrap();
    stream.copy_device_to_pinned(&mut back, &on_device).unwrap();
    assert!(back.as_slice().unwrap().iter().all(|&x| x == 3));
    let doomed = PinnedBuffer::from_slice(&host, &vec![5i32; N]).unwrap();
    stream.copy_pinned_to_device(&on_device, &doomed).unwrap();
    drop(doomed);
    let leaked = PinnedBuffer::<i32>::alloc(&host, N).unwrap();
    let mut leaked = std::mem::ManuallyDrop::new(leaked);
    stream
        .copy_device_to_pinned(&mut leaked, &on_device)
        .unwrap();
    stream.synchronize().unwrap();
    assert!(on_device.to_vec().unwrap().iter().all(|&x| x == 5));
}
