//! A user's program written from gpu-embed's documentation alone, trying from safe code, on the
//! host device, each way a review found to corrupt memory or crash through the safe API. Built
//! in release (where integer overflow wraps instead of panicking) and run under valgrind by
//! `tests/tests/compile/safe_api_probes.rs`. Each probe prints `<name>: <outcome>`; any crash, panic or
//! invalid access fails the run.

use gpu_embed::{Device, DeviceBuffer, PinnedBuffer, Pod};

const N: usize = 1 << 16;

#[repr(C, align(512))]
#[derive(Clone, Copy)]
struct Aligned512([u8; 512]);
// SAFETY: 512 plain bytes, no padding.
unsafe impl bytemuck::Zeroable for Aligned512 {}
// SAFETY: as above.
unsafe impl Pod for Aligned512 {}

fn report<T: std::fmt::Debug>(probe: &str, outcome: gpu_embed::Result<T>) {
    match outcome {
        Ok(value) => println!("{probe}: ok {value:?}"),
        Err(error) => println!("{probe}: error {:?}: {error}", error.kind()),
    }
}

fn main() {
    let host = Device::host();
    let stream = host.create_stream().unwrap();

    // A registration leaked inside its scope (swapped out and forgotten), then the memory freed
    // and reused: the queued copy must have run before the scope ended, and never later.
    let source = DeviceBuffer::from_slice(&host, &vec![7u32; N]).unwrap();
    let mut mine = vec![0u32; N];
    let scoped = host.with_registered(&mut mine, |pinned| {
        stream.copy_device_to_pinned(pinned, &source).unwrap();
        let mut other = PinnedBuffer::<u32>::alloc(&host, N).unwrap();
        std::mem::swap(pinned, &mut other);
        std::mem::forget(other);
    });
    assert!(mine.iter().all(|&x| x == 7));
    drop(mine);
    let reused = vec![0u32; N];
    stream.synchronize().unwrap();
    assert!(reused.iter().all(|&x| x == 0));
    report("leaked registration", scoped);

    report("alloc usize::MAX bytes", DeviceBuffer::<u8>::alloc(&host, usize::MAX).map(|b| b.len()));
    report("alloc usize::MAX - 255 bytes", DeviceBuffer::<u8>::alloc(&host, usize::MAX - 255).map(|b| b.len()));
    report("pinned usize::MAX bytes", PinnedBuffer::<u8>::alloc(&host, usize::MAX).map(|b| b.len()));

    for _ in 0..8 {
        let aligned = PinnedBuffer::<Aligned512>::alloc(&host, 3).and_then(|buffer| {
            let slice = buffer.as_slice()?;
            assert!(slice.as_ptr().is_aligned());
            Ok(slice.len())
        });
        report("pinned 512-aligned type", aligned);
    }

    let mut units = DeviceBuffer::<()>::alloc(&host, 5).unwrap();
    report("fill zero-sized elements", units.fill(()));
    report("stream fill zero-sized elements", stream.fill(&units, ()));

    let buffer = DeviceBuffer::from_slice(&host, &(0..16).collect::<Vec<u32>>()).unwrap();
    report("empty view past the end", buffer.strided_view(usize::MAX, [0], [1]).map(|v| v.sizes()));
    let overlapping = buffer
        .slice(0..8)
        .and_then(|target| stream.copy(&target, &buffer.slice(4..12)?));
    report("overlapping device copy", overlapping);

    let mut back = PinnedBuffer::<u32>::alloc(&host, 16).unwrap();
    stream.copy_device_to_pinned(&mut back, &buffer).unwrap();
    let leaked = std::mem::ManuallyDrop::new(back);
    report("leaked page-locked buffer", stream.synchronize());
    report("read after leak", leaked.as_slice().map(|s| s[15]));
}
