//! The drivers by vendor: which drivers discovery asks for devices, and whose chip rules pick a
//! vendor's object. Above the drivers (it calls into each), where `mod.rs` below them holds what
//! they share: the `Driver` trait and its types.

#[cfg(feature = "vulkan")]
use super::vulkan;
use super::{cuda, hip, host, level_zero, opencl, FoundDevice};
use crate::binary::{Object, Vendor};
use crate::error::{Error, Result};

/// Expanded by `include_gpu_binary!` for a gpu.module with objects of a driver behind a feature
/// (`gpu_manifest::Vendor::runtime_feature`): nothing where the driver is compiled in, else a
/// compile error naming the feature, since no device could run them.
#[doc(hidden)]
#[macro_export]
macro_rules! __driver_compiled_in {
    (vulkan, $module:literal) => {
        $crate::__vulkan_driver_compiled_in!($module);
    };
}

#[cfg(feature = "vulkan")]
#[doc(hidden)]
#[macro_export]
macro_rules! __vulkan_driver_compiled_in {
    ($module:literal) => {};
}

#[cfg(not(feature = "vulkan"))]
#[doc(hidden)]
#[macro_export]
macro_rules! __vulkan_driver_compiled_in {
    ($module:literal) => {
        compile_error!(concat!(
            "gpu.module @",
            $module,
            " has Vulkan objects, which only gpu-embed's `vulkan` feature (the Vulkan driver, \
             off by default) runs: enable it (`gpu-embed = { version = \"0.1\", features = \
             [\"vulkan\"] }`), or leave `vulkan` out of `targets`"
        ));
    };
}

/// What one driver found: its devices, its error (it loaded but failed), or why its library did
/// not load.
pub(crate) type Probe = std::result::Result<Result<Vec<FoundDevice>>, String>;

/// Every GPU driver's devices, in the order devices are listed, each with the driver's name:
/// what each driver whose library loaded found (or its error, naming the library), or why its
/// library did not load.
pub(crate) fn find_gpus() -> Vec<(&'static str, Probe)> {
    fn in_library(library: &'static str) -> impl Fn(Error) -> Error {
        move |e| e.map_message(|message| format!("{library}: {message}"))
    }
    #[allow(unused_mut)] // without the Vulkan driver nothing is pushed
    let mut probes = vec![
        (
            "CUDA",
            cuda::driver().map(|driver| driver.devices().map_err(in_library(driver.library))),
        ),
        (
            "HIP",
            hip::driver().map(|driver| driver.devices().map_err(in_library(driver.library))),
        ),
        // Intel GPUs: found and named, not yet used (see `level_zero/`).
        (
            "Level Zero",
            level_zero::driver().map(|driver| driver.devices().map_err(in_library(driver.library))),
        ),
    ];
    #[cfg(feature = "vulkan")]
    probes.push((
        "Vulkan",
        vulkan::driver().map(|driver| driver.devices().map_err(in_library(driver.library))),
    ));
    // The opencl target's objects on OpenCL devices that take SPIR-V.
    probes.push((
        "OpenCL",
        opencl::driver().map(|driver| driver.devices().map_err(in_library(driver.library))),
    ));
    probes
}

/// The host device: the CPU, whose driver is this crate itself.
pub(crate) fn host_device() -> FoundDevice {
    host::HOST.device()
}

/// The devices drivers found and cannot run kernels on, each with the reason (an OpenCL device
/// that takes no SPIR-V, a CUDA device in the prohibited compute mode, one whose properties
/// could not be read), once `find_gpus` ran.
pub(crate) fn passed_over() -> Vec<String> {
    let cuda = cuda::driver()
        .map(|d| d.skipped_devices())
        .unwrap_or_default();
    let hip = hip::driver()
        .map(|d| d.skipped_devices())
        .unwrap_or_default();
    cuda.into_iter()
        .chain(hip)
        .chain(opencl::skipped_devices())
        .collect()
}

/// Of `candidates` (objects of `vendor`), the one for the device's chip `arch`, by the rules of
/// the driver that runs `vendor`'s objects (`driver/<name>/select.rs`).
pub(crate) fn select_for_chip<'b>(
    vendor: Vendor,
    candidates: impl Iterator<Item = &'b Object> + Clone,
    arch: &str,
) -> Option<&'b Object> {
    match vendor {
        Vendor::Nvptx => cuda::select::select(candidates, arch),
        Vendor::Amdgpu => hip::select::select(candidates, arch),
        // Linked into this program, so built for the triple it runs on.
        Vendor::Host => candidates.into_iter().next(),
        #[cfg(feature = "vulkan")]
        Vendor::Vulkan => vulkan::select::select(candidates, arch),
        // No Vulkan driver compiled in: no Vulkan device to select for.
        #[cfg(not(feature = "vulkan"))]
        Vendor::Vulkan => None,
        Vendor::OpenCl => level_zero::select::select(candidates, arch),
    }
}

/// The GPU driver a short name picks (`cuda`, `hip`, `vulkan`, `opencl`: `GPU_MGPU_DEVICE`).
#[cfg_attr(not(feature = "mgpu"), allow(dead_code))]
pub(crate) fn gpu_vendor_named(name: &str) -> Option<Vendor> {
    match name {
        "cuda" => Some(Vendor::Nvptx),
        "hip" => Some(Vendor::Amdgpu),
        "vulkan" => Some(Vendor::Vulkan),
        "opencl" => Some(Vendor::OpenCl),
        _ => None,
    }
}
