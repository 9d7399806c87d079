//! What the macro embedded is exactly what gpu-build wrote into OUT_DIR, and the program starts
//! without a GPU driver.

use gpu_embed::{Device, ErrorKind};
use sample_project::BINARIES;

#[test]
fn embedded_bytes_equal_the_files_in_out_dir() {
    let out_dir = std::path::Path::new(env!("OUT_DIR"));
    let manifest = std::fs::read_to_string(out_dir.join("gpu-build/manifest.json")).unwrap();
    let manifest: serde_json::Value = serde_json::from_str(&manifest).unwrap();
    let mut checked = 0;
    for binary in BINARIES {
        let module = manifest["modules"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["name"] == binary.name())
            .unwrap();
        let files = module["objects"].as_array().unwrap();
        assert_eq!(files.len(), binary.objects().len(), "{}", binary.name());
        // The host object's code is linked into the program, not embedded as bytes.
        let gpu_objects = binary
            .objects()
            .iter()
            .zip(files)
            .filter(|(o, _)| o.vendor() != gpu_embed::Vendor::Host);
        for (object, file) in gpu_objects {
            assert_eq!(object.chip(), file["chip"].as_str().unwrap());
            let bytes = std::fs::read(out_dir.join(file["path"].as_str().unwrap())).unwrap();
            assert_eq!(
                object.bytes(),
                bytes.as_slice(),
                "{} {}",
                binary.name(),
                object.describe()
            );
            assert_eq!(
                object.bytes().as_ptr() as usize % 8,
                0,
                "objects are 8-byte aligned"
            );
            checked += 1;
        }
    }
    assert_eq!(
        checked, 56,
        "six GPU objects, a Vulkan object and an OpenCL object for each of seven modules"
    );
    assert_eq!(
        sample_project::math::BINARY.kernels(),
        ["math_f32", "math_f64"]
    );
}

#[test]
fn no_driver_or_no_device_is_an_error_not_a_crash_and_the_host_is_the_fallback() {
    match Device::default_gpu() {
        Ok(device) => println!("a GPU is present: {device:?}"),
        Err(error) => {
            assert!(
                matches!(error.kind(), ErrorKind::NoDriver | ErrorKind::NoDevice),
                "{error}"
            );
            assert!(
                error.message().contains("libcuda.so.1")
                    && error.message().contains("libamdhip64.so"),
                "{error}"
            );
            assert_eq!(Device::default_device().vendor(), gpu_embed::Vendor::Host);
        }
    }
    assert_eq!(
        Device::all().last().map(Device::vendor),
        Some(gpu_embed::Vendor::Host)
    );
}
