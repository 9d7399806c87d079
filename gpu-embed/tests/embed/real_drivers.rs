//! The drivers as they are on this machine. `scripts/setup.sh` installs Debian's real HIP runtime
//! (`libamdhip64.so.5`): it must load through the generated bindings (every entry point
//! resolves) and, on a machine without an AMD GPU, fail in `hipInit` with a clean error, after
//! which the host is the default device (a Vulkan device on the CPU, lavapipe, is listed among
//! the GPUs but never the default).

use gpu_embed::{Device, ErrorKind, Vendor};
use std::path::Path;

#[test]
fn debians_hip_runtime_loads_and_a_machine_without_a_gpu_falls_back_to_the_host() {
    let hip = Path::new("/usr/lib")
        .join(format!("{}-linux-gnu", std::env::consts::ARCH))
        .join("libamdhip64.so.5");
    assert!(
        hip.is_file(),
        "{} is missing; run scripts/setup.sh",
        hip.display()
    );
    if let Ok(gpus) = Device::gpus() {
        assert!(
            !gpus.is_empty(),
            "drivers loaded but reported no device and no error"
        );
        for gpu in gpus {
            let arch = gpu.arch().arch;
            match gpu.vendor() {
                Vendor::Amdgpu => assert!(arch.starts_with("gfx"), "{gpu:?}"),
                // Mesa's lavapipe where there is no GPU (scripts/setup.sh installs it).
                Vendor::Vulkan => assert!(arch.starts_with("vulkan1."), "{gpu:?}"),
                // Intel's CPU Runtime for OpenCL (scripts/setup.sh installs it).
                Vendor::OpenCl => assert!(arch.starts_with("spirv1."), "{gpu:?}"),
                _ => assert!(arch.starts_with("sm_"), "{gpu:?}"),
            }
        }
    }
    // Vulkan devices on the CPU are listed but are no GPU: without a real one, the reasons are
    // HIP's (and CUDA's), and the host is the default device.
    match Device::default_gpu() {
        Ok(gpu) => println!("a GPU is present: {gpu:?}"),
        Err(error) => {
            assert_eq!(error.kind(), ErrorKind::NoDevice, "{error}");
            // Loaded (every entry point resolved), asked for its version (what selection
            // compares code object versions with), which must be the one the library's file
            // is named after (Debian 12's libamdhip64.so.5.2.21153: ROCm 5.2.3), then refused:
            // no AMD GPU here.
            let file = std::fs::canonicalize(&hip).unwrap();
            let file = file.file_name().unwrap().to_string_lossy();
            let version = file.strip_prefix("libamdhip64.so.").unwrap();
            assert!(
                error.message().contains("libamdhip64.so")
                    && error
                        .message()
                        .contains(&format!("HIP {version}: hipInit: ")),
                "{version}: {error}"
            );
            assert_eq!(Device::default_device().vendor(), Vendor::Host);
        }
    }
}

/// Debian's real Level Zero loader (`libze1`, which scripts/setup.sh installs) loads through the
/// generated bindings; on a machine without an Intel GPU driver, discovery names the loader and
/// why it found nothing, and goes on to the next device. Where an Intel GPU is present, it is
/// named but not used: this runtime does not run kernels through Level Zero yet.
#[test]
fn the_level_zero_loader_loads_and_discovery_says_why_it_found_no_device() {
    let loader = Path::new("/usr/lib")
        .join(format!("{}-linux-gnu", std::env::consts::ARCH))
        .join("libze_loader.so.1");
    assert!(
        loader.is_file(),
        "{} is missing; run scripts/setup.sh",
        loader.display()
    );
    match Device::default_gpu() {
        Ok(gpu) => println!("a GPU is present: {gpu:?}"),
        Err(error) => {
            println!("{error}");
            let message = error.message();
            assert!(
                message
                    .contains("libze_loader.so.1: the loader found no Level Zero driver (zeInit: ")
                    || message.contains("libze_loader.so.1: found "),
                "{error}"
            );
            assert_eq!(Device::default_device().vendor(), Vendor::Host);
        }
    }
    // No Level Zero device is ever handed out.
    if let Ok(gpus) = Device::gpus() {
        assert!(gpus.iter().all(|gpu| !gpu.name().contains("Level Zero")));
    }
}
