//! Host modules handed over as bytes at run time (`mgpuModuleLoad` in a program `gpu-build
//! run` compiled): a `gpu_manifest::host_image`, whose shared library is opened from memory (a
//! memfd: no file is left behind, nothing outlives the process) and whose kernels' entry points
//! are found by the manifest's symbol prefix.

use crate::binary::{HostBlocksEntry, HostEntry, HostKernel};
use crate::error::{Error, ErrorKind, Result};
use gpu_manifest::targets::host as host_abi;
use gpu_manifest::{host_image, Vendor};

/// A loaded host image: its kernels, valid while the library stays open.
pub(crate) struct LoadedImage {
    pub kernels: Vec<HostKernel>,
    _library: libloading::Library,
}

fn invalid(why: String) -> Error {
    Error::new(ErrorKind::NoFittingObject, why)
}

/// Opens the image's library and finds every kernel's entries.
pub(crate) fn load(image: &[u8]) -> Result<LoadedImage> {
    let (manifest, library_bytes) =
        host_image::decode(image).map_err(|e| invalid(e.to_string()))?;
    let module = match manifest.modules.as_slice() {
        [module] => module,
        modules => {
            return Err(invalid(format!(
                "a host image holds one module, this one {}",
                modules.len()
            )))
        }
    };
    let entries = module
        .objects
        .iter()
        .find(|o| o.vendor == Vendor::Host)
        .and_then(|o| o.abi.host())
        .ok_or_else(|| invalid(format!("host image of @{}: no host object", module.name)))?;
    let library = open_from_memory(library_bytes, &module.name)?;
    let mut kernels = Vec::new();
    for kernel in &module.kernels {
        let symbol = |name: String| -> Result<*mut std::ffi::c_void> {
            // SAFETY: looking a symbol up; what it is is checked by its name, which gpu-build
            // gives exactly these entry points (host_abi).
            unsafe { library.get::<*mut std::ffi::c_void>(name.as_bytes()) }
                .map(|s| *s)
                .map_err(|e| {
                    invalid(format!(
                        "host image of @{}: kernel `{}` has no entry `{name}`: {e}",
                        module.name, kernel.name
                    ))
                })
        };
        let thread = symbol(host_abi::thread_entry(&entries.symbol_prefix, &kernel.name))?;
        let blocks = symbol(host_abi::blocks_entry(&entries.symbol_prefix, &kernel.name))?;
        kernels.push(HostKernel {
            // Kernel names live as long as the program: a module's few bytes, even unloaded.
            name: Box::leak(kernel.name.clone().into_boxed_str()),
            // SAFETY: gpu-build's host entry points have exactly these signatures (host_abi).
            thread: unsafe { std::mem::transmute::<*mut std::ffi::c_void, HostEntry>(thread) },
            // SAFETY: as above.
            blocks: unsafe {
                std::mem::transmute::<*mut std::ffi::c_void, HostBlocksEntry>(blocks)
            },
            coroutines: entries.coroutine_kernels.contains(&kernel.name),
            checked: entries.checked,
            parameter_names: Box::leak(
                kernel
                    .parameter_names()
                    .into_iter()
                    .map(|name| &*Box::leak(name.into_boxed_str()))
                    .collect::<Vec<&'static str>>()
                    .into_boxed_slice(),
            ),
        });
    }
    Ok(LoadedImage {
        kernels,
        _library: library,
    })
}

/// `dlopen` of `bytes`, through an anonymous memory file.
#[cfg(target_os = "linux")]
fn open_from_memory(bytes: &[u8], module: &str) -> Result<libloading::Library> {
    use std::io::Write;
    use std::os::fd::FromRawFd;
    let failed = |what: &str, e: &dyn std::fmt::Display| {
        Error::new(
            ErrorKind::Driver,
            format!("loading the host image of @{module}: {what}: {e}"),
        )
    };
    // SAFETY: a NUL-terminated name and valid flags; the descriptor is owned below.
    let fd = unsafe { libc::memfd_create(c"gpu-build-host-module".as_ptr(), libc::MFD_CLOEXEC) };
    if fd < 0 {
        return Err(failed("memfd_create", &std::io::Error::last_os_error()));
    }
    // SAFETY: a descriptor just created and owned by nothing else.
    let mut file = unsafe { std::fs::File::from_raw_fd(fd) };
    file.write_all(bytes)
        .map_err(|e| failed("writing it", &e))?;
    let path = format!("/proc/self/fd/{fd}");
    // SAFETY: the library is gpu-build's host module: its initializers are LLVM's (none that
    // run user code) and it stays open while its kernels are used.
    let library = unsafe {
        libloading::os::unix::Library::open(
            Some(&path),
            libloading::os::unix::RTLD_NOW | libloading::os::unix::RTLD_LOCAL,
        )
    }
    .map_err(|e| failed("dlopen", &e))?;
    // The mapping keeps the library; the file goes with its descriptor.
    drop(file);
    Ok(library.into())
}

#[cfg(not(target_os = "linux"))]
fn open_from_memory(_bytes: &[u8], module: &str) -> Result<libloading::Library> {
    Err(Error::new(
        ErrorKind::Driver,
        format!(
            "loading the host image of @{module}: loading host modules at run time needs Linux"
        ),
    ))
}
