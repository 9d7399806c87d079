//! The benchmarks' OpenCL side through `opencl3` (libOpenCL.so.1 loaded at run time): any
//! platform by name — PoCL, Intel's CPU Runtime for OpenCL, Oclgrind.

use opencl3::command_queue::CommandQueue;
use opencl3::context::Context;
use opencl3::device::{Device, CL_DEVICE_TYPE_ALL};
use opencl3::kernel::Kernel;
use opencl3::memory::{Buffer, CL_MEM_READ_WRITE};
use opencl3::platform::get_platforms;
use opencl3::program::Program;
use opencl3::types::{cl_float, CL_BLOCKING};
use std::ffi::c_void;

/// One OpenCL platform's first device with the benchmark's kernels built.
pub struct OpenCl {
    /// Who makes it, in a few words ("PoCL", "Intel"): the table's column.
    #[allow(dead_code)]
    pub label: &'static str,
    /// The device's own name.
    pub name: String,
    context: Context,
    queue: CommandQueue,
    program: Program,
}

/// A float buffer of an OpenCL device's.
pub type FloatBuffer = Buffer<cl_float>;

impl OpenCl {
    /// PoCL, or why it cannot be had (no OpenCL loader, no PoCL platform, a build failure).
    #[allow(dead_code)]
    pub fn pocl() -> Result<OpenCl, String> {
        OpenCl::platform(
            "PoCL",
            "Portable Computing Language",
            "no PoCL platform (scripts/setup.sh installs pocl-opencl-icd)",
        )
    }

    /// Intel's CPU Runtime for OpenCL, or why it cannot be had.
    #[allow(dead_code)]
    pub fn intel() -> Result<OpenCl, String> {
        OpenCl::platform(
            "Intel",
            "Intel(R) OpenCL",
            "no Intel OpenCL platform (scripts/setup.sh installs Intel's CPU Runtime for OpenCL \
             from PyPI and its ICD file)",
        )
    }

    /// The first device of the platform named `platform` (exactly: Intel's GPU platform is
    /// "Intel(R) OpenCL Graphics"; `missing` says why there is none), with the benchmark's
    /// kernels built, shown as `label`.
    pub fn platform(label: &'static str, platform: &str, missing: &str) -> Result<OpenCl, String> {
        let platforms =
            get_platforms().map_err(|e| format!("no OpenCL loader or platform ({e})"))?;
        let platform = platforms
            .into_iter()
            .find(|p| p.name().is_ok_and(|n| n == platform))
            .ok_or(missing)?;
        let id = *platform
            .get_devices(CL_DEVICE_TYPE_ALL)
            .map_err(|e| e.to_string())?
            .first()
            .ok_or_else(|| format!("the {label} platform lists no device"))?;
        let device = Device::new(id);
        let name = device.name().map_err(|e| e.to_string())?;
        let context = Context::from_device(&device).map_err(|e| e.to_string())?;
        let queue = CommandQueue::create_default_with_properties(&context, 0, 0)
            .map_err(|e| e.to_string())?;
        let program =
            Program::create_and_build_from_source(&context, include_str!("kernels.cl"), "")?;
        Ok(OpenCl {
            label,
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

    #[allow(dead_code)]
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
