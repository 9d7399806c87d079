//! Modules from SPIR-V (`clCreateProgramWithIL`, built for the one device; a failed build is an
//! error carrying the driver's build log), kernels, and launches: the lowered parameters a stub
//! passes turned into the OpenCL-style kernel's arguments, as the object's
//! [`OpenClKernel`] table (decoded from the object when it loads) says — a memref the address of its
//! first element (its descriptor's aligned pointer plus offset), a pointer as it is, a scalar
//! its bytes.

use super::api::{check, info_string, info_value, Api, Event};
use super::device::Gpu;
use super::queue::{lock, Queue};
use super::sys;
use crate::binary::Object;
use crate::driver::{c_name, FunctionHandle, ModuleHandle};
use crate::error::{Error, ErrorKind, Result};
use gpu_manifest::targets::opencl::{OpenClAbi, OpenClArgumentKind, OpenClKernel};
use std::ffi::c_void;
use std::sync::{Arc, Mutex};

/// The SPIR-V magic number, as the first word of a module in the host's byte order.
const SPIRV_MAGIC: u32 = 0x0723_0203;

/// A built program, the object it came from and that object's ABI.
pub(super) struct Module {
    gpu: &'static Gpu,
    object: &'static Object,
    abi: OpenClAbi,
    program: sys::cl_program,
}

// SAFETY: a program is only used through thread-safe OpenCL calls (kernels, info, release).
unsafe impl Send for Module {}
// SAFETY: as for Send.
unsafe impl Sync for Module {}

impl Drop for Module {
    fn drop(&mut self) {
        // SAFETY: this module's own program, released once; its kernels hold their own
        // references (OpenCL keeps a program alive while kernels of it exist).
        unsafe { self.gpu.api.clReleaseProgram(self.program) };
    }
}

/// A kernel object, released when dropped.
struct Kernel {
    api: &'static Api,
    raw: sys::cl_kernel,
}

impl Drop for Kernel {
    fn drop(&mut self) {
        // SAFETY: this value's own kernel, released once; queued launches keep their own.
        unsafe { self.api.clReleaseKernel(self.raw) };
    }
}

/// One kernel: its OpenCL object and argument table.
pub(super) struct Function {
    gpu: &'static Gpu,
    /// Keeps the program (and the object's name, for messages) alive.
    module: Arc<Module>,
    kernel: Kernel,
    pub table: OpenClKernel,
    /// Held from setting the arguments until the launch is queued: OpenCL kernels' arguments
    /// are the one thing its API does not make thread-safe.
    launching: Mutex<()>,
    /// `CL_KERNEL_WORK_GROUP_SIZE`: most work-items one group of this kernel may have.
    pub work_group_size: u32,
    /// `CL_KERNEL_LOCAL_MEM_SIZE`: its workgroup memory.
    pub local_bytes: u64,
    /// `CL_KERNEL_PRIVATE_MEM_SIZE`: per work-item.
    pub private_bytes: u64,
    /// `CL_KERNEL_MAX_SUB_GROUP_SIZE_FOR_NDRANGE` for its largest work-group, where the device
    /// answers it (OpenCL 2.1 with subgroups).
    pub subgroup_size: Option<u32>,
}

// SAFETY: the kernel's arguments are set only under `launching`; every other call on it is
// thread-safe.
unsafe impl Send for Function {}
// SAFETY: as for Send.
unsafe impl Sync for Function {}

fn invalid(message: String) -> Error {
    Error::new(ErrorKind::InvalidArgument, message)
}

/// Loads `object` on `gpu`: checks it is SPIR-V the device takes, builds it, and returns the
/// module; the error carries the build log.
pub(super) fn load_module(gpu: &'static Gpu, object: &'static Object) -> Result<ModuleHandle> {
    let what = object.describe();
    let bytes = object.image()?;
    if bytes.len() < 20 || !bytes.len().is_multiple_of(4) {
        return Err(invalid(format!(
            "{what} is not SPIR-V: {} bytes (a module is a sequence of 32-bit words, at least 5)",
            bytes.len()
        )));
    }
    let word = |i: usize| u32::from_ne_bytes([bytes[i], bytes[i + 1], bytes[i + 2], bytes[i + 3]]);
    if word(0) != SPIRV_MAGIC {
        return Err(invalid(format!(
            "{what} is not SPIR-V in this machine's byte order: its first word is {:#010x}, the \
             magic number is {SPIRV_MAGIC:#010x}",
            word(0)
        )));
    }
    let version = ((word(4) >> 16) & 0xff, (word(4) >> 8) & 0xff);
    if version > gpu.spirv {
        return Err(Error::new(
            ErrorKind::NoFittingObject,
            format!(
                "{what} is SPIR-V {}.{}; {} takes at most SPIR-V {}.{}",
                version.0, version.1, gpu.name, gpu.spirv.0, gpu.spirv.1
            ),
        ));
    }
    let abi: OpenClAbi = object.decode_abi()?;
    for capability in &abi.capabilities {
        let missing = match capability.as_str() {
            "Float64" if !gpu.fp64 => Some("double precision (CL_DEVICE_DOUBLE_FP_CONFIG)"),
            "Float16" if !gpu.fp16 => Some("half precision (cl_khr_fp16)"),
            "Int64Atomics" if !gpu.int64_atomics => {
                Some("64-bit atomics (cl_khr_int64_base_atomics and cl_khr_int64_extended_atomics)")
            }
            _ => None,
        };
        if let Some(missing) = missing {
            return Err(Error::new(
                ErrorKind::NoFittingObject,
                format!(
                    "{what} uses the SPIR-V capability {capability}; {} has no {missing}",
                    gpu.name
                ),
            ));
        }
    }
    let api = gpu.api;
    let mut status = 0;
    // SAFETY: a live context; `bytes` holds `bytes.len()` bytes for the call.
    let program = unsafe {
        api.clCreateProgramWithIL(gpu.context, bytes.as_ptr().cast(), bytes.len(), &mut status)
    };
    check(status, "clCreateProgramWithIL").map_err(|e| {
        e.map_message(|message| format!("{what}: {message} (not SPIR-V the driver takes?)"))
    })?;
    let module = Module {
        gpu,
        object,
        abi,
        program,
    };
    // SAFETY: a live program and one device of its context; empty options, no callback.
    let status = unsafe {
        api.clBuildProgram(
            program,
            1,
            &gpu.device,
            c"".as_ptr(),
            None,
            std::ptr::null_mut(),
        )
    };
    if status != sys::CL_SUCCESS as sys::cl_int {
        let log = build_log(api, program, gpu.device).unwrap_or_default();
        return Err(Error::new(
            ErrorKind::Driver,
            format!(
                "{what}: building it for {} failed ({}){}",
                gpu.name,
                super::api::status_name(status),
                if log.is_empty() {
                    String::new()
                } else {
                    format!("; the build log:\n{log}")
                }
            ),
        ));
    }
    Ok(ModuleHandle::from_object(Arc::new(module)))
}

fn build_log(api: &Api, program: sys::cl_program, device: sys::cl_device_id) -> Result<String> {
    info_string("clGetProgramBuildInfo", |size, value, size_ret| {
        // SAFETY: a live program and its device; `value` holds `size` bytes.
        unsafe {
            api.clGetProgramBuildInfo(
                program,
                device,
                sys::CL_PROGRAM_BUILD_LOG,
                size,
                value,
                size_ret,
            )
        }
    })
}

/// The kernel `name` of a loaded module.
pub(super) fn function(module: &ModuleHandle, name: &str) -> Result<FunctionHandle> {
    let module = module.shared_object::<Module>()?;
    let gpu = module.gpu;
    let api = gpu.api;
    let what = module.object.describe();
    let table = module
        .abi
        .kernels
        .iter()
        .find(|kernel| kernel.name == name)
        .cloned()
        .ok_or_else(|| {
            Error::new(
                ErrorKind::NoFittingObject,
                format!("{what} has no kernel `{name}` in its argument table"),
            )
        })?;
    let c_name = c_name(name)?;
    let mut status = 0;
    // SAFETY: a live, built program; a NUL-terminated name.
    let kernel = unsafe { api.clCreateKernel(module.program, c_name.as_ptr(), &mut status) };
    if status == sys::CL_INVALID_KERNEL_NAME {
        let names = info_string("clGetProgramInfo", |size, value, size_ret| {
            // SAFETY: a live, built program; `value` holds `size` bytes.
            unsafe {
                api.clGetProgramInfo(
                    module.program,
                    sys::CL_PROGRAM_KERNEL_NAMES,
                    size,
                    value,
                    size_ret,
                )
            }
        })
        .unwrap_or_default();
        return Err(Error::new(
            ErrorKind::NoFittingObject,
            format!(
                "{what} has no kernel `{name}`; its kernels: {}",
                names.replace(';', ", ")
            ),
        ));
    }
    check(status, "clCreateKernel")?;
    let kernel = Kernel { api, raw: kernel };
    let raw = kernel.raw;
    let query = |param| {
        move |size, value, size_ret| {
            // SAFETY: a live kernel and its program's device; `value` holds `size` bytes.
            unsafe { api.clGetKernelWorkGroupInfo(raw, gpu.device, param, size, value, size_ret) }
        }
    };
    let work_group: usize = info_value(
        "clGetKernelWorkGroupInfo",
        query(sys::CL_KERNEL_WORK_GROUP_SIZE),
    )?;
    let local_bytes: u64 = info_value(
        "clGetKernelWorkGroupInfo",
        query(sys::CL_KERNEL_LOCAL_MEM_SIZE),
    )?;
    let private_bytes: u64 = info_value(
        "clGetKernelWorkGroupInfo",
        query(sys::CL_KERNEL_PRIVATE_MEM_SIZE),
    )?;
    Ok(FunctionHandle::from_object(Arc::new(Function {
        gpu,
        module: Arc::clone(&module),
        kernel,
        table,
        launching: Mutex::new(()),
        work_group_size: u32::try_from(work_group).unwrap_or(u32::MAX),
        local_bytes,
        private_bytes,
        subgroup_size: subgroup_size(api, raw, gpu.device, work_group),
    })))
}

/// The subgroup size `kernel` runs with in work-groups of `work_group` work-items (one
/// dimension); `None` where the device does not say.
fn subgroup_size(
    api: &Api,
    kernel: sys::cl_kernel,
    device: sys::cl_device_id,
    work_group: usize,
) -> Option<u32> {
    let mut size = 0usize;
    // SAFETY: a live kernel and its program's device; the input is one `size_t` (the local
    // size), the output one `size_t`.
    let status = unsafe {
        api.clGetKernelSubGroupInfo(
            kernel,
            device,
            sys::CL_KERNEL_MAX_SUB_GROUP_SIZE_FOR_NDRANGE,
            std::mem::size_of::<usize>(),
            (&work_group as *const usize).cast(),
            std::mem::size_of::<usize>(),
            (&mut size as *mut usize).cast(),
            std::ptr::null_mut(),
        )
    };
    (status == sys::CL_SUCCESS as sys::cl_int && size > 0)
        .then(|| u32::try_from(size).ok())
        .flatten()
}

/// The bytes of lowered parameter `index`, which the kernel takes `bytes` wide.
///
/// # Safety
/// Each of `params` points at a value of its `param_sizes` entry's size.
unsafe fn param_bytes(
    kernel: &str,
    params: &[*mut c_void],
    param_sizes: &[usize],
    index: usize,
    bytes: usize,
) -> Result<Vec<u8>> {
    match (params.get(index), param_sizes.get(index)) {
        (Some(&pointer), Some(&size)) if size == bytes && !pointer.is_null() => {
            let mut value = vec![0u8; bytes];
            // SAFETY: the caller guarantees `pointer` holds `size` = `bytes` readable bytes.
            unsafe {
                std::ptr::copy_nonoverlapping(pointer.cast::<u8>(), value.as_mut_ptr(), bytes)
            };
            Ok(value)
        }
        // An `i1` flag, which the kernel takes as a 32-bit integer.
        (Some(&pointer), Some(&1)) if bytes == 4 && !pointer.is_null() => {
            // SAFETY: the caller guarantees `pointer` holds `size` = 1 readable byte.
            let flag = unsafe { pointer.cast::<u8>().read() };
            Ok(u32::from(flag & 1).to_ne_bytes().to_vec())
        }
        (Some(_), Some(&size)) => Err(invalid(format!(
            "kernel `{kernel}`: lowered parameter {index} is {size} bytes; the kernel takes {bytes}"
        ))),
        _ => Err(invalid(format!(
            "kernel `{kernel}`: the launch passed {} lowered parameters; the kernel's argument \
             table reads parameter {index}",
            params.len()
        ))),
    }
}

/// Lowered parameter `index` as a 64-bit word (a pointer, an offset).
///
/// # Safety
/// As [`param_bytes`].
unsafe fn param_word(
    kernel: &str,
    params: &[*mut c_void],
    param_sizes: &[usize],
    index: usize,
) -> Result<u64> {
    // SAFETY: the caller's guarantee.
    let bytes = unsafe { param_bytes(kernel, params, param_sizes, index, 8) }?;
    let mut word = [0u8; 8];
    word.copy_from_slice(&bytes);
    Ok(u64::from_ne_bytes(word))
}

/// Queues a launch of `function` on `queue`.
///
/// # Safety
/// Each of `params` points at a value of its `param_sizes` entry's size, the lowered
/// parameters of the kernel; the memory they address stays allocated until the launch ran.
#[allow(clippy::too_many_arguments)]
pub(super) unsafe fn launch(
    function: &FunctionHandle,
    grid: [u32; 3],
    block: [u32; 3],
    shared: u32,
    queue: &Queue,
    params: &[*mut c_void],
    param_sizes: &[usize],
) -> Result<Event> {
    let function = function.object::<Function>()?;
    let gpu = function.gpu;
    let api = gpu.api;
    let name = function.table.name.as_str();
    if shared != 0 {
        return Err(Error::new(
            ErrorKind::NotSupported,
            format!(
                "kernel `{name}`: {shared} bytes of dynamic shared memory asked for; OpenCL-style \
                 SPIR-V kernels declare their workgroup memory themselves"
            ),
        ));
    }
    if params.len() != param_sizes.len() {
        return Err(invalid(format!(
            "kernel `{name}`: {} parameters with {} sizes",
            params.len(),
            param_sizes.len()
        )));
    }
    let threads = block.iter().map(|&b| u64::from(b)).product::<u64>();
    for (d, (&b, &max)) in block.iter().zip(&gpu.limits.max_block).enumerate() {
        if b > max {
            return Err(invalid(format!(
                "kernel `{name}`: a block of {block:?} is over {}'s limit of {max} in dimension \
                 {d}",
                gpu.name
            )));
        }
    }
    if let Some(most) = function
        .table
        .max_block_threads
        .filter(|&most| threads > u64::from(most))
    {
        return Err(invalid(format!(
            "kernel `{name}`: a block of {threads} threads; its shuffles go through workgroup \
             memory with a slot for each of at most {most} threads"
        )));
    }
    if threads == 0 || threads > u64::from(function.work_group_size) {
        return Err(invalid(format!(
            "kernel `{name}`: a block of {block:?} ({threads} threads); {} runs 1 to {} threads \
             in one work-group of this kernel (CL_KERNEL_WORK_GROUP_SIZE)",
            gpu.name, function.work_group_size
        )));
    }
    let mut global = [0usize; 3];
    for d in 0..3 {
        global[d] = (grid[d] as usize)
            .checked_mul(block[d] as usize)
            .ok_or_else(|| {
                invalid(format!(
                    "kernel `{name}`: grid {grid:?} × block {block:?} overflows"
                ))
            })?;
    }
    let local = block.map(|b| b as usize);
    if global.contains(&0) {
        return Err(invalid(format!("kernel `{name}`: an empty grid {grid:?}")));
    }
    // Arguments as the table says, all read and checked before any is set.
    enum Value {
        Address(u64),
        Bytes(Vec<u8>),
    }
    let mut values = Vec::with_capacity(function.table.arguments.len());
    for argument in &function.table.arguments {
        let p = argument.param;
        let value = match argument.kind {
            OpenClArgumentKind::FirstElement { element_bytes } => {
                // SAFETY: the caller guarantees `params` and `param_sizes`.
                let aligned = unsafe { param_word(name, params, param_sizes, p + 1) }?;
                // SAFETY: as above.
                let offset = unsafe { param_word(name, params, param_sizes, p + 2) }? as i64;
                let address = offset
                    .checked_mul(i64::from(element_bytes))
                    .and_then(|bytes| aligned.checked_add_signed(bytes))
                    .ok_or_else(|| {
                        invalid(format!(
                            "kernel `{name}`: argument at parameter {p}: offset {offset} \
                             overflows the address"
                        ))
                    })?;
                Value::Address(address)
            }
            OpenClArgumentKind::Address => {
                // SAFETY: the caller guarantees `params` and `param_sizes`.
                Value::Address(unsafe { param_word(name, params, param_sizes, p) }?)
            }
            OpenClArgumentKind::Scalar { bytes } => {
                // SAFETY: the caller guarantees `params` and `param_sizes`.
                Value::Bytes(unsafe { param_bytes(name, params, param_sizes, p, bytes as usize) }?)
            }
            OpenClArgumentKind::MemrefSize { dim } => {
                // The descriptor: allocated, aligned, offset, then the sizes.
                let at = p.checked_add(3 + dim as usize).ok_or_else(|| {
                    invalid(format!(
                        "kernel `{name}`: size {dim} of the memref at parameter {p} is past                          the parameters"
                    ))
                })?;
                // SAFETY: the caller guarantees `params` and `param_sizes`.
                let size = unsafe { param_word(name, params, param_sizes, at) }?;
                Value::Bytes(size.to_ne_bytes().to_vec())
            }
        };
        if let Value::Address(address) = value {
            // A view without elements may point anywhere (the kernel may not read it).
            if address != 0 && !gpu.system_svm && !gpu.allocated(address, 1) {
                return Err(invalid(format!(
                    "kernel `{name}`: argument at parameter {p} points at {address:#x}, which \
                     is in no allocation of {}",
                    gpu.name
                )));
            }
        }
        values.push(value);
    }
    let _launching = lock(&function.launching);
    for (index, value) in values.iter().enumerate() {
        let index = index as sys::cl_uint;
        // SAFETY: a live kernel, its arguments set under `launching`; an SVM address the
        // device may use (checked above) or a value of the size the kernel takes.
        let status = unsafe {
            match value {
                Value::Address(address) => api.clSetKernelArgSVMPointer(
                    function.kernel.raw,
                    index,
                    *address as *const c_void,
                ),
                Value::Bytes(bytes) => api.clSetKernelArg(
                    function.kernel.raw,
                    index,
                    bytes.len(),
                    bytes.as_ptr().cast(),
                ),
            }
        };
        check(status, "clSetKernelArg").map_err(|e| {
            e.map_message(|message| format!("kernel `{name}`, argument {index}: {message}"))
        })?;
    }
    gpu.queues
        .enqueue(
            queue,
            None,
            "clEnqueueNDRangeKernel",
            |count, list, event| {
                // SAFETY: a live queue and kernel of the same context, every argument set; sizes
                // of three dimensions; `list` holds `count` live events.
                unsafe {
                    api.clEnqueueNDRangeKernel(
                        queue.raw(),
                        function.kernel.raw,
                        3,
                        std::ptr::null(),
                        global.as_ptr(),
                        local.as_ptr(),
                        count,
                        list,
                        event,
                    )
                }
            },
        )
        .map_err(|e| {
            e.map_message(|message| {
                format!(
                    "kernel `{name}` of {}: {message}",
                    function.module.object.describe()
                )
            })
        })
}

/// The table and OpenCL's attributes of a kernel `function` returned.
pub(super) fn function_of(function: &FunctionHandle) -> Result<&Function> {
    function.object::<Function>()
}
