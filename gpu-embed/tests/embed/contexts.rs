//! Another library's CUDA context stays current on its thread across gpu-embed's calls (each
//! call makes the device's primary context current and puts back what was there; a thread with
//! no context keeps the primary one, as the CUDA runtime and cudarc leave it). Needs an NVIDIA
//! GPU: `cargo test -p gpu-embed --test embed contexts:: -- --ignored` (`scripts/gpu-tests.sh`).

use gpu_embed::sys::cuda::{CudaDriver, CUDA_SUCCESS};
use gpu_embed::{Device, DeviceBuffer, Vendor};

#[test]
#[ignore = "needs an NVIDIA GPU; run scripts/gpu-tests.sh on a GPU machine"]
fn another_librarys_current_context_stays_current() {
    let device = Device::gpus()
        .expect("a GPU driver")
        .into_iter()
        .find(|d| d.vendor() == Vendor::Nvptx)
        .expect("an NVIDIA GPU");
    // SAFETY: the CUDA driver API through the bindings generated from cuda.h, as another
    // library on this thread would use it: its own context, made current, destroyed at the end.
    unsafe {
        let cuda = CudaDriver::new("libcuda.so.1").unwrap();
        let mut ordinal = 0;
        assert_eq!((cuda.cuDeviceGet)(&mut ordinal, 0), CUDA_SUCCESS);
        let mut theirs = std::ptr::null_mut();
        assert_eq!((cuda.cuCtxCreate_v2)(&mut theirs, 0, ordinal), CUDA_SUCCESS);
        let current = || {
            let mut context = std::ptr::null_mut();
            assert_eq!((cuda.cuCtxGetCurrent)(&mut context), CUDA_SUCCESS);
            context
        };
        assert_eq!(current(), theirs);
        // Allocation, copies, a stream, an event, a free: each puts their context back.
        let buffer = DeviceBuffer::from_slice(&device, &[1.0f32; 256]).unwrap();
        assert_eq!(current(), theirs);
        let stream = device.create_stream().unwrap();
        stream.fill(&buffer, 2.0).unwrap();
        let event = device.create_event().unwrap();
        stream.record(&event).unwrap();
        event.synchronize().unwrap();
        assert_eq!(buffer.to_vec().unwrap(), vec![2.0; 256]);
        drop(buffer);
        assert_eq!(current(), theirs);
        // No context current: the device's primary context after gpu-embed's calls, which the
        // next calls find current (nothing to put back).
        assert_eq!((cuda.cuCtxSetCurrent)(std::ptr::null_mut()), CUDA_SUCCESS);
        device.synchronize().unwrap();
        let primary = current();
        assert!(!primary.is_null() && primary != theirs);
        device.synchronize().unwrap();
        assert_eq!(current(), primary);
        assert_eq!((cuda.cuCtxDestroy_v2)(theirs), CUDA_SUCCESS);
    }
}
