//! PoCL through `opencl3` (libOpenCL.so.1 loaded at run time): the benchmarks' OpenCL side (any
//! platform by name: Oclgrind's too).

use opencl3::command_queue::CommandQueue;
use opencl3::context::Context;
use opencl3::device::{Device, CL_DEVICE_TYPE_ALL};
use opencl3::kernel::Kernel;
use opencl3::memory::{Buffer, CL_MEM_READ_WRITE};
use opencl3::platform::get_platforms;
use opencl3::program::Program;
use opencl3::types::{cl_float, CL_BLOCKING};
use std::ffi::c_void;

/// PoCL's CPU device with the benchmark's kernels built.
pub struct Pocl {
    pub name: String,
    context: Context,
    queue: CommandQueue,
    program: Program,
}

/// A float buffer of PoCL's.
pub type FloatBuffer = Buffer<cl_float>;

impl Pocl {
    /// PoCL, or why it cannot be had (no OpenCL loader, no PoCL platform, a build failure).
    #[allow(dead_code)]
    pub fn new() -> Result<Pocl, String> {
        Pocl::platform(
            "Portable Computing Language",
            "no PoCL platform (scripts/setup.sh installs pocl-opencl-icd)",
        )
    }

    /// The first device of the platform whose name holds `name` (`missing` says why there is
    /// none), with the benchmark's kernels built.
    pub fn platform(name: &str, missing: &str) -> Result<Pocl, String> {
        let platforms =
            get_platforms().map_err(|e| format!("no OpenCL loader or platform ({e})"))?;
        let platform = platforms
            .into_iter()
            .find(|p| p.name().is_ok_and(|n| n.contains(name)))
            .ok_or(missing)?;
        let id = *platform
            .get_devices(CL_DEVICE_TYPE_ALL)
            .map_err(|e| e.to_string())?
            .first()
            .ok_or("PoCL lists no device")?;
        let device = Device::new(id);
        let name = device.name().map_err(|e| e.to_string())?;
        let context = Context::from_device(&device).map_err(|e| e.to_string())?;
        let queue = CommandQueue::create_default_with_properties(&context, 0, 0)
            .map_err(|e| e.to_string())?;
        let program =
            Program::create_and_build_from_source(&context, include_str!("kernels.cl"), "")?;
        Ok(Pocl {
            name,
            context,
            queue,
            program,
        })
    }

    pub fn kernel(&self, name: &str) -> Kernel {
        Kernel::create(&self.program, name).expect("the kernel was built")
    }

    pub fn buffer(&self, data: &[f32]) -> FloatBuffer {
        // SAFETY: no host pointer; the size is the slice's.
        let mut buffer = unsafe {
            Buffer::<cl_float>::create(
                &self.context,
                CL_MEM_READ_WRITE,
                data.len(),
                std::ptr::null_mut::<c_void>(),
            )
        }
        .expect("an OpenCL buffer");
        // SAFETY: a blocking write of the whole buffer from a slice of its length.
        unsafe {
            self.queue
                .enqueue_write_buffer(&mut buffer, CL_BLOCKING, 0, data, &[])
        }
        .expect("writing an OpenCL buffer");
        buffer
    }

    pub fn write(&self, buffer: &mut FloatBuffer, data: &[f32]) {
        // SAFETY: a blocking write from a slice of the buffer's length.
        unsafe {
            self.queue
                .enqueue_write_buffer(buffer, CL_BLOCKING, 0, data, &[])
        }
        .expect("writing an OpenCL buffer");
    }

    pub fn read(&self, buffer: &FloatBuffer, out: &mut [f32]) {
        // SAFETY: a blocking read into a slice of the buffer's length.
        unsafe {
            self.queue
                .enqueue_read_buffer(buffer, CL_BLOCKING, 0, out, &[])
        }
        .expect("reading an OpenCL buffer");
    }

    /// Queues `kernel` (its arguments set) over `global` work-items in groups of `local`.
    pub fn enqueue(&self, kernel: &Kernel, global: &[usize], local: &[usize]) {
        // SAFETY: the kernel's arguments are set and live; the sizes have one entry per
        // dimension.
        unsafe {
            self.queue.enqueue_nd_range_kernel(
                kernel.get(),
                global.len() as u32,
                std::ptr::null(),
                global.as_ptr(),
                local.as_ptr(),
                &[],
            )
        }
        .expect("enqueueing an OpenCL kernel");
    }

    pub fn finish(&self) {
        self.queue.finish().expect("clFinish");
    }
}

/// Sets argument `index` of `kernel`.
pub fn arg<T>(kernel: &Kernel, index: u32, value: &T) {
    // SAFETY: the kernels' arguments are buffers (`cl_mem`), floats and 64-bit integers, each
    // set from a value of that type.
    unsafe { kernel.set_arg(index, value) }.expect("setting an OpenCL kernel argument");
}
