//! `gpu-build run`: a whole MLIR program (host code and GPU kernels) executed in this process,
//! as upstream's `mlir-runner` does, but with our compiler and runtime and on any device:
//!
//! 1. parse the program; outline `gpu.launch` bodies into `gpu.module`s
//!    (`gpu-kernel-outlining`) where it has them;
//! 2. compile every `gpu.module` with our pipeline for the device (`gpu_build::Build`): a cubin
//!    (or PTX) for CUDA, an hsaco for HIP, a host image (`gpu_build::host_image`) for the host,
//!    SPIR-V for Vulkan (whose kernel ABI from the manifest is registered with the runtime,
//!    `gpu_embed::mgpu::register_object`: the `gpu.binary` carries only the bytes);
//! 3. replace each `gpu.module` by a `gpu.binary` holding that object;
//! 4. lower the host code with MLIR's own passes (`gpu-lower-to-nvvm-pipeline`, whose device
//!    half then has nothing left to do; its host half is `gpu-to-llvm` with the `gpu.binary`
//!    embedding, which calls the `mgpu*` runtime ABI);
//! 5. JIT it with MLIR's ExecutionEngine, with Debian's `libmlir_runner_utils` /
//!    `libmlir_c_runner_utils` for printing and `gpu_embed::mgpu` as the runtime, and call
//!    the entry point;
//! 6. on Vulkan devices under the validation layer (`GPU_EMBED_VULKAN_VALIDATION=1`), fail if
//!    it reported anything.

mod allocation_sites;
mod compare;
mod every_device;
mod kernels;

use gpu_build::Vendor;
use gpu_embed::Device;
use kernels::{compile_kernels, replace_gpu_modules};
use melior::dialect::DialectRegistry;
use melior::ir::attribute::Attribute;
use melior::ir::block::BlockLike;
use melior::ir::operation::{OperationBuilder, OperationLike, OperationMutLike, OperationRefMut};
use melior::ir::{Module, ValueLike};
use melior::pass::PassManager;
use melior::utility::{
    parse_pass_pipeline, register_all_dialects, register_all_llvm_translations, register_all_passes,
};
use melior::{Context, StringRef};
use std::path::{Path, PathBuf};

/// Which device runs the program.
#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub enum DeviceChoice {
    /// The first GPU, else the host.
    Default,
    /// The CPU, through gpu-embed's host device.
    Host,
    /// The first NVIDIA GPU.
    Cuda,
    /// The first AMD GPU.
    Hip,
    /// The first Vulkan device: any maker's GPU, or Mesa's lavapipe on the CPU.
    Vulkan,
    /// The first OpenCL device that takes SPIR-V (the opencl target's objects): an Intel
    /// GPU, or Intel's CPU Runtime for OpenCL.
    Opencl,
    /// Every kind of device found, the host first: the program runs on each (a process
    /// apiece) and each output is compared with the host's (`--tolerance`); the run fails
    /// where one differs, naming the line.
    All,
}

/// What `gpu-build run` was asked.
pub struct RunRequest<'a> {
    pub file: &'a Path,
    pub device: DeviceChoice,
    pub entry_point: &'a str,
    pub shared_libs: &'a [PathBuf],
    pub opt_level: u8,
    /// Write the lowered program here instead of running it (for `mlir-runner` with
    /// `libgpu_mgpu.so`).
    pub emit_mlir: Option<&'a Path>,
    /// Checked host objects (`Build::checked`), with these checks beside the default ones
    /// (`GPU_EMBED_CHECK`'s names): the run fails when they found anything.
    pub checks: Option<&'a str>,
    /// `--device all`: how far, relative to the larger, two numbers in the outputs may be
    /// apart and still agree.
    pub tolerance: f64,
}

/// Runs the program; `Err` says what failed and where.
pub fn run(request: &RunRequest) -> Result<(), String> {
    if let DeviceChoice::All = request.device {
        if request.checks.is_some() || request.emit_mlir.is_some() {
            return Err(
                "--device all compares the outputs of runs: it takes neither --check \
                        (the host alone checks) nor --emit-mlir"
                    .to_string(),
            );
        }
        return every_device::run_on_every_device(request);
    }
    let choice = match request.device {
        // The host device is the one that checks.
        DeviceChoice::Default if request.checks.is_some() => DeviceChoice::Host,
        choice => choice,
    };
    let device = choose_device(choice)?;
    let (vendor, chip) = target_of(&device)?;
    if request.checks.is_some() && vendor != Vendor::Host {
        return Err(format!(
            "--check runs the kernels on the host device, which checks their memory accesses; \
             the {vendor} device does not (use --device host)"
        ));
    }
    if matches!(vendor, Vendor::Vulkan | Vendor::OpenCl) && request.emit_mlir.is_some() {
        let (what, device) = if vendor == Vendor::Vulkan {
            ("a Vulkan device", "vulkan")
        } else {
            ("an OpenCL device", "opencl")
        };
        return Err(format!(
            "--emit-mlir with {what}: the lowered program holds only the kernels' SPIR-V, and \
             the runtime also needs their argument tables, which `gpu-build run` registers in \
             its own process; run it with `gpu-build run --device {device}`"
        ));
    }
    let context = context();
    let module = parse(&context, request.file)?;
    let outlined = has_op(&module, "gpu.launch");
    if outlined {
        run_passes(
            &context,
            &module,
            "builtin.module(gpu-kernel-outlining)",
            "outlining kernels",
        )?;
    }
    let mut objects = Vec::new();
    if has_op(&module, "gpu.module") {
        objects = compile_kernels(&module, request, outlined, vendor, &chip)?;
        replace_gpu_modules(&context, &module, &objects)?;
    }
    if let Some(checks) = request.checks {
        gpu_embed::choose_checks(checks)
            .map_err(|e| e.message().replace("choose_checks: ", "--check="))?;
        allocation_sites::name_allocation_sites(&context, &module)?;
    }
    make_memory_ops_async(&context, &module)?;
    let uses_async = has_op(&module, "async.execute");
    run_passes(
        &context,
        &module,
        &host_pipeline(uses_async),
        "lowering the host code",
    )?;
    if let Some(path) = request.emit_mlir {
        return std::fs::write(path, module.as_operation().to_string())
            .map_err(|e| format!("cannot write {}: {e}", path.display()));
    }
    gpu_embed::mgpu::use_device(device).map_err(|e| e.to_string())?;
    for object in &objects {
        if let Some(abi) = &object.registered {
            gpu_embed::mgpu::register_object(
                abi.vendor,
                &abi.chip,
                &object.bytes,
                &abi.kernels,
                &abi.abi,
            );
        }
    }
    let result = execute(&module, request, uses_async);
    if request.checks.is_some() {
        gpu_embed::mgpu::report_leaks();
    }
    let invalid = gpu_embed::mgpu::check_errors();
    if request.checks.is_some() && invalid > 0 && result.is_ok() {
        return Err(format!(
            "the checked run found {invalid} error{} (reported above)",
            if invalid == 1 { "" } else { "s" }
        ));
    }
    validation_result(result)
}

/// The run's result, failed when the Vulkan validation layer (`GPU_EMBED_VULKAN_VALIDATION=1`)
/// reported anything: its messages go to stderr.
fn validation_result(result: Result<(), String>) -> Result<(), String> {
    let messages = gpu_embed::take_vulkan_validation_messages();
    if messages.is_empty() {
        return result;
    }
    for message in &messages {
        eprintln!("Vulkan validation {message}");
    }
    let failure = format!(
        "the Vulkan validation layer reported {} message{} (above)",
        messages.len(),
        if messages.len() == 1 { "" } else { "s" }
    );
    match result {
        Ok(()) => Err(failure),
        Err(error) => Err(format!("{error}\n{failure}")),
    }
}

fn choose_device(choice: DeviceChoice) -> Result<Device, String> {
    let gpu = |vendor: Vendor, name: &str| {
        let gpus = Device::gpus();
        let found = gpus
            .as_ref()
            .ok()
            .and_then(|gpus| gpus.iter().find(|d| d.vendor() == vendor).cloned());
        found.ok_or_else(|| {
            let why = gpus
                .err()
                .map_or(String::new(), |e| format!(" ({})", e.message()));
            let what = match vendor {
                Vendor::Vulkan => "Vulkan device".to_string(),
                Vendor::OpenCl => "OpenCL device that takes SPIR-V".to_string(),
                _ => format!("{name} GPU"),
            };
            format!("--device {name}: no {what} was found{why} (try --device host)")
        })
    };
    match choice {
        DeviceChoice::Default => Ok(Device::default_device()),
        DeviceChoice::Host => Ok(Device::host()),
        DeviceChoice::Cuda => gpu(Vendor::Nvptx, "cuda"),
        DeviceChoice::Hip => gpu(Vendor::Amdgpu, "hip"),
        DeviceChoice::Vulkan => gpu(Vendor::Vulkan, "vulkan"),
        DeviceChoice::Opencl => gpu(Vendor::OpenCl, "opencl"),
        DeviceChoice::All => Err("--device all names no one device".to_string()),
    }
}

/// The vendor and chip to compile for: the device's own; for Vulkan the target's default
/// version (`vulkan1.1`: SPIR-V 1.3, which every Vulkan device gpu-embed opens runs; newer
/// SPIR-V adds nothing these programs use).
fn target_of(device: &Device) -> Result<(Vendor, String), String> {
    Ok(match device.vendor() {
        Vendor::Host => (Vendor::Host, String::new()),
        Vendor::Vulkan => (
            Vendor::Vulkan,
            Vendor::Vulkan.default_chips()[0].to_string(),
        ),
        vendor => (vendor, device.arch().arch),
    })
}

fn context() -> Context {
    register_all_passes();
    let registry = DialectRegistry::new();
    register_all_dialects(&registry);
    let context = Context::new();
    context.append_dialect_registry(&registry);
    context.load_all_available_dialects();
    register_all_llvm_translations(&context);
    context
}

/// Parses the program from its file, so MLIR's diagnostics name it.
fn parse<'c>(context: &'c Context, file: &Path) -> Result<Module<'c>, String> {
    if !file.is_file() {
        return Err(format!("{}: no such file", file.display()));
    }
    gpu_build::check_mlir_file(file).map_err(|error| error.to_string())?;
    let path = file.to_string_lossy();
    // SAFETY: a live context and a path string that outlives the call.
    let raw = unsafe {
        mlir_sys::mlirModuleCreateParseFromFile(context.to_raw(), StringRef::new(&path).to_raw())
    };
    if raw.ptr.is_null() {
        return Err(format!(
            "{}: MLIR could not parse the program (its diagnostics are above)",
            file.display()
        ));
    }
    // SAFETY: a module just created, owned by the returned value.
    Ok(unsafe { Module::from_raw(raw) })
}

fn has_op(module: &Module, name: &str) -> bool {
    let mut found = false;
    module
        .as_operation()
        .walk(melior::ir::operation::WalkOrder::PreOrder, |op| {
            if op.name().as_string_ref().as_str() == Ok(name) {
                found = true;
            }
            melior::ir::operation::WalkResult::Advance
        });
    found
}

fn run_passes(
    context: &Context,
    module: &Module,
    pipeline: &str,
    what: &str,
) -> Result<(), String> {
    let manager = PassManager::new(context);
    parse_pass_pipeline(manager.as_operation_pass_manager(), pipeline)
        .map_err(|e| format!("internal pass pipeline error ({what}): {e}"))?;
    // SAFETY: the module and the pass manager share `context`.
    let mut module = unsafe { Module::from_raw(module.to_raw()) };
    let result = manager.run(&mut module);
    // The module stays owned by the caller.
    std::mem::forget(module);
    result.map_err(|_| format!("{what} failed (MLIR's diagnostics are above)"))
}

/// The host half of upstream's NVVM pipeline (the device half finds no gpu.module), plus the
/// async dialect's lowering where the program uses it. As upstream, it lowers `gpu.dealloc`,
/// `gpu.memcpy` and `gpu.memset` only in their async form, and `gpu.alloc host_shared` only in
/// its synchronous one.
fn host_pipeline(uses_async: bool) -> String {
    let async_lowering = if uses_async {
        "async-to-async-runtime,async-runtime-ref-counting,convert-async-to-llvm,"
    } else {
        ""
    };
    format!("builtin.module({async_lowering}gpu-lower-to-nvvm-pipeline)")
}

/// Synchronous `gpu.alloc` (device memory), `gpu.memcpy`, `gpu.memset` and `gpu.dealloc`
/// become their async form between a `gpu.wait async` and a `gpu.wait`: `gpu-to-llvm` lowers
/// them only in that form (upstream's pipelines run `gpu-async-region` for it, which would also
/// make `gpu.alloc host_shared` async, a form `gpu-to-llvm` rejects).
fn make_memory_ops_async(context: &Context, module: &Module) -> Result<(), String> {
    let token_type = melior::ir::Type::parse(context, "!gpu.async.token")
        .ok_or("internal error: cannot make an async token type")?;
    let mut synchronous = Vec::new();
    module
        .as_operation()
        .walk(melior::ir::operation::WalkOrder::PreOrder, |op| {
            let name = op
                .name()
                .as_string_ref()
                .as_str()
                .unwrap_or_default()
                .to_string();
            let memory_op = matches!(
                name.as_str(),
                "gpu.alloc" | "gpu.memcpy" | "gpu.memset" | "gpu.dealloc"
            );
            let is_async = op.results().any(|r| r.r#type() == token_type);
            if memory_op && !is_async && !op.has_attribute("hostShared") {
                synchronous.push(op.to_raw());
            }
            melior::ir::operation::WalkResult::Advance
        });
    for raw in synchronous {
        // SAFETY: ops found in the walk above, still alive and not otherwise borrowed.
        let op = unsafe { melior::ir::operation::OperationRef::from_raw(raw) };
        let location = op.location();
        let block = op.block().ok_or("a gpu memory op outside a block")?;
        let wait = OperationBuilder::new("gpu.wait", location)
            .add_results(&[token_type])
            .build()
            .map_err(|e| format!("building gpu.wait: {e}"))?;
        let wait = block.insert_operation_before(op, wait);
        let dependency = wait.result(0).map_err(|e| e.to_string())?;
        let mut operands = vec![melior::ir::Value::from(dependency)];
        operands.extend(op.operands());
        let mut results: Vec<melior::ir::Type> = op.results().map(|r| r.r#type()).collect();
        results.push(token_type);
        let mut attributes = Vec::new();
        for (name, attribute) in op.attributes() {
            let name_text = name
                .as_string_ref()
                .as_str()
                .unwrap_or_default()
                .to_string();
            // gpu.alloc's operand groups: the one dependency, then its sizes and symbols.
            let attribute = if name_text == "operandSegmentSizes" {
                let sizes = attribute
                    .to_string()
                    .replace("array<i32: 0,", "array<i32: 1,");
                Attribute::parse(context, &sizes).ok_or("internal error: operand segments")?
            } else {
                attribute
            };
            attributes.push((name, attribute));
        }
        let op_name = op
            .name()
            .as_string_ref()
            .as_str()
            .unwrap_or_default()
            .to_string();
        let replacement = OperationBuilder::new(&op_name, location)
            .add_operands(&operands)
            .add_results(&results)
            .add_attributes(&attributes)
            .build()
            .map_err(|e| format!("building async {op_name}: {e}"))?;
        let replacement = block.insert_operation_before(op, replacement);
        let token = replacement
            .result(results.len() - 1)
            .map_err(|e| e.to_string())?;
        let done = OperationBuilder::new("gpu.wait", location)
            .add_operands(&[token.into()])
            .build()
            .map_err(|e| format!("building gpu.wait: {e}"))?;
        block.insert_operation_after(replacement, done);
        for (old, new) in op.results().zip(replacement.results()) {
            // SAFETY: two live values of the same type in one block.
            unsafe { mlir_sys::mlirValueReplaceAllUsesOfWith(old.to_raw(), new.to_raw()) };
        }
        // SAFETY: `op` is a live op of this block, without uses now, not used afterwards.
        let mut op = unsafe { OperationRefMut::from_raw(raw) };
        op.remove_from_parent();
        // SAFETY: detached from its block above, owned by nothing else.
        unsafe { mlir_sys::mlirOperationDestroy(raw) };
    }
    if !module.as_operation().verify() {
        return Err(
            "internal error: the program with async memory operations does not verify".into(),
        );
    }
    Ok(())
}

/// Where Debian's LLVM 22 keeps the runner libraries (`libmlir_runner_utils.so`, ...).
fn runner_library(name: &str) -> Result<PathBuf, String> {
    let dirs = [
        std::env::var_os("GPU_BUILD_MLIR_LIB_DIR").map(PathBuf::from),
        Some(PathBuf::from("/usr/lib/llvm-22/lib")),
    ];
    dirs.into_iter()
        .flatten()
        .map(|dir| dir.join(name))
        .find(|path| path.is_file())
        .ok_or_else(|| {
            format!(
                "{name} not found in /usr/lib/llvm-22/lib (install libmlir-22-dev, or point \
                 GPU_BUILD_MLIR_LIB_DIR at the directory holding it)"
            )
        })
}

fn execute(module: &Module, request: &RunRequest, uses_async: bool) -> Result<(), String> {
    let mut libraries = vec![
        runner_library("libmlir_runner_utils.so")?,
        runner_library("libmlir_c_runner_utils.so")?,
    ];
    if uses_async {
        libraries.push(runner_library("libmlir_async_runtime.so")?);
    }
    libraries.extend(request.shared_libs.iter().cloned());
    // NUL-terminated: the engine reads the paths as C strings.
    let paths: Vec<std::ffi::CString> = libraries
        .iter()
        .map(|p| std::ffi::CString::new(p.to_string_lossy().into_owned()))
        .collect::<Result<_, _>>()
        .map_err(|e| format!("a library path with a NUL byte: {e}"))?;
    let refs: Vec<mlir_sys::MlirStringRef> = paths
        .iter()
        .map(|p| mlir_sys::MlirStringRef {
            data: p.as_ptr(),
            length: p.as_bytes().len(),
        })
        .collect();
    // SAFETY: a verified module lowered to the LLVM dialect, and library paths that outlive the
    // call.
    let engine = unsafe {
        mlir_sys::mlirExecutionEngineCreate(
            module.to_raw(),
            i32::from(request.opt_level),
            refs.len() as i32,
            refs.as_ptr(),
            false,
            false,
        )
    };
    if engine.ptr.is_null() {
        return Err(
            "MLIR's ExecutionEngine could not compile the lowered program (its diagnostics are \
             above)"
                .into(),
        );
    }
    for (name, address) in gpu_embed::mgpu::symbols() {
        // SAFETY: a live engine; the symbols are this process's functions.
        unsafe {
            mlir_sys::mlirExecutionEngineRegisterSymbol(
                engine,
                StringRef::new(name).to_raw(),
                address,
            )
        };
    }
    // SAFETY: a live engine: runs the program's constructors (which load its gpu.binary objects).
    unsafe { mlir_sys::mlirExecutionEngineInitialize(engine) };
    // SAFETY: a live engine and a NUL-free name.
    let entry = unsafe {
        mlir_sys::mlirExecutionEngineLookup(engine, StringRef::new(request.entry_point).to_raw())
    };
    let result = if entry.is_null() {
        Err(format!(
            "{}: no function `{}` to run (name another with --entry-point)",
            request.file.display(),
            request.entry_point
        ))
    } else {
        // SAFETY: the entry point of an MLIR program run as mlir-runner's
        // `--entry-point-result=void` runs it: a function without arguments or results.
        let main: extern "C" fn() = unsafe { std::mem::transmute(entry) };
        main();
        Ok(())
    };
    // SAFETY: a live engine, destroyed once: runs the destructors (module unloads).
    unsafe { mlir_sys::mlirExecutionEngineDestroy(engine) };
    flush_c_streams();
    result
}

/// The C library's buffered output (the runner libraries' and kernels' printf).
fn flush_c_streams() {
    extern "C" {
        fn fflush(stream: *mut std::ffi::c_void) -> i32;
    }
    // SAFETY: fflush(NULL) flushes every C output stream.
    unsafe { fflush(std::ptr::null_mut()) };
}
