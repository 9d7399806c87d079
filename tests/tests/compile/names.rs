//! Each target's and driver's knowledge stays in its folder. Outside a target's folder
//! (`gpu-build/src/targets/<name>/`, and its ABI types in `gpu-manifest/src/targets/<name>.rs`),
//! a driver's folder (`gpu-embed/src/driver/<name>/`) and the registries, the code of gpu-build,
//! gpu-embed, gpu-manifest and the macro names no target (`Vendor::Vulkan`), no target's or
//! driver's module (`targets::vulkan`, `driver::cuda`) and no target's ABI type (`VulkanAbi`,
//! `HostEntries`, ...), except where [`ALLOWED`] says why. Comments and a file's
//! `#[cfg(test)]` module are not read. CONTRIBUTING's lists for adding a target and a driver
//! name exactly these places.

use crate::common::workspace;
use std::path::Path;

/// The targets, as `Vendor` names them and as their folders do.
const TARGETS: &[(&str, &str)] = &[
    ("Nvptx", "nvptx"),
    ("Amdgpu", "amdgpu"),
    ("Host", "host"),
    ("Vulkan", "vulkan"),
    ("OpenCl", "opencl"),
];

/// The drivers' folders under `gpu-embed/src/driver/` (`gpu/`: the protocol CUDA and HIP share).
const DRIVERS: &[&str] = &[
    "cuda",
    "hip",
    "gpu",
    "host",
    "vulkan",
    "opencl",
    "level_zero",
];

/// The types of the targets' object ABIs, and the host's kernels as an embedded object holds
/// them.
const ABI_TYPES: &[&str] = &[
    "VulkanAbi",
    "VulkanKernel",
    "VulkanBinding",
    "VulkanBindingKind",
    "VulkanLogEntry",
    "VulkanLogValue",
    "WORKGROUP_SIZE_SPEC_IDS",
    "OpenClAbi",
    "OpenClKernel",
    "OpenClArgument",
    "OpenClArgumentKind",
    "HostEntries",
    "HostKernel",
];

/// The registries: the one place per crate that lists the targets or the drivers.
const REGISTRIES: &[&str] = &[
    "gpu-build/src/targets/mod.rs",
    "gpu-manifest/src/vendor.rs",
    "gpu-manifest/src/targets/mod.rs",
    "gpu-embed/src/driver/mod.rs",
    "gpu-embed/src/driver/registry.rs",
];

/// Everything else that may name a target or a driver, and why.
const ALLOWED: &[(&str, &str)] = &[
    (
        "gpu-build/src/lib.rs",
        "the public constants users read of a target: NVPTX's and AMDGPU's default chips, \
         AMDGPU's default code object ABI",
    ),
    (
        "gpu-build/src/bin/gpu-build/",
        "the command: `run --device cuda|hip|vulkan|opencl|host` runs upstream's host pipeline \
         and runner ABI for the device it names, `inspect` reads cubins' and hsaco's resources",
    ),
    (
        "gpu-manifest/src/abi.rs",
        "ObjectAbi::Host: the one target ABI include_gpu_binary! reads, since the host's entry \
         points become Rust symbols",
    ),
    (
        "gpu-embed-macro/src/abi/host.rs",
        "the macro's declarations of the host's entry points",
    ),
    (
        "gpu-embed/src/binary.rs",
        "an embedded host object holds its linked kernels, as the macro declares them",
    ),
    (
        "gpu-embed/src/lib.rs",
        "public re-exports: the host kernel types the macro's expansion names, Vulkan's \
         validation switches for tests, the host's checked runs' choice of checks",
    ),
    (
        "gpu-embed/src/mgpu/",
        "upstream's runtime ABI: its Vulkan runner passes host memory, which Vulkan launches \
         stage through device memory, and `gpu-build run --check` reads the host's checked-run \
         count",
    ),
];

/// Where `path` (relative to the repository) may name targets and drivers.
fn may_name(path: &str) -> bool {
    let own_folder = TARGETS.iter().any(|(_, folder)| {
        path.starts_with(&format!("gpu-build/src/targets/{folder}/"))
            || path == format!("gpu-manifest/src/targets/{folder}.rs")
    }) || DRIVERS
        .iter()
        .any(|driver| path.starts_with(&format!("gpu-embed/src/driver/{driver}/")));
    own_folder
        || REGISTRIES.contains(&path)
        || ALLOWED.iter().any(|(allowed, _)| path.starts_with(allowed))
}

/// Whether `text` holds `word` as a whole identifier or path (not inside a longer name).
fn holds_word(text: &str, word: &str) -> bool {
    let is_name = |c: char| c.is_alphanumeric() || c == '_';
    text.match_indices(word).any(|(at, _)| {
        let before = text[..at].chars().next_back();
        let after = text[at + word.len()..].chars().next();
        !before.is_some_and(is_name) && !after.is_some_and(is_name)
    })
}

/// The names of targets, drivers and ABI types in one line of code.
fn names_in(line: &str) -> Vec<String> {
    let code = line.split("//").next().unwrap_or("");
    let mut found = Vec::new();
    for (variant, folder) in TARGETS {
        for name in [format!("Vendor::{variant}"), format!("targets::{folder}")] {
            if holds_word(code, &name) {
                found.push(name);
            }
        }
    }
    for driver in DRIVERS {
        let name = format!("driver::{driver}");
        if holds_word(code, &name) {
            found.push(name);
        }
    }
    for ty in ABI_TYPES {
        if holds_word(code, ty) {
            found.push(ty.to_string());
        }
    }
    found
}

/// Every line of the four crates' code outside the places that may name targets, with the
/// names it holds.
fn misplaced(root: &Path) -> Vec<String> {
    let mut found = Vec::new();
    for krate in ["gpu-build", "gpu-embed", "gpu-manifest", "gpu-embed-macro"] {
        for entry in walkdir::WalkDir::new(root.join(krate).join("src")) {
            let path = entry.unwrap().into_path();
            if path.extension().is_none_or(|e| e != "rs") {
                continue;
            }
            let relative = path.strip_prefix(root).unwrap().display().to_string();
            if may_name(&relative) {
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap();
            for (number, line) in text.lines().enumerate() {
                if line.trim_start().starts_with("#[cfg(test)]") {
                    break;
                }
                for name in names_in(line) {
                    found.push(format!("{relative}:{}: {name}", number + 1));
                }
            }
        }
    }
    found
}

#[test]
fn targets_and_drivers_are_named_only_in_their_folders_and_the_registries() {
    let misplaced = misplaced(&workspace());
    assert!(
        misplaced.is_empty(),
        "target or driver names outside their folders and the registries (move the knowledge \
         into the target's or driver's folder, ask the registry, or add the place to ALLOWED \
         with the reason and to CONTRIBUTING's lists):\n{}",
        misplaced.join("\n")
    );
}

#[test]
fn every_allowed_place_still_names_a_target() {
    let root = workspace();
    for (allowed, why) in ALLOWED {
        let path = root.join(allowed);
        let files: Vec<_> = walkdir::WalkDir::new(&path)
            .into_iter()
            .map(|e| e.unwrap().into_path())
            .filter(|p| p.extension().is_some_and(|e| e == "rs"))
            .collect();
        let names = files.iter().any(|file| {
            std::fs::read_to_string(file)
                .unwrap()
                .lines()
                .take_while(|line| !line.trim_start().starts_with("#[cfg(test)]"))
                .any(|line| !names_in(line).is_empty())
        });
        assert!(
            names,
            "{allowed} ({why}) names no target any more: drop it from ALLOWED"
        );
    }
}

#[test]
fn the_scan_finds_names_in_code_and_not_in_longer_names_or_comments() {
    assert_eq!(
        names_in("if vendor == Vendor::Vulkan {"),
        ["Vendor::Vulkan"]
    );
    assert_eq!(
        names_in("use crate::driver::host::HOST; // Vendor::Nvptx"),
        ["driver::host"]
    );
    assert_eq!(
        names_in("let abi: VulkanAbi = object.decode_abi()?;"),
        ["VulkanAbi"]
    );
    assert!(names_in("Vendor::Vulkanish, MyVulkanAbi, driver::hosted").is_empty());
    assert!(names_in("/// `Vendor::Vulkan` in a doc comment").is_empty());
    assert!(may_name("gpu-build/src/targets/vulkan/abi.rs"));
    assert!(may_name("gpu-manifest/src/targets/opencl.rs"));
    assert!(!may_name("gpu-build/src/lower.rs"));
    assert!(!may_name("gpu-embed/src/device/mod.rs"));
}
