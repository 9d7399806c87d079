//! Devices by index, name and UUID: the host and every Vulkan device (lavapipe here) in every
//! `cargo test`; a GPU's UUID is what `nvidia-smi -L` / `rocm-smi` print, with `--ignored`.

use gpu_embed::{Device, ErrorKind};

#[test]
fn every_device_is_found_by_its_index_and_the_host_by_its_name() {
    let all = Device::all();
    for (index, device) in all.iter().enumerate() {
        assert!(Device::by_index(index).unwrap().is_same(device));
    }
    let error = Device::by_index(all.len()).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::NoDevice);
    assert!(error.to_string().contains("host CPU"), "{error}");
    assert!(Device::by_name("HOST cpu")
        .unwrap()
        .is_same(&Device::host()));
    assert_eq!(Device::host().uuid(), None);
    let error = Device::by_name("no such device").unwrap_err();
    assert!(error.to_string().contains("the devices: 0: "), "{error}");
}

#[test]
fn a_vulkan_device_is_found_by_its_name_and_uuid() {
    let Some(vulkan) = gpu_tests::vulkan_devices().into_iter().next() else {
        return;
    };
    let uuid = vulkan.uuid().expect("Vulkan devices have a UUID");
    let text: String = uuid.iter().map(|b| format!("{b:02x}")).collect();
    assert!(Device::by_uuid(&text).unwrap().is_same(&vulkan));
    let dashed = format!(
        "{}-{}-{}-{}-{}",
        &text[..8],
        &text[8..12],
        &text[12..16],
        &text[16..20],
        &text[20..]
    );
    assert!(Device::by_uuid(&dashed).unwrap().is_same(&vulkan));
    if vulkan.name().contains("llvmpipe") {
        assert!(Device::by_name("llvmpipe").unwrap().is_same(&vulkan));
    }
    let error = Device::by_uuid("00000000-0000-0000-0000-000000000000").unwrap_err();
    assert_eq!(error.kind(), ErrorKind::NoDevice);
    assert!(
        error.to_string().contains(&dashed),
        "the listing names each UUID: {error}"
    );
    assert_eq!(
        Device::by_uuid("GPU-12").unwrap_err().kind(),
        ErrorKind::InvalidArgument
    );
}

#[test]
#[ignore = "needs a GPU; run scripts/gpu-tests.sh on a GPU machine"]
fn a_gpu_has_a_uuid_and_is_found_by_it() {
    let gpu = Device::default_gpu().expect("a GPU");
    let uuid = gpu.uuid().expect("CUDA and HIP devices have a UUID");
    let text: String = uuid.iter().map(|b| format!("{b:02x}")).collect();
    println!("{}: GPU-{text}", gpu.name());
    assert!(Device::by_uuid(&format!("GPU-{text}"))
        .unwrap()
        .is_same(&gpu));
}
