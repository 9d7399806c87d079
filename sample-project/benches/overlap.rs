//! Copies overlapped with kernels: vector add over 2^24 elements in 8 chunks, each chunk copied
//! in from page-locked memory, added, and copied back. Overlapped, chunk i runs on stream i % 2,
//! so one chunk's copies can run while the other stream's kernel does; serialised, every step
//! is on one stream. Same work, same buffers, in one run, on the first GPU and on the host.
//!
//! A second row: a loop that, per iteration and on two streams in turn, allocates a temporary
//! on its stream (`DeviceBuffer::alloc_on`), adds into it and drops it — against the same loop
//! where each drop waits for the whole device (what every drop did before buffers tracked their
//! own work).
//!
//!     cargo bench -p sample-project --bench overlap

use gpu_embed::{Device, DeviceBuffer, LaunchConfig, PinnedBuffer, Stream};
use sample_project::vadd;
use std::time::{Duration, Instant};

const N: usize = 1 << 24;
const CHUNKS: usize = 8;
const CHUNK: usize = N / CHUNKS;
const ROUNDS: usize = 10;

struct Chunk {
    a: PinnedBuffer<f32>,
    b: PinnedBuffer<f32>,
    c: PinnedBuffer<f32>,
    da: DeviceBuffer<f32>,
    db: DeviceBuffer<f32>,
    dc: DeviceBuffer<f32>,
}

fn chunks(device: &Device) -> gpu_embed::Result<Vec<Chunk>> {
    (0..CHUNKS)
        .map(|i| {
            let a: Vec<f32> = (0..CHUNK).map(|j| (i * CHUNK + j) as f32).collect();
            let b: Vec<f32> = (0..CHUNK).map(|j| j as f32 * 0.5).collect();
            Ok(Chunk {
                a: PinnedBuffer::from_slice(device, &a)?,
                b: PinnedBuffer::from_slice(device, &b)?,
                c: PinnedBuffer::alloc(device, CHUNK)?,
                da: DeviceBuffer::alloc(device, CHUNK)?,
                db: DeviceBuffer::alloc(device, CHUNK)?,
                dc: DeviceBuffer::alloc(device, CHUNK)?,
            })
        })
        .collect()
}

/// Every chunk: in, add, out, on `streams[i % streams.len()]`; then waits for all.
fn run(streams: &[Stream], chunks: &mut [Chunk]) -> gpu_embed::Result<()> {
    for (i, chunk) in chunks.iter_mut().enumerate() {
        let stream = &streams[i % streams.len()];
        stream.copy_pinned_to_device(&chunk.da, &chunk.a)?;
        stream.copy_pinned_to_device(&chunk.db, &chunk.b)?;
        let config = LaunchConfig::for_elements(CHUNK, 256);
        // SAFETY: vadd reads da, db and writes dc, CHUNK elements each.
        unsafe { vadd::vadd(stream, &config, &chunk.da, &chunk.db, &chunk.dc, CHUNK) }?;
        stream.copy_device_to_pinned(&mut chunk.c, &chunk.dc)?;
    }
    streams.iter().try_for_each(Stream::synchronize)
}

const TEMPORARIES: usize = 64;
const TEMPORARY: usize = 1 << 16;

/// `TEMPORARIES` iterations over two streams: a temporary allocated on the stream, `x + x` into
/// it, the temporary dropped (after a device-wide synchronization when `device_wide`).
fn temporaries(
    device: &Device,
    streams: &[Stream; 2],
    x: &DeviceBuffer<f32>,
    device_wide: bool,
) -> gpu_embed::Result<()> {
    for i in 0..TEMPORARIES {
        let stream = &streams[i % 2];
        let temporary = DeviceBuffer::<f32>::alloc_on(stream, TEMPORARY)?;
        let config = LaunchConfig::for_elements(TEMPORARY, 256);
        // SAFETY: vadd reads x twice and writes the temporary, TEMPORARY elements each.
        unsafe { vadd::vadd(stream, &config, x, x, &temporary, TEMPORARY) }?;
        if device_wide {
            device.synchronize()?;
        }
        drop(temporary);
    }
    streams.iter().try_for_each(Stream::synchronize)
}

fn measure_temporaries(device: &Device) -> gpu_embed::Result<()> {
    let streams = [device.create_stream()?, device.create_stream()?];
    let x = DeviceBuffer::from_slice(device, &vec![1.5f32; TEMPORARY])?;
    temporaries(device, &streams, &x, false)?;
    temporaries(device, &streams, &x, true)?;
    let (mut tracked, mut device_wide) = (Duration::MAX, Duration::MAX);
    for _ in 0..ROUNDS {
        tracked = tracked.min(timed(|| temporaries(device, &streams, &x, false))?);
        device_wide = device_wide.min(timed(|| temporaries(device, &streams, &x, true))?);
    }
    println!(
        "{:<40} drop waits for the device {:>7.2} ms   for its own work {:>7.2} ms   ratio {:>5.2}x",
        device.name(),
        device_wide.as_secs_f64() * 1e3,
        tracked.as_secs_f64() * 1e3,
        tracked.as_secs_f64() / device_wide.as_secs_f64()
    );
    Ok(())
}

fn timed(round: impl FnOnce() -> gpu_embed::Result<()>) -> gpu_embed::Result<Duration> {
    let start = Instant::now();
    round()?;
    Ok(start.elapsed())
}

fn measure(device: &Device) -> gpu_embed::Result<()> {
    let mut chunks = chunks(device)?;
    let one = [device.create_stream()?];
    let two = [device.create_stream()?, device.create_stream()?];
    // Warm-up, then the two alternate, so drift in the machine's speed hits both alike.
    run(&one, &mut chunks)?;
    run(&two, &mut chunks)?;
    let (mut serial, mut overlapped) = (Duration::MAX, Duration::MAX);
    for _ in 0..ROUNDS {
        serial = serial.min(timed(|| run(&one, &mut chunks))?);
        overlapped = overlapped.min(timed(|| run(&two, &mut chunks))?);
    }
    for (i, chunk) in chunks.iter().enumerate() {
        let (a, b, c) = (
            chunk.a.as_slice()?,
            chunk.b.as_slice()?,
            chunk.c.as_slice()?,
        );
        for j in 0..CHUNK {
            assert_eq!(c[j], a[j] + b[j], "chunk {i}, element {j}");
        }
    }
    println!(
        "{:<40} serialised {:>9.2} ms   overlapped {:>9.2} ms   ratio {:>5.2}x",
        device.name(),
        serial.as_secs_f64() * 1e3,
        overlapped.as_secs_f64() * 1e3,
        overlapped.as_secs_f64() / serial.as_secs_f64()
    );
    Ok(())
}

fn main() {
    println!(
        "vadd over 2^24 f32 in {CHUNKS} chunks, copies in and out of page-locked memory (best of {ROUNDS}, alternating)"
    );
    let gpu = Device::default_gpu();
    match &gpu {
        Ok(gpu) => measure(gpu).unwrap(),
        Err(error) => println!("no GPU ({error})"),
    }
    measure(&Device::host()).unwrap();
    println!(
        "{TEMPORARIES} temporaries of 2^16 f32 on two streams, each allocated on its stream, \
         added into and dropped (best of {ROUNDS}, alternating)"
    );
    if let Ok(gpu) = &gpu {
        measure_temporaries(gpu).unwrap();
    }
    measure_temporaries(&Device::host()).unwrap();
    // A real driver everywhere: lavapipe where there is no GPU.
    for vulkan in Device::all()
        .into_iter()
        .filter(|d| d.vendor() == gpu_embed::Vendor::Vulkan)
    {
        measure_temporaries(&vulkan).unwrap();
    }
}
