//! What embedding objects compressed costs at run time: per device here (the host, lavapipe,
//! Intel's CPU runtime for OpenCL; any GPU elsewhere), the time to decompress the object each of
//! the sample's modules selects (what its first launch adds: an object is decompressed once, when
//! a device first loads it) beside the first launch of `vadd` on a fresh device after that
//! (module load, pipeline, run), in one run, and the ratio.
//!
//!     cargo bench -p sample-project --bench first_launch

use gpu_embed::{Device, DeviceBuffer, LaunchConfig};
use sample_project::vadd;
use std::time::{Duration, Instant};

const N: usize = 1 << 16;

fn main() {
    println!(
        "{:<44} {:>16} {:>18} {:>8}",
        "device", "decompress all", "first vadd launch", "ratio"
    );
    for device in Device::all() {
        let arch = device.arch();
        // Each module's object for this device, decompressed now (the first `bytes()` of an
        // embedded object): what the first launches of its kernels add.
        let mut decompress = Duration::ZERO;
        let mut objects = 0;
        for binary in sample_project::BINARIES {
            if let Ok(object) = gpu_embed::select(binary, &arch) {
                let start = Instant::now();
                let bytes = object.bytes();
                decompress += start.elapsed();
                objects += usize::from(!bytes.is_empty());
            }
        }
        let a = DeviceBuffer::from_slice(&device, &vec![1.0f32; N]).unwrap();
        let b = DeviceBuffer::from_slice(&device, &vec![2.0f32; N]).unwrap();
        let c = DeviceBuffer::<f32>::alloc(&device, N).unwrap();
        let config = LaunchConfig::for_elements(N, 256);
        let start = Instant::now();
        // SAFETY: vadd reads a and b and writes c, all N elements long.
        unsafe { vadd::vadd(&device, &config, &a, &b, &c, N) }.unwrap();
        device.synchronize().unwrap();
        let first = start.elapsed();
        println!(
            "{:<44} {:>10.1} µs ({objects}) {:>15.2} ms {:>7.1}%",
            device.name(),
            decompress.as_secs_f64() * 1e6,
            first.as_secs_f64() * 1e3,
            100.0 * decompress.as_secs_f64() / first.as_secs_f64()
        );
    }
}
