//! MLIR's GPU runtime ABI, the `mgpu*` functions that MLIR 22's `gpu-to-llvm` and its
//! `gpu.binary` embedding (`#gpu.select_object`) emit calls to, over this crate's drivers: a
//! program MLIR lowered runs on whatever device this crate drives, the host included (upstream
//! has one library per vendor: `CudaRuntimeWrappers.cpp`, `RocmRuntimeWrappers.cpp`).
//!
//! Exported as C symbols with the `mgpu` feature: the `gpu-mgpu` library (for `mlir-runner
//! --shared-libs`), and `gpu-build run`, which registers them with its JIT. As upstream's
//! wrappers do, a failed call prints what failed on stderr and returns null (or nothing):
//! the ABI has no error results.
//!
//! Memory: `mgpuMemAlloc` allocates device memory (host memory on the host device, where
//! host-shared memory is any allocation); `mgpuMemcpy` tells device from host memory by the
//! allocations made here, as CUDA's unified addressing does. Host launches on a stream copy the
//! parameter values, whose sizes a host image's manifest gives.
//!
//! Vulkan devices: a `gpu.binary`'s SPIR-V does not say how its kernels' arguments are bound,
//! so the program's runner registers each object's kernel ABI first
//! ([`register_vulkan_object`], from the gpu-build manifest); `mgpuModuleLoad` finds it by the
//! bytes. A Vulkan launch may pass host memory (`memref.alloc`) as upstream's Vulkan runner
//! allows: each memref argument whose aligned pointer is not memory `mgpuMemAlloc` returned is
//! staged through device memory around the launch (copied in, the descriptor's pointers and
//! offset rewritten to it, copied back and freed once the launch has run), so such a launch is
//! synchronous. The `fillResource*` functions are upstream's Vulkan runner helpers that fill a
//! host memref with a value (`fillI32Buffer` and `fillF32Buffer*D` the same, as upstream's
//! SPIR-V CPU runner names them).
//!
//! Timing: with `GPU_MGPU_LAUNCH_TIMES=1` every launch waits for its kernel and prints, on
//! stdout, the lines upstream's Vulkan runtime prints after each dispatch (`Compute shader
//! execution time: ...us` between events around the kernel, `Command buffer submit time` for
//! the launch call, `Wait idle time` for the wait that follows).

use crate::binary::{Object, Vendor, VulkanArgument, VulkanBinding, VulkanKernel};
use crate::device::Device;
use crate::driver::{Driver, Handle, Pattern};
use crate::error::{Error, ErrorKind, Result};
use gpu_manifest::host_image;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::ffi::{c_char, c_void, CStr};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

/// What the ABI keeps between calls.
struct Runtime {
    device: Device,
    /// Whether a module, function, stream, event or allocation of `device` was handed out:
    /// from then on the device cannot change (those handles mean something only to its driver).
    handed_out: bool,
    /// Host images' kernels: each loaded module's parameter sizes by kernel name.
    module_kernels: HashMap<usize, HashMap<String, Vec<usize>>>,
    /// Parameter sizes by function handle (`mgpuModuleGetFunction` of a host image's kernel).
    param_sizes: HashMap<usize, Vec<usize>>,
    /// Device allocations made here: start → length.
    allocations: BTreeMap<u64, usize>,
    /// Host-shared memory of a Vulkan device (`mgpuMemAlloc` with `host_shared`): host memory
    /// from the driver's `alloc_pinned`, staged by the launches that use it.
    host_shared: HashSet<usize>,
    /// Vulkan modules: the registered object each was loaded from.
    vulkan_modules: HashMap<usize, &'static Object>,
    /// Vulkan kernels by function handle: how their arguments are bound (the launch stages the
    /// host memory they are passed).
    vulkan_kernels: HashMap<usize, &'static VulkanKernel>,
}

static RUNTIME: Mutex<Option<Runtime>> = Mutex::new(None);

/// A Vulkan object [`register_vulkan_object`] registered.
struct RegisteredVulkan {
    object: &'static Object,
    /// Each kernel's lowered parameter sizes, by name.
    param_sizes: HashMap<String, Vec<usize>>,
}

static VULKAN_OBJECTS: Mutex<Vec<RegisteredVulkan>> = Mutex::new(Vec::new());

/// Registers the kernel ABI of a Vulkan (SPIR-V) object that the program will hand to
/// `mgpuModuleLoad`: a `gpu.binary` holds only the SPIR-V, and the Vulkan driver binds each
/// kernel argument as the object's ABI says (its storage-buffer binding and where its value is
/// among the launch's lowered parameters). `chip` (`vulkan1.1`), `kernels` (the gpu.module's
/// kernels, whose `params` say where each argument's lowered parameters start) and `entries`
/// come from the gpu-build manifest that describes `spirv`. `gpu-build run` calls this for
/// every Vulkan object before it runs the program.
///
/// `mgpuModuleLoad` finds the object again by its bytes (compared whole). Registering the same
/// bytes again keeps the first registration. What is registered (a copy of the bytes, the
/// tables) is leaked: loaded modules and their functions borrow it for the life of the
/// process, as an embedded object's tables live, and a program registers each object once.
#[doc(hidden)]
pub fn register_vulkan_object(
    chip: &str,
    spirv: &[u8],
    kernels: &[gpu_manifest::Kernel],
    entries: &gpu_manifest::VulkanEntries,
) -> Result<()> {
    let mut registered = lock(&VULKAN_OBJECTS);
    if registered.iter().any(|r| r.object.bytes() == spirv) {
        return Ok(());
    }
    let mut tables = Vec::new();
    let mut param_sizes = HashMap::new();
    for entry in &entries.kernels {
        let kernel = kernels
            .iter()
            .find(|kernel| kernel.name == entry.name)
            .ok_or_else(|| {
                invalid(format!(
                    "the Vulkan object's ABI names kernel `{}`, which the module's kernel list \
                     does not have",
                    entry.name
                ))
            })?;
        let bindings: Vec<VulkanBinding> = entry
            .launch_bindings(kernel)
            .map_err(invalid)?
            .into_iter()
            .map(VulkanBinding::from)
            .collect();
        let sizes = kernel
            .params
            .iter()
            .map(|p| {
                p.storage().map(|s| s.size).ok_or_else(|| {
                    invalid(format!(
                        "kernel `{}`: a lowered parameter of LLVM type `{}` cannot be passed",
                        kernel.name, p.llvm_type
                    ))
                })
            })
            .collect::<Result<Vec<usize>>>()?;
        param_sizes.insert(entry.name.clone(), sizes);
        tables.push(VulkanKernel {
            name: leak_str(&entry.name),
            workgroup_size: entry.workgroup_size,
            workgroup_memory: entry.workgroup_memory,
            subgroup_size: entry.subgroup_size,
            bindings: Box::leak(bindings.into_boxed_slice()),
        });
    }
    let capabilities: Vec<&'static str> =
        entries.capabilities.iter().map(|c| leak_str(c)).collect();
    let object: &'static Object = Box::leak(Box::new(Object::vulkan(
        leak_str(chip),
        Box::leak(spirv.to_vec().into_boxed_slice()),
        Box::leak(capabilities.into_boxed_slice()),
        Box::leak(tables.into_boxed_slice()),
    )));
    registered.push(RegisteredVulkan {
        object,
        param_sizes,
    });
    Ok(())
}

fn leak_str(text: &str) -> &'static str {
    Box::leak(text.to_string().into_boxed_str())
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

/// Makes `device` the device the `mgpu*` functions use. By default: the device
/// `GPU_MGPU_DEVICE` names (`host`, `cuda`, `hip`), else the first GPU, else the host
/// ([`Device::default_device`]).
///
/// An error once the runtime has handed out a handle (module, function, stream, event,
/// allocation) of another device: every later call would pass it to the wrong driver. Choose
/// the device before the program's first `mgpu*` call; choosing the same device again is
/// allowed and keeps the runtime's state.
pub fn use_device(device: Device) -> Result<()> {
    let mut runtime = RUNTIME.lock().unwrap_or_else(|p| p.into_inner());
    match runtime.as_ref() {
        Some(current) if current.device.is_same(&device) => Ok(()),
        Some(current) if current.handed_out => Err(invalid(format!(
            "the mgpu runtime already handed out handles of {}; it cannot switch to {}: choose \
             the device before the program's first mgpu call",
            current.device.name(),
            device.name()
        ))),
        _ => {
            *runtime = Some(Runtime::new(device));
            Ok(())
        }
    }
}

/// The device the `mgpu*` functions use.
pub fn device() -> Device {
    with_runtime(|runtime, _| Ok(runtime.device.clone())).unwrap_or_else(|_| Device::host())
}

/// The device `GPU_MGPU_DEVICE` names, else [`Device::default_device`].
fn default_device() -> Device {
    let named = std::env::var("GPU_MGPU_DEVICE").unwrap_or_default();
    let vendor = match named.as_str() {
        "" => return Device::default_device(),
        "host" => return Device::host(),
        "cuda" => Vendor::Nvptx,
        "hip" => Vendor::Amdgpu,
        "vulkan" => Vendor::Vulkan,
        other => {
            eprintln!(
                "GPU_MGPU_DEVICE={other}: expected host, cuda, hip or vulkan; using the default \
                 device"
            );
            return Device::default_device();
        }
    };
    let gpu = Device::gpus()
        .ok()
        .and_then(|gpus| gpus.into_iter().find(|d| d.vendor() == vendor));
    gpu.unwrap_or_else(|| {
        eprintln!("GPU_MGPU_DEVICE={named}: no such GPU here; using the host");
        Device::host()
    })
}

impl Runtime {
    fn new(device: Device) -> Runtime {
        Runtime {
            device,
            handed_out: false,
            module_kernels: HashMap::new(),
            param_sizes: HashMap::new(),
            allocations: BTreeMap::new(),
            host_shared: HashSet::new(),
            vulkan_modules: HashMap::new(),
            vulkan_kernels: HashMap::new(),
        }
    }

    /// Whether `pointer` lies in a device allocation made here.
    fn is_device_memory(&self, pointer: u64) -> bool {
        self.allocations
            .range(..=pointer)
            .next_back()
            .is_some_and(|(&start, &length)| pointer < start + length as u64)
    }
}

/// Runs `call` with the runtime and its device's driver (current on this thread).
fn with_runtime<T>(call: impl FnOnce(&mut Runtime, &dyn Driver) -> Result<T>) -> Result<T> {
    let mut guard = RUNTIME.lock().unwrap_or_else(|p| p.into_inner());
    let runtime = guard.get_or_insert_with(|| Runtime::new(default_device()));
    let driver = runtime.device.current()?;
    call(runtime, &*driver)
}

/// The value, or the failure printed (`'mgpuMemAlloc' failed: ...`) and `None`.
fn report<T>(call: &str, result: Result<T>) -> Option<T> {
    match result {
        Ok(value) => Some(value),
        Err(error) => {
            eprintln!("'{call}' failed: {}", error.message());
            None
        }
    }
}

fn invalid(why: String) -> Error {
    Error::new(ErrorKind::InvalidArgument, why)
}

fn load(image: &[u8], what: &str) -> *mut c_void {
    let loaded = with_runtime(|runtime, driver| {
        if driver.vendor() == Vendor::Vulkan {
            let registered = lock(&VULKAN_OBJECTS);
            let found = registered
                .iter()
                .find(|r| r.object.bytes() == image)
                .ok_or_else(|| {
                    invalid(format!(
                        "loading {what} on {}: no Vulkan object with these {} bytes was \
                         registered (a runner registers each object's kernel ABI from its \
                         gpu-build manifest with gpu_embed::mgpu::register_vulkan_object, as \
                         `gpu-build run` does)",
                        runtime.device.name(),
                        image.len()
                    ))
                })?;
            let module = driver.load_module(found.object)?;
            runtime.handed_out = true;
            runtime
                .module_kernels
                .insert(module.0 as usize, found.param_sizes.clone());
            runtime
                .vulkan_modules
                .insert(module.0 as usize, found.object);
            return Ok(module.0);
        }
        let module = driver.load_image(image, what)?;
        runtime.handed_out = true;
        if host_image::is_host_image(image) {
            let (manifest, _) = host_image::decode(image).map_err(|e| invalid(e.to_string()))?;
            let kernels = manifest
                .modules
                .iter()
                .flat_map(|m| &m.kernels)
                .map(|kernel| {
                    let sizes = kernel
                        .params
                        .iter()
                        .map(|p| p.storage().map_or(8, |s| s.size))
                        .collect();
                    (kernel.name.clone(), sizes)
                })
                .collect();
            runtime.module_kernels.insert(module.0 as usize, kernels);
        }
        Ok(module.0)
    });
    report("mgpuModuleLoad", loaded).unwrap_or(std::ptr::null_mut())
}

/// Loads a module from an object (cubin, hsaco, host image) of `size` bytes.
///
/// # Safety
/// `data` holds `size` readable bytes.
#[no_mangle]
pub unsafe extern "C" fn mgpuModuleLoad(data: *mut c_void, size: usize) -> *mut c_void {
    // SAFETY: the caller's guarantee.
    let image = unsafe { std::slice::from_raw_parts(data.cast::<u8>(), size) };
    load(image, "a gpu.binary object")
}

/// Loads a module from NUL-terminated PTX (the driver compiles it; `opt_level` is left to it).
///
/// # Safety
/// `data` is a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn mgpuModuleLoadJIT(data: *mut c_void, _opt_level: i32) -> *mut c_void {
    // SAFETY: the caller's guarantee.
    let text = unsafe { CStr::from_ptr(data.cast::<c_char>()) };
    load(text.to_bytes_with_nul(), "a gpu.binary's PTX")
}

/// Unloads a module, after the device's queued work.
///
/// # Safety
/// `module` came from `mgpuModuleLoad` and is not used afterwards.
#[no_mangle]
pub unsafe extern "C" fn mgpuModuleUnload(module: *mut c_void) {
    if module.is_null() {
        return;
    }
    let unloaded = with_runtime(|runtime, driver| {
        runtime.module_kernels.remove(&(module as usize));
        runtime.vulkan_modules.remove(&(module as usize));
        driver.unload_module(Handle(module));
        Ok(())
    });
    report("mgpuModuleUnload", unloaded);
}

/// The kernel `name` of a module.
///
/// # Safety
/// `module` came from `mgpuModuleLoad`; `name` is a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn mgpuModuleGetFunction(
    module: *mut c_void,
    name: *const c_char,
) -> *mut c_void {
    // SAFETY: the caller's guarantee.
    let name = unsafe { CStr::from_ptr(name) }.to_string_lossy();
    let function = with_runtime(|runtime, driver| {
        if module.is_null() {
            return Err(invalid(format!(
                "kernel `{name}` of a module that did not load"
            )));
        }
        let function = driver.function(Handle(module), &name)?;
        let sizes = runtime
            .module_kernels
            .get(&(module as usize))
            .and_then(|kernels| kernels.get(name.as_ref()));
        if let Some(sizes) = sizes {
            runtime
                .param_sizes
                .insert(function.0 as usize, sizes.clone());
        }
        let vulkan_kernel = runtime
            .vulkan_modules
            .get(&(module as usize))
            .and_then(|object| object.vulkan_kernel(&name));
        if let Some(kernel) = vulkan_kernel {
            runtime.vulkan_kernels.insert(function.0 as usize, kernel);
        }
        Ok(function.0)
    });
    report("mgpuModuleGetFunction", function).unwrap_or(std::ptr::null_mut())
}

/// Launches a kernel: `params` points at `params_count` pointers to the argument values
/// (`cuLaunchKernel`'s `kernelParams`); `extra` must be null.
///
/// # Safety
/// `function` came from `mgpuModuleGetFunction`; `params` match the kernel's parameters;
/// `stream` is null or came from `mgpuStreamCreate`.
#[no_mangle]
#[allow(clippy::too_many_arguments)] // the ABI's shape
pub unsafe extern "C" fn mgpuLaunchKernel(
    function: *mut c_void,
    grid_x: isize,
    grid_y: isize,
    grid_z: isize,
    block_x: isize,
    block_y: isize,
    block_z: isize,
    shared_memory_bytes: i32,
    stream: *mut c_void,
    params: *mut *mut c_void,
    extra: *mut *mut c_void,
    params_count: u64,
) {
    let launched = with_runtime(|runtime, driver| {
        if function.is_null() {
            return Err(invalid("a launch of a kernel that was not found".into()));
        }
        if !extra.is_null() {
            return Err(invalid(
                "`extra` launch parameters are not supported".into(),
            ));
        }
        let dimension = |value: isize, what: &str| {
            u32::try_from(value).map_err(|_| invalid(format!("{what} {value} is out of range")))
        };
        let grid = [
            dimension(grid_x, "grid x")?,
            dimension(grid_y, "grid y")?,
            dimension(grid_z, "grid z")?,
        ];
        let block = [
            dimension(block_x, "block x")?,
            dimension(block_y, "block y")?,
            dimension(block_z, "block z")?,
        ];
        let shared = u32::try_from(shared_memory_bytes)
            .map_err(|_| invalid(format!("dynamic shared memory {shared_memory_bytes}")))?;
        let count = usize::try_from(params_count)
            .map_err(|_| invalid(format!("{params_count} parameters")))?;
        let params: &mut [*mut c_void] = if count == 0 {
            &mut []
        } else {
            // SAFETY: the caller's guarantee: `count` parameter pointers.
            unsafe { std::slice::from_raw_parts_mut(params, count) }
        };
        // Sizes matter to queued host launches (which copy the values); GPU drivers know them.
        let sizes = runtime
            .param_sizes
            .get(&(function as usize))
            .cloned()
            .unwrap_or_else(|| vec![8; count]);
        if sizes.len() != count {
            return Err(invalid(format!(
                "the kernel takes {} parameters, the launch passes {count}",
                sizes.len()
            )));
        }
        let launch = Launch {
            function: Handle(function),
            grid,
            block,
            shared,
            stream: Handle(stream),
        };
        match runtime.vulkan_kernels.get(&(function as usize)) {
            // SAFETY: the caller's guarantee.
            Some(kernel) => unsafe {
                launch_vulkan(runtime, driver, kernel, &launch, params, &sizes)
            },
            // SAFETY: the caller's guarantee.
            None => unsafe { launch_timed(driver, &launch, params, &sizes) },
        }
    });
    report("mgpuLaunchKernel", launched);
}

/// A launch's configuration, as `mgpuLaunchKernel` received it.
struct Launch {
    function: Handle,
    grid: [u32; 3],
    block: [u32; 3],
    shared: u32,
    stream: Handle,
}

/// Whether `GPU_MGPU_LAUNCH_TIMES=1` asks for launch times (read once).
fn launch_times_requested() -> bool {
    static REQUESTED: OnceLock<bool> = OnceLock::new();
    *REQUESTED.get_or_init(|| std::env::var("GPU_MGPU_LAUNCH_TIMES").is_ok_and(|v| v == "1"))
}

/// Launches; with launch times requested, waits for the kernel and prints how long it ran
/// (between events recorded around it), how long the launch call took and how long the wait.
///
/// # Safety
/// `params` match the kernel's parameters.
unsafe fn launch_timed(
    driver: &dyn Driver,
    launch: &Launch,
    params: &mut [*mut c_void],
    sizes: &[usize],
) -> Result<()> {
    let run = |params: &mut [*mut c_void]| {
        // SAFETY: the caller's guarantee.
        unsafe {
            driver.launch(
                launch.function,
                launch.grid,
                launch.block,
                launch.shared,
                launch.stream,
                params,
                sizes,
            )
        }
    };
    if !launch_times_requested() {
        return run(params);
    }
    let start = driver.create_event()?;
    let end = match driver.create_event() {
        Ok(end) => end,
        Err(error) => {
            driver.destroy_event(start);
            return Err(error);
        }
    };
    let timed = (|| {
        driver.record_event(start, launch.stream)?;
        let submit = Instant::now();
        run(params)?;
        let submitted = submit.elapsed();
        driver.record_event(end, launch.stream)?;
        let wait = Instant::now();
        driver.synchronize_event(end)?;
        let waited = wait.elapsed();
        let kernel_ms = driver.elapsed_ms(start, end)?;
        print_launch_times(kernel_ms, submitted, waited);
        Ok(())
    })();
    driver.destroy_event(start);
    driver.destroy_event(end);
    timed
}

/// Upstream's Vulkan runtime's lines, after what the program's C code printed so far.
fn print_launch_times(kernel_ms: f32, submitted: Duration, waited: Duration) {
    use std::io::Write;
    extern "C" {
        fn fflush(stream: *mut c_void) -> i32;
    }
    // SAFETY: fflush(NULL) flushes every C output stream (the program's printing), so these
    // lines come after it.
    unsafe { fflush(std::ptr::null_mut()) };
    let mut out = std::io::stdout().lock();
    let _ = write!(
        out,
        "Compute shader execution time: {:.3}us\nCommand buffer submit time: {}us\nWait idle \
         time: {}us\n",
        f64::from(kernel_ms) * 1000.0,
        submitted.as_micros(),
        waited.as_micros()
    );
    let _ = out.flush();
}

/// One range of host memory a Vulkan launch uses through device memory.
struct StagedView {
    host: *mut u8,
    device: u64,
    bytes: usize,
}

/// A Vulkan launch: each memref argument in host memory (its aligned pointer not in an
/// allocation made here) is staged: device memory of its view's extent, the bytes copied in,
/// the argument's allocated and aligned pointers set to it and its offset to 0 in a copy of the
/// parameters; after the launch the bytes are copied back and the memory freed, once the stream
/// has run everything. Views of the same host bytes share one staging allocation; partly
/// overlapping views are refused (copying both back would lose writes).
///
/// # Safety
/// `params` match the kernel's parameters; host memory they point at holds each view's extent.
unsafe fn launch_vulkan(
    runtime: &Runtime,
    driver: &dyn Driver,
    kernel: &VulkanKernel,
    launch: &Launch,
    params: &mut [*mut c_void],
    sizes: &[usize],
) -> Result<()> {
    let stream = launch.stream;
    let mut staged: Vec<StagedView> = Vec::new();
    // Each staged argument's new (allocated, aligned, offset), boxed so the pointers in
    // `rewritten` stay valid as more are added.
    let mut fields: Vec<Box<[u64; 3]>> = Vec::new();
    let mut rewritten: Vec<*mut c_void> = params.to_vec();
    let result = (|| {
        for binding in kernel.bindings {
            let VulkanArgument::Elements {
                rank,
                element_bytes,
            } = binding.kind
            else {
                continue;
            };
            // SAFETY: the caller's guarantee.
            let view =
                unsafe { host_view(runtime, kernel, binding, rank, element_bytes, params, sizes) }?;
            let Some((host, bytes)) = view else {
                continue;
            };
            let device = match staged.iter().find(|s| s.host == host && s.bytes == bytes) {
                Some(same) => same.device,
                None => {
                    let (start, end) = (host as usize, (host as usize).saturating_add(bytes));
                    if staged.iter().any(|s| {
                        (s.host as usize) < end && start < (s.host as usize).saturating_add(s.bytes)
                    }) {
                        return Err(invalid(format!(
                            "kernel `{}`: the memref bound at binding {} overlaps another \
                             argument's host memory without being the same view; host memory \
                             is staged per view on Vulkan devices, so pass such views in \
                             device memory (gpu.alloc)",
                            kernel.name, binding.binding
                        )));
                    }
                    let device = driver.alloc(bytes)?;
                    staged.push(StagedView {
                        host,
                        device,
                        bytes,
                    });
                    // SAFETY: the caller guarantees the host view's bytes; the device range was
                    // just allocated; both stay until the stream has run (waited for below).
                    unsafe { driver.copy_to_device_async(device, host.cast(), bytes, stream) }?;
                    device
                }
            };
            let mut field = Box::new([device, device, 0]);
            let at = binding.param;
            for (i, value) in field.iter_mut().enumerate() {
                rewritten[at + i] = (value as *mut u64).cast();
            }
            fields.push(field);
        }
        // SAFETY: the caller's guarantee, with staged arguments pointing at device memory
        // holding their views' bytes.
        unsafe { launch_timed(driver, launch, &mut rewritten, sizes) }?;
        for view in &staged {
            // SAFETY: as for the copy in; the stream is waited for below.
            unsafe {
                driver.copy_to_host_async(view.host.cast(), view.device, view.bytes, stream)
            }?;
        }
        Ok(())
    })();
    // Whatever failed: no queued work may use the staging memory or the host memory when this
    // returns.
    let waited = if staged.is_empty() {
        Ok(())
    } else {
        driver.synchronize_stream(stream)
    };
    for view in &staged {
        driver.free(view.device);
    }
    drop(fields);
    result.and(waited)
}

/// A memref argument's host view: where its first element is and how many bytes its extent
/// spans; `None` when it is device memory of this runtime or has no elements.
///
/// # Safety
/// `params` match the kernel's parameters.
unsafe fn host_view(
    runtime: &Runtime,
    kernel: &VulkanKernel,
    binding: &VulkanBinding,
    rank: usize,
    element_bytes: u32,
    params: &[*mut c_void],
    sizes: &[usize],
) -> Result<Option<(*mut u8, usize)>> {
    let field = |i: usize| -> Result<i64> {
        let index = binding.param + i;
        match (params.get(index), sizes.get(index)) {
            // SAFETY: the caller guarantees the parameter's 8 bytes.
            (Some(&value), Some(8)) => Ok(unsafe { value.cast::<i64>().read_unaligned() }),
            _ => Err(invalid(format!(
                "kernel `{}`: the memref bound at binding {} has no descriptor field at lowered \
                 parameter {index} (the launch passes {} parameters)",
                kernel.name,
                binding.binding,
                params.len()
            ))),
        }
    };
    let aligned = field(1)? as u64;
    if runtime.is_device_memory(aligned) {
        return Ok(None);
    }
    let offset = field(2)?;
    let mut extent = 1i64;
    let mut dims = Vec::with_capacity(rank);
    for d in 0..rank {
        let (size, stride) = (field(3 + d)?, field(3 + rank + d)?);
        dims.push((size, stride));
    }
    let bad = || {
        invalid(format!(
            "kernel `{}`: the host memref bound at binding {} has offset {offset} and (size, \
             stride) {dims:?}: a negative value or an extent too large to stage",
            kernel.name, binding.binding
        ))
    };
    for &(size, stride) in &dims {
        if size == 0 {
            return Ok(None);
        }
        if size < 0 || stride < 0 {
            return Err(bad());
        }
        extent = (size - 1)
            .checked_mul(stride)
            .and_then(|span| extent.checked_add(span))
            .ok_or_else(bad)?;
    }
    let element = i64::from(element_bytes);
    if aligned == 0 {
        return Err(invalid(format!(
            "kernel `{}`: the memref bound at binding {} is a null pointer",
            kernel.name, binding.binding
        )));
    }
    if offset < 0 {
        return Err(bad());
    }
    let bytes = extent
        .checked_mul(element)
        .and_then(|bytes| usize::try_from(bytes).ok())
        .ok_or_else(bad)?;
    let start = offset
        .checked_mul(element)
        .and_then(|bytes| usize::try_from(bytes).ok())
        .ok_or_else(bad)?;
    Ok(Some(((aligned as *mut u8).wrapping_add(start), bytes)))
}

/// Thread-block clusters are NVIDIA sm_90 launches this runtime does not make.
///
/// # Safety
/// None needed: it only reports.
#[no_mangle]
#[allow(clippy::too_many_arguments)] // the ABI's shape
pub unsafe extern "C" fn mgpuLaunchClusterKernel(
    _function: *mut c_void,
    _cluster_x: isize,
    _cluster_y: isize,
    _cluster_z: isize,
    _grid_x: isize,
    _grid_y: isize,
    _grid_z: isize,
    _block_x: isize,
    _block_y: isize,
    _block_z: isize,
    _shared_memory_bytes: i32,
    _stream: *mut c_void,
    _params: *mut *mut c_void,
    _extra: *mut *mut c_void,
) {
    report::<()>(
        "mgpuLaunchClusterKernel",
        Err(invalid(
            "cluster launches are not supported by gpu-embed".into(),
        )),
    );
}

/// A new stream.
#[no_mangle]
pub extern "C" fn mgpuStreamCreate() -> *mut c_void {
    let stream = with_runtime(|runtime, driver| {
        let stream = driver.create_stream()?;
        runtime.handed_out = true;
        Ok(stream)
    });
    report("mgpuStreamCreate", stream).map_or(std::ptr::null_mut(), |s| s.0)
}

/// Destroys a stream, after its queued work.
///
/// # Safety
/// `stream` came from `mgpuStreamCreate` and is not used afterwards.
#[no_mangle]
pub unsafe extern "C" fn mgpuStreamDestroy(stream: *mut c_void) {
    let destroyed = with_runtime(|_, driver| {
        driver.destroy_stream(Handle(stream));
        Ok(())
    });
    report("mgpuStreamDestroy", destroyed);
}

/// Waits for a stream's queued work.
///
/// # Safety
/// `stream` is null or came from `mgpuStreamCreate`.
#[no_mangle]
pub unsafe extern "C" fn mgpuStreamSynchronize(stream: *mut c_void) {
    let synchronized = with_runtime(|_, driver| driver.synchronize_stream(Handle(stream)));
    report("mgpuStreamSynchronize", synchronized);
}

/// Makes a stream's later work wait for an event's last recording.
///
/// # Safety
/// `stream` and `event` came from `mgpuStreamCreate` and `mgpuEventCreate`.
#[no_mangle]
pub unsafe extern "C" fn mgpuStreamWaitEvent(stream: *mut c_void, event: *mut c_void) {
    let waited = with_runtime(|_, driver| driver.stream_wait_event(Handle(stream), Handle(event)));
    report("mgpuStreamWaitEvent", waited);
}

/// A new event.
#[no_mangle]
pub extern "C" fn mgpuEventCreate() -> *mut c_void {
    let event = with_runtime(|runtime, driver| {
        let event = driver.create_event()?;
        runtime.handed_out = true;
        Ok(event)
    });
    report("mgpuEventCreate", event).map_or(std::ptr::null_mut(), |e| e.0)
}

/// Destroys an event.
///
/// # Safety
/// `event` came from `mgpuEventCreate` and is not used afterwards.
#[no_mangle]
pub unsafe extern "C" fn mgpuEventDestroy(event: *mut c_void) {
    let destroyed = with_runtime(|_, driver| {
        driver.destroy_event(Handle(event));
        Ok(())
    });
    report("mgpuEventDestroy", destroyed);
}

/// Waits for the work before an event's last recording.
///
/// # Safety
/// `event` came from `mgpuEventCreate`.
#[no_mangle]
pub unsafe extern "C" fn mgpuEventSynchronize(event: *mut c_void) {
    let synchronized = with_runtime(|_, driver| driver.synchronize_event(Handle(event)));
    report("mgpuEventSynchronize", synchronized);
}

/// Records an event on a stream.
///
/// # Safety
/// `event` came from `mgpuEventCreate`; `stream` is null or came from `mgpuStreamCreate`.
#[no_mangle]
pub unsafe extern "C" fn mgpuEventRecord(event: *mut c_void, stream: *mut c_void) {
    let recorded = with_runtime(|_, driver| driver.record_event(Handle(event), Handle(stream)));
    report("mgpuEventRecord", recorded);
}

/// `size` bytes of device memory; host-shared memory (which host code may read and write too)
/// on the host device, where every allocation is, and on Vulkan devices, where it is host
/// memory that launches stage (see the module's documentation).
#[no_mangle]
pub extern "C" fn mgpuMemAlloc(size: u64, _stream: *mut c_void, host_shared: bool) -> *mut c_void {
    let allocated = with_runtime(|runtime, driver| {
        let bytes = usize::try_from(size).map_err(|_| invalid(format!("{size} bytes")))?;
        if host_shared && driver.vendor() == Vendor::Vulkan {
            // Host memory, which Vulkan launches stage like any other.
            let pointer = driver.alloc_pinned(bytes.max(1))?;
            runtime.handed_out = true;
            runtime.host_shared.insert(pointer as usize);
            return Ok(pointer);
        }
        if host_shared && driver.vendor() != Vendor::Host {
            return Err(invalid(format!(
                "host-shared memory on {} (only the host device and Vulkan devices have it here)",
                runtime.device.name()
            )));
        }
        let pointer = driver.alloc(bytes.max(1))?;
        runtime.handed_out = true;
        runtime.allocations.insert(pointer, bytes.max(1));
        Ok(pointer as *mut c_void)
    });
    report("mgpuMemAlloc", allocated).unwrap_or(std::ptr::null_mut())
}

/// Frees memory `mgpuMemAlloc` returned (the device's queued work first).
///
/// # Safety
/// `pointer` came from `mgpuMemAlloc` and no work uses it afterwards.
#[no_mangle]
pub unsafe extern "C" fn mgpuMemFree(pointer: *mut c_void, stream: *mut c_void) {
    let freed = with_runtime(|runtime, driver| {
        if runtime.host_shared.remove(&(pointer as usize)) {
            driver.synchronize_stream(Handle(stream))?;
            // SAFETY: host-shared memory `alloc_pinned` returned, which no queued work uses
            // now (Vulkan launches stage it and have finished when they return).
            unsafe { driver.free_pinned(pointer) };
            return Ok(());
        }
        if runtime.allocations.remove(&(pointer as u64)).is_none() {
            return Err(invalid(format!(
                "{pointer:?} was not allocated by mgpuMemAlloc"
            )));
        }
        driver.synchronize_stream(Handle(stream))?;
        driver.free(pointer as u64);
        Ok(())
    });
    report("mgpuMemFree", freed);
}

/// Copies `size` bytes in `stream`'s order, between device and host memory in either
/// direction.
///
/// # Safety
/// Both ranges are valid for `size` bytes until the stream has run the copy.
#[no_mangle]
pub unsafe extern "C" fn mgpuMemcpy(
    target: *mut c_void,
    source: *mut c_void,
    size: usize,
    stream: *mut c_void,
) {
    let copied = with_runtime(|runtime, driver| {
        let stream = Handle(stream);
        let (to, from) = (target as u64, source as u64);
        // SAFETY: (all four copies) the caller's guarantee; which memory each pointer is in
        // is known from the allocations made here.
        unsafe {
            match (runtime.is_device_memory(to), runtime.is_device_memory(from)) {
                _ if driver.vendor() == Vendor::Host => {
                    driver.copy_on_device_async(to, from, size, stream)
                }
                (true, true) => driver.copy_on_device_async(to, from, size, stream),
                // Pageable host memory: waited for here (the drivers' copies keep host memory in
                // use until the stream runs them).
                (true, false) => driver
                    .copy_to_device_async(to, source, size, stream)
                    .and_then(|()| driver.synchronize_stream(stream)),
                (false, true) => driver
                    .copy_to_host_async(target, from, size, stream)
                    .and_then(|()| driver.synchronize_stream(stream)),
                (false, false) => {
                    driver.synchronize_stream(stream)?;
                    std::ptr::copy(source.cast::<u8>(), target.cast::<u8>(), size);
                    Ok(())
                }
            }
        }
    });
    report("mgpuMemcpy", copied);
}

fn fill(call: &str, target: *mut c_void, pattern: Pattern, count: usize, stream: *mut c_void) {
    let filled = with_runtime(|_, driver| {
        // SAFETY: the caller's guarantee (see the exported functions).
        unsafe { driver.fill_async(target as u64, pattern, count, Handle(stream)) }
    });
    report(call, filled);
}

/// Writes `value` to `count` 32-bit elements from `target`, in `stream`'s order.
///
/// # Safety
/// `target` holds `count` aligned 32-bit elements of device memory.
#[no_mangle]
pub unsafe extern "C" fn mgpuMemset32(
    target: *mut c_void,
    value: u32,
    count: usize,
    stream: *mut c_void,
) {
    fill("mgpuMemset32", target, Pattern::U32(value), count, stream);
}

/// Writes `value` to `count` 16-bit elements from `target`, in `stream`'s order.
///
/// # Safety
/// `target` holds `count` aligned 16-bit elements of device memory.
#[no_mangle]
pub unsafe extern "C" fn mgpuMemset16(
    target: *mut c_void,
    value: u16,
    count: usize,
    stream: *mut c_void,
) {
    fill("mgpuMemset16", target, Pattern::U16(value), count, stream);
}

/// Page-locks `size` bytes of host memory so the device can use it (the host device uses any
/// host memory as it is).
///
/// # Safety
/// `pointer` holds `size` bytes that stay allocated until unregistered.
#[no_mangle]
pub unsafe extern "C" fn mgpuMemHostRegister(pointer: *mut c_void, size: u64) {
    let registered = with_runtime(|_, driver| {
        let bytes = usize::try_from(size).map_err(|_| invalid(format!("{size} bytes")))?;
        // SAFETY: the caller's guarantee.
        unsafe { driver.register(pointer, bytes) }
    });
    report("mgpuMemHostRegister", registered);
}

/// Unregisters host memory `mgpuMemHostRegister` registered.
///
/// # Safety
/// `pointer` was registered and no queued work uses it.
#[no_mangle]
pub unsafe extern "C" fn mgpuMemHostUnregister(pointer: *mut c_void) {
    let unregistered = with_runtime(|_, driver| {
        // SAFETY: the caller's guarantee.
        unsafe { driver.unregister(pointer) };
        Ok(())
    });
    report("mgpuMemHostUnregister", unregistered);
}

/// A memref descriptor's first fields (`StridedMemRefType<char, N>`): then `rank` sizes and
/// `rank` strides.
#[repr(C)]
struct MemrefDescriptor {
    allocated: *mut u8,
    aligned: *mut u8,
    offset: i64,
    sizes_and_strides: [i64; 0],
}

/// The data pointer and byte size of a densely packed memref.
///
/// # Safety
/// `descriptor` is a memref descriptor of rank `rank`.
unsafe fn dense_memref(
    rank: i64,
    descriptor: *const MemrefDescriptor,
    element_bytes: i64,
) -> Result<(*mut c_void, u64)> {
    let rank = usize::try_from(rank).map_err(|_| invalid(format!("memref rank {rank}")))?;
    // SAFETY: the caller's guarantee.
    let descriptor = unsafe { &*descriptor };
    // SAFETY: a descriptor of rank `rank` has `2 rank` sizes and strides after its offset.
    let fields =
        unsafe { std::slice::from_raw_parts(descriptor.sizes_and_strides.as_ptr(), 2 * rank) };
    let (sizes, strides) = fields.split_at(rank);
    let mut dense = 1i64;
    for (i, (&size, &stride)) in sizes.iter().zip(strides).enumerate().rev() {
        if stride != dense && size > 1 {
            return Err(invalid(format!(
                "only densely packed memrefs can be registered (dimension {i} has stride \
                 {stride}, dense would be {dense})"
            )));
        }
        dense *= size;
    }
    let bytes = u64::try_from(dense * element_bytes)
        .map_err(|_| invalid(format!("a memref of {dense} elements")))?;
    let data = descriptor
        .aligned
        .wrapping_offset((descriptor.offset * element_bytes) as isize);
    Ok((data.cast(), bytes))
}

/// Registers a densely packed memref's data (`gpu.host_register`).
///
/// # Safety
/// `descriptor` is a memref descriptor of rank `rank` whose data stays allocated until
/// unregistered.
#[no_mangle]
pub unsafe extern "C" fn mgpuMemHostRegisterMemRef(
    rank: i64,
    descriptor: *const c_void,
    element_bytes: i64,
) {
    // SAFETY: the caller's guarantee.
    let memref = unsafe { dense_memref(rank, descriptor.cast(), element_bytes) };
    if let Some((data, bytes)) = report("mgpuMemHostRegisterMemRef", memref) {
        // SAFETY: as above.
        unsafe { mgpuMemHostRegister(data, bytes) };
    }
}

/// Unregisters a memref's data (`gpu.host_unregister`).
///
/// # Safety
/// The memref was registered and no queued work uses it.
#[no_mangle]
pub unsafe extern "C" fn mgpuMemHostUnregisterMemRef(
    rank: i64,
    descriptor: *const c_void,
    element_bytes: i64,
) {
    // SAFETY: the caller's guarantee.
    let memref = unsafe { dense_memref(rank, descriptor.cast(), element_bytes) };
    if let Some((data, _)) = report("mgpuMemHostUnregisterMemRef", memref) {
        // SAFETY: as above.
        unsafe { mgpuMemHostUnregister(data) };
    }
}

/// A rank-1 memref descriptor, as MLIR passes and returns one (`StridedMemRefType<T, 1>`).
#[repr(C)]
pub struct Memref1d<T> {
    allocated: *mut T,
    aligned: *mut T,
    offset: i64,
    sizes: [i64; 1],
    strides: [i64; 1],
}

/// The device's view of registered host memory (upstream's ROCm wrappers'
/// `mgpuMemGetDeviceMemRef1d*`, which the ROCm integration tests call after
/// `gpu.host_register`): the same address on the host device, under the unified addressing
/// every 64-bit CUDA device has on NVIDIA GPUs, and on Vulkan devices, whose launches stage
/// host memory. On AMD GPUs the runtime may map it elsewhere (`hipHostGetDevicePointer`),
/// which is not bound here: reported, and null.
fn device_memref<T>(
    call: &str,
    aligned: *mut T,
    offset: i64,
    size: i64,
    stride: i64,
) -> Memref1d<T> {
    let pointer = with_runtime(|_, driver| match driver.vendor() {
        // Level Zero's host allocations are shared: the same address on the device.
        Vendor::Host | Vendor::Nvptx | Vendor::Vulkan | Vendor::LevelZero => Ok(aligned),
        Vendor::Amdgpu => Err(invalid(
            "the device address of registered host memory on AMD GPUs (hipHostGetDevicePointer \
             is not bound by gpu-embed)"
                .into(),
        )),
    });
    let pointer = report(call, pointer).unwrap_or(std::ptr::null_mut());
    Memref1d {
        allocated: pointer,
        aligned: pointer,
        offset,
        sizes: [size],
        strides: [stride],
    }
}

/// The device's view of a registered rank-1 f32 memref.
#[no_mangle]
pub extern "C" fn mgpuMemGetDeviceMemRef1dFloat(
    _allocated: *mut f32,
    aligned: *mut f32,
    offset: i64,
    size: i64,
    stride: i64,
) -> Memref1d<f32> {
    device_memref(
        "mgpuMemGetDeviceMemRef1dFloat",
        aligned,
        offset,
        size,
        stride,
    )
}

/// The device's view of a registered rank-1 i32 memref.
#[no_mangle]
pub extern "C" fn mgpuMemGetDeviceMemRef1dInt32(
    _allocated: *mut i32,
    aligned: *mut i32,
    offset: i64,
    size: i64,
    stride: i64,
) -> Memref1d<i32> {
    device_memref(
        "mgpuMemGetDeviceMemRef1dInt32",
        aligned,
        offset,
        size,
        stride,
    )
}

/// Makes GPU `index` (in `Device::gpus` order) the device the other calls use.
#[no_mangle]
pub extern "C" fn mgpuSetDefaultDevice(index: i32) {
    let chosen = Device::gpus().and_then(|gpus| {
        usize::try_from(index)
            .ok()
            .and_then(|i| gpus.into_iter().nth(i))
            .ok_or_else(|| invalid(format!("there is no GPU {index}")))
    });
    if let Some(device) = report("mgpuSetDefaultDevice", chosen) {
        report("mgpuSetDefaultDevice", use_device(device));
    }
}

/// Writes `value` to every element of a host view (upstream's Vulkan runner's `fillResource*`
/// helpers); a view the runtime cannot walk is reported, and left alone.
///
/// # Safety
/// `aligned + offset` with `sizes` and `strides` (in elements) addresses writable `T`s.
unsafe fn fill_host_view<T: Copy>(
    call: &str,
    aligned: *mut T,
    offset: i64,
    sizes: &[i64],
    strides: &[i64],
    value: T,
) {
    if sizes.contains(&0) {
        return;
    }
    if aligned.is_null() || offset < 0 || sizes.iter().any(|&s| s < 0) {
        report::<()>(
            call,
            Err(invalid(format!(
                "a memref at {aligned:?} with offset {offset} and sizes {sizes:?}"
            ))),
        );
        return;
    }
    let mut index = vec![0i64; sizes.len()];
    loop {
        let element = index.iter().zip(strides).fold(offset, |at, (&i, &stride)| {
            at.wrapping_add(i.wrapping_mul(stride))
        });
        // SAFETY: the caller's guarantee: an element of the view.
        unsafe {
            aligned
                .wrapping_offset(element as isize)
                .write_unaligned(value)
        };
        // The next index, the last dimension fastest.
        let mut d = sizes.len();
        loop {
            if d == 0 {
                return;
            }
            d -= 1;
            index[d] += 1;
            if index[d] < sizes[d] {
                break;
            }
            index[d] = 0;
        }
    }
}

/// An `i8` argument read from the 32 bits that carry it: the C calling convention leaves the
/// upper bits to the caller, and MLIR's calls do not extend them.
fn low_byte(value: i32) -> i8 {
    value as i8
}

fn same<T>(value: T) -> T {
    value
}

/// Upstream's Vulkan runner helpers (`fillResource1DFloat(memref<?xf32>, f32)` and its
/// siblings): fill a host memref with a value. Called as MLIR lowers a call to an external
/// function without `llvm.emit_c_interface`: the memref's descriptor fields (allocated and
/// aligned pointer, offset, sizes, strides), then the value.
macro_rules! fill_resource {
    ($name:ident, $element:ty, $value:ty, $convert:ident, [$($size:ident),+], [$($stride:ident),+]) => {
        #[doc = concat!("Upstream's Vulkan runner's `", stringify!($name), "`: fills a host memref.")]
        ///
        /// # Safety
        /// The descriptor fields describe a live memref of writable elements.
        #[no_mangle]
        #[allow(non_snake_case)]
        pub unsafe extern "C" fn $name(
            _allocated: *mut $element,
            aligned: *mut $element,
            offset: i64,
            $($size: i64,)+
            $($stride: i64,)+
            value: $value,
        ) {
            // SAFETY: the caller's guarantee.
            unsafe {
                fill_host_view(
                    stringify!($name),
                    aligned,
                    offset,
                    &[$($size),+],
                    &[$($stride),+],
                    $convert(value),
                )
            }
        }
    };
}

fill_resource!(fillResource1DFloat, f32, f32, same, [s0], [t0]);
fill_resource!(fillResource2DFloat, f32, f32, same, [s0, s1], [t0, t1]);
fill_resource!(
    fillResource3DFloat,
    f32,
    f32,
    same,
    [s0, s1, s2],
    [t0, t1, t2]
);
fill_resource!(fillResource1DInt, i32, i32, same, [s0], [t0]);
fill_resource!(fillResource2DInt, i32, i32, same, [s0, s1], [t0, t1]);
fill_resource!(
    fillResource3DInt,
    i32,
    i32,
    same,
    [s0, s1, s2],
    [t0, t1, t2]
);
fill_resource!(fillResource1DInt8, i8, i32, low_byte, [s0], [t0]);
fill_resource!(fillResource2DInt8, i8, i32, low_byte, [s0, s1], [t0, t1]);
fill_resource!(
    fillResource3DInt8,
    i8,
    i32,
    low_byte,
    [s0, s1, s2],
    [t0, t1, t2]
);
// The same helpers under the names upstream's SPIR-V CPU runner's runtime gives them
// (`mlir_spirv_cpu_runtime`, which MLIR's `GPU/SPIRV` integration tests call).
fill_resource!(fillI32Buffer, i32, i32, same, [s0], [t0]);
fill_resource!(fillF32Buffer1D, f32, f32, same, [s0], [t0]);
fill_resource!(fillF32Buffer2D, f32, f32, same, [s0, s1], [t0, t1]);
fill_resource!(fillF32Buffer3D, f32, f32, same, [s0, s1, s2], [t0, t1, t2]);

/// Every exported function by name, for JITs that resolve symbols from a table
/// (`gpu-build run` registers these with MLIR's ExecutionEngine).
pub fn symbols() -> Vec<(&'static str, *mut c_void)> {
    vec![
        ("mgpuModuleLoad", mgpuModuleLoad as *mut c_void),
        ("mgpuModuleLoadJIT", mgpuModuleLoadJIT as *mut c_void),
        ("mgpuModuleUnload", mgpuModuleUnload as *mut c_void),
        (
            "mgpuModuleGetFunction",
            mgpuModuleGetFunction as *mut c_void,
        ),
        ("mgpuLaunchKernel", mgpuLaunchKernel as *mut c_void),
        (
            "mgpuLaunchClusterKernel",
            mgpuLaunchClusterKernel as *mut c_void,
        ),
        ("mgpuStreamCreate", mgpuStreamCreate as *mut c_void),
        ("mgpuStreamDestroy", mgpuStreamDestroy as *mut c_void),
        (
            "mgpuStreamSynchronize",
            mgpuStreamSynchronize as *mut c_void,
        ),
        ("mgpuStreamWaitEvent", mgpuStreamWaitEvent as *mut c_void),
        ("mgpuEventCreate", mgpuEventCreate as *mut c_void),
        ("mgpuEventDestroy", mgpuEventDestroy as *mut c_void),
        ("mgpuEventSynchronize", mgpuEventSynchronize as *mut c_void),
        ("mgpuEventRecord", mgpuEventRecord as *mut c_void),
        ("mgpuMemAlloc", mgpuMemAlloc as *mut c_void),
        ("mgpuMemFree", mgpuMemFree as *mut c_void),
        ("mgpuMemcpy", mgpuMemcpy as *mut c_void),
        ("mgpuMemset32", mgpuMemset32 as *mut c_void),
        ("mgpuMemset16", mgpuMemset16 as *mut c_void),
        ("mgpuMemHostRegister", mgpuMemHostRegister as *mut c_void),
        (
            "mgpuMemHostUnregister",
            mgpuMemHostUnregister as *mut c_void,
        ),
        (
            "mgpuMemHostRegisterMemRef",
            mgpuMemHostRegisterMemRef as *mut c_void,
        ),
        (
            "mgpuMemHostUnregisterMemRef",
            mgpuMemHostUnregisterMemRef as *mut c_void,
        ),
        (
            "mgpuMemGetDeviceMemRef1dFloat",
            mgpuMemGetDeviceMemRef1dFloat as *mut c_void,
        ),
        (
            "mgpuMemGetDeviceMemRef1dInt32",
            mgpuMemGetDeviceMemRef1dInt32 as *mut c_void,
        ),
        ("mgpuSetDefaultDevice", mgpuSetDefaultDevice as *mut c_void),
        ("fillResource1DFloat", fillResource1DFloat as *mut c_void),
        ("fillResource2DFloat", fillResource2DFloat as *mut c_void),
        ("fillResource3DFloat", fillResource3DFloat as *mut c_void),
        ("fillResource1DInt", fillResource1DInt as *mut c_void),
        ("fillResource2DInt", fillResource2DInt as *mut c_void),
        ("fillResource3DInt", fillResource3DInt as *mut c_void),
        ("fillResource1DInt8", fillResource1DInt8 as *mut c_void),
        ("fillResource2DInt8", fillResource2DInt8 as *mut c_void),
        ("fillResource3DInt8", fillResource3DInt8 as *mut c_void),
        ("fillI32Buffer", fillI32Buffer as *mut c_void),
        ("fillF32Buffer1D", fillF32Buffer1D as *mut c_void),
        ("fillF32Buffer2D", fillF32Buffer2D as *mut c_void),
        ("fillF32Buffer3D", fillF32Buffer3D as *mut c_void),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fill_resource_fills_a_strided_view_only() {
        // A 2x3 view with row stride 4 and offset 1 inside 9 elements.
        let mut data = [0i32; 9];
        let base = data.as_mut_ptr();
        // SAFETY: the view's elements (1..4, 5..8) lie in `data`.
        unsafe { fillResource2DInt(base, base, 1, 2, 3, 4, 1, 7) };
        assert_eq!(data, [0, 7, 7, 7, 0, 7, 7, 7, 0]);
        let mut bytes = [0i8; 4];
        let base = bytes.as_mut_ptr();
        // The value arrives in 32 bits whose upper ones are not the caller's to set.
        // SAFETY: 4 elements of `bytes`.
        unsafe { fillResource1DInt8(base, base, 0, 4, 1, 0x1234_56fe) };
        assert_eq!(bytes, [-2; 4]);
    }

    #[test]
    fn a_vulkan_abi_naming_a_missing_kernel_is_refused() {
        let entries = gpu_manifest::VulkanEntries {
            spirv_version: "1.3".into(),
            capabilities: vec!["Shader".into()],
            extensions: vec![],
            kernels: vec![gpu_manifest::VulkanKernel {
                name: "missing".into(),
                workgroup_size: [1, 1, 1],
                workgroup_memory: 0,
                subgroup_size: None,
                bindings: vec![],
            }],
        };
        let error = register_vulkan_object("vulkan1.1", &[1, 2, 3, 4], &[], &entries).unwrap_err();
        assert!(error.message().contains("kernel `missing`"), "{error}");
    }

    #[test]
    fn choosing_the_same_device_again_keeps_the_runtimes_state() {
        use_device(Device::host()).unwrap();
        let pointer = mgpuMemAlloc(64, std::ptr::null_mut(), false);
        assert!(!pointer.is_null());
        use_device(Device::host()).unwrap();
        let known = with_runtime(|runtime, _| Ok(runtime.is_device_memory(pointer as u64)));
        assert_eq!(
            known,
            Ok(true),
            "the allocation is still known after use_device"
        );
        // SAFETY: allocated above, used by nothing.
        unsafe { mgpuMemFree(pointer, std::ptr::null_mut()) };
        let known = with_runtime(|runtime, _| Ok(runtime.is_device_memory(pointer as u64)));
        assert_eq!(known, Ok(false));
    }
}
