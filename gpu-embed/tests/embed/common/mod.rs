//! Test helpers: probes that run in a child process (so a crash of the code under test fails
//! the probe, not the whole test binary), and a module's tests re-run under valgrind's memcheck
//! (`rerun.rs`).

#![allow(dead_code)] // each test binary uses some of these

mod rerun;
pub use rerun::{in_own_process, memcheck_module, memcheck_module_with, test_name, UNDER_MEMCHECK};

/// Runs `test` on the first Vulkan device (Mesa's lavapipe where there is no GPU) with the
/// Khronos validation layer on, then fails on any warning or error the layer reported; skips,
/// saying so, where no Vulkan device is found, and under memcheck (lavapipe compiles kernels
/// with LLVM at run time: valgrind would spend minutes there, in memory that is not this
/// crate's).
pub fn on_vulkan(test: impl FnOnce(&gpu_embed::Device)) {
    use gpu_embed::{Device, Vendor};
    if std::env::var_os(UNDER_MEMCHECK).is_some() {
        eprintln!("skipped under memcheck: Vulkan");
        return;
    }
    gpu_embed::enable_vulkan_validation();
    let Some(device) = Device::all()
        .into_iter()
        .find(|d| d.vendor() == Vendor::Vulkan)
    else {
        let reason = match Device::gpus() {
            Err(error) => error.to_string(),
            Ok(gpus) => format!("the GPUs found are {gpus:?}"),
        };
        eprintln!("skipped: no Vulkan device: {reason}");
        return;
    };
    test(&device);
    device.synchronize().unwrap();
    let messages = gpu_embed::take_vulkan_validation_messages();
    assert!(
        messages.is_empty(),
        "the validation layer reported:\n{}",
        messages.join("\n")
    );
}

/// An object of `vendor` for `chip` whose target wrote `abi` for its driver (a
/// `gpu_manifest::targets` type), carried as `include_gpu_binary!` embeds it: as text, leaked
/// for the life of the test process as an embedded object's lives.
pub fn object_with_abi(
    vendor: gpu_embed::Vendor,
    chip: &'static str,
    bytes: &'static [u8],
    abi: &impl serde::Serialize,
) -> gpu_embed::Object {
    let text = gpu_manifest::ObjectAbi::encode(abi)
        .and_then(|abi| abi.encoded_text().ok_or_else(|| "not encoded".to_string()))
        .expect("a target ABI encodes");
    gpu_embed::Object::new(vendor, chip, gpu_embed::Format::Bin, bytes)
        .with_abi(Box::leak(text.into_boxed_str()))
}

/// A binary of `objects`, leaked as [`object_with_abi`]'s text is.
pub fn binary(
    name: &'static str,
    objects: Vec<gpu_embed::Object>,
    kernels: &'static [&'static str],
) -> gpu_embed::Binary {
    gpu_embed::Binary::new(name, Box::leak(objects.into_boxed_slice()), kernels)
}
