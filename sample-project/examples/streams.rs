//! README's streams program: inputs copied in on one stream, added on another after an event,
//! copied back, timed by events. Runs on the first GPU, else on the host:
//! `cargo run -p sample-project --example streams`.

use gpu_embed::{Device, DeviceBuffer, LaunchConfig, PinnedBuffer};
use sample_project::vadd;

fn main() -> gpu_embed::Result<()> {
    let device = Device::default_device();
    let n = 1 << 20;
    let a = PinnedBuffer::from_slice(&device, &vec![1.0f32; n])?;
    let b = PinnedBuffer::from_slice(&device, &vec![2.0f32; n])?;
    let mut c = PinnedBuffer::<f32>::alloc(&device, n)?;
    let (da, db, dc) = (
        DeviceBuffer::<f32>::alloc(&device, n)?,
        DeviceBuffer::<f32>::alloc(&device, n)?,
        DeviceBuffer::<f32>::alloc(&device, n)?,
    );
    let (copies, compute) = (device.create_stream()?, device.create_stream()?);
    let (inputs_ready, sum_ready, start) = (
        device.create_event()?,
        device.create_event()?,
        device.create_event()?,
    );

    copies.record(&start)?;
    copies.copy_pinned_to_device(&da, &a)?;
    copies.copy_pinned_to_device(&db, &b)?;
    copies.record(&inputs_ready)?;

    compute.wait(&inputs_ready)?;
    let config = LaunchConfig::for_elements(n, 256);
    // SAFETY: vadd reads da and db and writes dc, n elements each.
    unsafe { vadd::vadd(&compute, &config, &da, &db, &dc, n)? };
    compute.record(&sum_ready)?;

    copies.wait(&sum_ready)?;
    copies.copy_device_to_pinned(&mut c, &dc)?;
    copies.synchronize()?;
    assert!(c.as_slice()?.iter().all(|&v| v == 3.0));
    println!(
        "c[0] = {} on {}, in {:?}",
        c.as_slice()?[0],
        device.name(),
        start.elapsed(&sum_ready)?
    );
    Ok(())
}
