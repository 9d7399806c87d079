//! An object for every GPU a user may have: the sample's `vadd` built for the default NVIDIA and
//! AMD chips (a bare `nvptx` / `amdgpu` target), then, for every chip LLVM 22 knows from sm_75
//! and from gfx900 (`llc-22 -mcpu=help`), at the driver versions selection tells apart, either an
//! object is chosen for it or the error names the chip and the fix in at most three lines. Run
//! with `--nocapture` for the table.

use crate::common::*;
use gpu_build::Vendor;
use gpu_embed::{Binary, DeviceArch, Object};
use gpu_manifest::DriverVersion;
use std::process::Command;

/// The processors `llc-22` lists for `triple`.
fn llc_cpus(triple: &str) -> Vec<String> {
    let output = Command::new("llc-22")
        .args([&format!("-mtriple={triple}"), "-mcpu=help"])
        .output()
        .expect("llc-22 runs (scripts/setup.sh installs it)");
    let text = String::from_utf8_lossy(&output.stderr).into_owned()
        + &String::from_utf8_lossy(&output.stdout);
    text.split("Available CPUs for this target:")
        .nth(1)
        .and_then(|rest| rest.split("Available features").next())
        .expect("llc-22 prints its CPU list")
        .lines()
        .filter_map(|line| line.split_whitespace().next().map(str::to_string))
        .collect()
}

/// The chips a device can report: NVIDIA's from sm_75 without a suffix (a device reports its
/// compute capability), AMD's from gfx900 but the generic processors (no device is one).
fn device_chips() -> Vec<(Vendor, String)> {
    let number =
        |chip: &str, prefix: &str| -> Option<u32> { chip.strip_prefix(prefix)?.parse().ok() };
    let nvidia = llc_cpus("nvptx64-nvidia-cuda")
        .into_iter()
        .filter(|chip| number(chip, "sm_").is_some_and(|n| n >= 75))
        .map(|chip| (Vendor::Nvptx, chip));
    let amd = llc_cpus("amdgcn-amd-amdhsa")
        .into_iter()
        // gfx9xx (the first is gfx900) and gfx1xxx.
        .filter(|chip| chip.starts_with("gfx9") || chip.starts_with("gfx1"))
        .filter(|chip| !chip.ends_with("-generic"))
        .map(|chip| (Vendor::Amdgpu, chip));
    nvidia.chain(amd).collect()
}

/// `vadd` for the default chips (its own target attributes taken out: a bare vendor means
/// the file's chips where it names some), as the runtime embeds it.
fn default_binary() -> &'static Binary {
    let out = tempfile::tempdir().unwrap();
    let source = std::fs::read_to_string(workspace().join("sample-project/kernels/vadd.mlir"))
        .unwrap()
        .replace(
            r#"gpu.module @vadd [#nvvm.target<chip = "sm_80">, #rocdl.target<chip = "gfx90a">]"#,
            "gpu.module @vadd",
        );
    assert!(
        !source.contains("#rocdl.target"),
        "vadd.mlir's targets moved"
    );
    let kernel = out.path().join("vadd.mlir");
    std::fs::write(&kernel, source).unwrap();
    let mut build = build_in(out.path());
    build
        .kernel(&kernel)
        .target(Vendor::Nvptx, &[])
        .target(Vendor::Amdgpu, &[]);
    let report = build.compile().unwrap_or_else(|e| panic!("{e}"));
    let mut objects = Vec::new();
    for vendor in [Vendor::Nvptx, Vendor::Amdgpu] {
        for (object, bytes) in objects_of(&report, vendor) {
            let chip: &'static str = Box::leak(object.chip.clone().into_boxed_str());
            let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
            let embedded = Object::new(vendor, chip, object.format, bytes);
            objects.push(match object.requires {
                Some(requirement) => embedded.requiring(requirement),
                None => embedded,
            });
        }
    }
    let objects: &'static [Object] = Box::leak(objects.into_boxed_slice());
    Box::leak(Box::new(Binary::new("vadd", objects, &["vadd"])))
}

#[test]
fn every_gpu_from_sm_75_and_gfx900_gets_an_object_or_a_three_line_fix() {
    let binary = default_binary();
    let drivers = [
        (
            Vendor::Nvptx,
            DriverVersion::Cuda {
                major: 12,
                minor: 0,
            },
        ),
        (
            Vendor::Nvptx,
            DriverVersion::Cuda {
                major: 12,
                minor: 8,
            },
        ),
        (Vendor::Amdgpu, DriverVersion::Rocm { major: 6, minor: 2 }),
        (Vendor::Amdgpu, DriverVersion::Rocm { major: 6, minor: 3 }),
    ];
    let chips = device_chips();
    for expected in [
        "sm_75", "sm_89", "sm_120", "gfx900", "gfx90a", "gfx90c", "gfx1031",
    ] {
        assert!(
            chips.iter().any(|(_, chip)| chip == expected),
            "{expected} is not among {chips:?}"
        );
    }
    let mut problems = Vec::new();
    let mut chosen_on_new_drivers = 0;
    for (vendor, chip) in &chips {
        for (driver_vendor, driver) in drivers {
            if driver_vendor != *vendor {
                continue;
            }
            let device = DeviceArch {
                vendor: *vendor,
                arch: chip.clone(),
                name: "a GPU".into(),
                driver_version: Some(driver),
            };
            match gpu_embed::select(binary, &device) {
                Ok(object) => {
                    println!("{chip:<10} {driver:<10} {}", object.describe());
                    if matches!(
                        driver,
                        DriverVersion::Cuda { minor: 8, .. } | DriverVersion::Rocm { minor: 3, .. }
                    ) {
                        chosen_on_new_drivers += 1;
                    }
                }
                Err(no_fit) => {
                    let message = no_fit.to_string();
                    println!(
                        "{chip:<10} {driver:<10} none: {}",
                        message.replace('\n', " | ")
                    );
                    let fix = message.lines().last().unwrap_or_default();
                    let names_a_fix =
                        fix.contains(&format!("({chip})")) || fix.contains("update it to ROCm 6.3");
                    if message.lines().count() > 3 || !message.contains(chip) || !names_a_fix {
                        problems.push(format!("{chip} on {driver}:\n{message}"));
                    }
                }
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n\n"));
    // On current drivers every chip but the ones no generic processor covers gets an object:
    // all NVIDIA chips (a cubin of the same major, else the newest PTX), every AMD chip of a
    // generic family, gfx908 and gfx90a.
    let uncovered: Vec<&str> = chips
        .iter()
        .filter(|(vendor, chip)| {
            let driver = match vendor {
                Vendor::Nvptx => DriverVersion::Cuda {
                    major: 12,
                    minor: 8,
                },
                _ => DriverVersion::Rocm { major: 6, minor: 3 },
            };
            let device = DeviceArch {
                vendor: *vendor,
                arch: chip.clone(),
                name: "a GPU".into(),
                driver_version: Some(driver),
            };
            gpu_embed::select(binary, &device).is_err()
        })
        .map(|(_, chip)| chip.as_str())
        .collect();
    assert!(
        uncovered.iter().all(|chip| chip.starts_with("gfx125")),
        "no object for {uncovered:?} on current drivers"
    );
    println!(
        "{chosen_on_new_drivers} of {} chips get an object on CUDA 12.8 / ROCm 6.3; none: \
         {uncovered:?}",
        chips.len()
    );
}
