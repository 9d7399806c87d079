//! The OpenCL target's objects (OpenCL-style SPIR-V) checked with the Khronos SPIR-V
//! validator (`spirv-val`) under OpenCL's rules, its kernel ABI in the manifest, and the clear
//! error for every kernel it cannot express.

use crate::common::*;
use gpu_build::{ErrorKind, Vendor};
use gpu_manifest::targets::opencl::{OpenClAbi, OpenClArgumentKind};
use std::process::Command;

/// The validator's environment for an object of `chip`: OpenCL 2.2's rules take SPIR-V up to
/// 1.2; newer SPIR-V is checked by its universal rules (spirv-tools has no OpenCL 3.0 rules).
fn environment(chip: &str) -> &'static str {
    match chip {
        "spirv1.0" => "opencl1.2",
        "spirv1.1" | "spirv1.2" => "opencl2.2",
        "spirv1.3" => "spv1.3",
        "spirv1.4" => "spv1.4",
        other => panic!("no validator environment for {other}"),
    }
}

/// `spirv-val --target-env <environment of chip>` on `spirv`: `Err` with its complaint. The one
/// exception: OpenCL's rules take the `Float16` capability (half arithmetic) only from devices
/// with `cl_khr_fp16` and `Int64Atomics` only from devices with `cl_khr_int64_base_atomics`,
/// which the validator cannot be told (the OpenCL driver checks both when the object loads), so
/// an object refused for those alone is checked by its SPIR-V version's universal rules.
pub(crate) fn spirv_val_opencl(spirv: &[u8], chip: &str) -> Result<(), String> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("object.spv");
    std::fs::write(&path, spirv).unwrap();
    let validate = |environment: &str| {
        Command::new("spirv-val")
            .args(["--target-env", environment])
            .arg(&path)
            .output()
            .expect("spirv-val runs (scripts/setup.sh installs spirv-tools)")
    };
    let mut output = validate(environment(chip));
    let device_optional_only = String::from_utf8_lossy(&output.stderr)
        .lines()
        .next()
        .is_some_and(|first| {
            ["Float16", "Int64Atomics"].iter().any(|capability| {
                first.contains(&format!("Capability {capability} is not allowed by OpenCL"))
            })
        });
    if device_optional_only {
        output = validate(&chip.replace("spirv", "spv"));
    }
    if output.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        ))
    }
}

#[test]
fn spirv_val_accepts_every_opencl_object_for_its_spirv_version() {
    let root = workspace();
    // Subgroup operations (tests/kernels/vulkan.mlir's) need SPIR-V 1.3.
    // Each build: its files, how many gpu.modules they hold, the chips.
    let builds: [(&[&str], usize, &[&str]); 2] = [
        (
            // saxpy's and llvm_dialect's kernels are in the LLVM dialect (LLVM's SPIR-V back
            // end; the latter over `!llvm.ptr<1>` with an intrinsic and a loop); block_total's
            // `gpu.all_reduce` is gpu-build's own lowering; math's OpenCL math instructions.
            &[
                "sample-project/kernels/vadd.mlir",
                "sample-project/kernels/reduce.mlir",
                "sample-project/kernels/saxpy.mlir",
                "sample-project/kernels/block_total.mlir",
                "sample-project/kernels/math.mlir",
                "sample-project/kernels/matmul.mlir",
                "sample-project/kernels/stencil.mlir",
                "tests/kernels/llvm_dialect.mlir",
            ],
            8,
            &["spirv1.0", "spirv1.2", "spirv1.3"],
        ),
        // Atomics of every kind, shuffles of every mode.
        (
            &[
                "tests/kernels/vulkan.mlir",
                "tests/kernels/spirv_atomics.mlir",
            ],
            3,
            &["spirv1.3", "spirv1.4"],
        ),
    ];
    let mut checked = Vec::new();
    for (files, modules, chips) in builds {
        let out = tempfile::tempdir().unwrap();
        let mut build = build_in(out.path());
        for file in files {
            build.kernel(root.join(file));
        }
        build.target(Vendor::OpenCl, chips);
        let report = build.compile().unwrap_or_else(|e| panic!("{e}"));
        let objects = objects_of(&report, Vendor::OpenCl);
        assert_eq!(objects.len(), modules * chips.len(), "{files:?}");
        for (object, bytes) in objects {
            spirv_val_opencl(&bytes, &object.chip).unwrap_or_else(|why| {
                panic!(
                    "spirv-val refuses {} for {}: {why}",
                    object.path, object.chip
                )
            });
            let abi: OpenClAbi = object.abi.decode().expect("the OpenCL ABI");
            for capability in ["Addresses", "Kernel"] {
                assert!(abi.capabilities.iter().any(|c| c == capability), "{abi:?}");
            }
            assert!(!abi.capabilities.iter().any(|c| c == "Shader"), "{abi:?}");
            assert_eq!(format!("spirv{}", abi.spirv_version), object.chip);
            checked.push((object, bytes));
        }
    }
    // A check that could never fail would prove nothing: a damaged object is refused.
    let (object, bytes) = &checked[0];
    let mut damaged = bytes.clone();
    damaged[20..24].copy_from_slice(&0xffff_ffffu32.to_le_bytes());
    assert!(spirv_val_opencl(&damaged, &object.chip).is_err());
}

#[test]
fn the_manifest_records_pointers_scalar_widths_and_workgroup_memory() {
    let (report, _dir) = compile_ok(
        "k.mlir",
        &std::fs::read_to_string(workspace().join("tests/kernels/vulkan.mlir")).unwrap(),
        |b| {
            b.target(Vendor::OpenCl, &["spirv1.3"]);
        },
    );
    let object = &report.manifest.modules[0].objects[0];
    assert_eq!(object.chip, "spirv1.3");
    assert_eq!(object.triple, "spirv64-unknown-unknown");
    assert!(object.path.ends_with(".spv"), "{}", object.path);
    let abi: OpenClAbi = object.abi.decode().unwrap();
    assert!(abi.capabilities.iter().any(|c| c == "Int8"), "{abi:?}");
    assert!(!abi.capabilities.iter().any(|c| c == "Float64"), "{abi:?}");
    let kernel = |name: &str| abi.kernels.iter().find(|k| k.name == name).unwrap();
    assert_eq!(kernel("block_max").workgroup_memory, 64 * 4);
    assert_eq!(kernel("scale").workgroup_memory, 0);
    use OpenClArgumentKind::{FirstElement, MemrefSize, Scalar};
    // Each argument with its first lowered parameter (a memref's descriptor is 5 of them).
    let arguments = |name: &str| -> Vec<(usize, OpenClArgumentKind)> {
        kernel(name)
            .arguments
            .iter()
            .map(|a| (a.param, a.kind))
            .collect()
    };
    // (x: memref<?xi8>, y: memref<?xf16>, z: memref<?xi64>, w: i64, n: index): `index` is 64
    // bits wide here, unlike Vulkan's 32.
    assert_eq!(
        arguments("widths"),
        [
            (0, FirstElement { element_bytes: 1 }),
            (5, FirstElement { element_bytes: 2 }),
            (10, FirstElement { element_bytes: 8 }),
            (15, Scalar { bytes: 8 }),
            (16, Scalar { bytes: 8 })
        ]
    );
    // A 3-D memref with every size dynamic, read with memref.dim: its pointer, then each size as
    // a hidden argument, found in the same descriptor.
    assert_eq!(
        arguments("tag_dims"),
        [
            (0, FirstElement { element_bytes: 4 }),
            (0, MemrefSize { dim: 0 }),
            (0, MemrefSize { dim: 1 }),
            (0, MemrefSize { dim: 2 })
        ]
    );
    assert_eq!(
        arguments("scale"),
        [
            (0, FirstElement { element_bytes: 4 }),
            (5, Scalar { bytes: 4 }),
            (6, Scalar { bytes: 8 })
        ]
    );
}

/// Builds `kernel` (one gpu.func inside a module) for OpenCL and returns the error.
fn opencl_error(kernel: &str) -> gpu_build::Error {
    let text = format!("gpu.module @k {{\n{kernel}\n}}\n");
    compile_error("k.mlir", text.as_bytes(), |b| {
        b.target(Vendor::OpenCl, &[]);
    })
}

#[test]
fn kernels_opencl_cannot_express_are_refused_naming_what_and_the_way_around() {
    let cases: [(&str, &[&str]); 7] = [
        (
            "  gpu.func @k(%a: memref<?xi32>) kernel {\n    %c0 = arith.constant 0 : index\n    %v = memref.load %a[%c0] : memref<?xi32>\n    %s = gpu.subgroup_reduce add %v : (i32) -> i32\n    memref.store %s, %a[%c0] : memref<?xi32>\n    gpu.return\n  }",
            &["k.mlir:5:10: error: `gpu.subgroup_reduce` cannot be lowered for opencl (spirv1.0)", "build the module for `spirv1.3`"],
        ),
        (
            "  gpu.func @k(%a: memref<?x?xf32, strided<[?, 1]>>) kernel {\n    gpu.return\n  }",
            &["k.mlir:2:3: error: kernel `k` cannot be built for opencl: argument 0 `%a` (memref<?x?xf32, strided<[?, 1]>>)", "must have the identity layout", "pass the underlying memref"],
        ),
        (
            "  gpu.func @k(%p: !llvm.ptr) kernel {\n    gpu.return\n  }",
            &["argument 0 `%p` (!llvm.ptr)", "pass a memref", "as an `llvm.func`"],
        ),
        (
            "  llvm.func @k(%p: !llvm.ptr) attributes {gpu.kernel} {\n    %c1 = llvm.mlir.constant(1 : i64) : i64\n    %a = llvm.alloca %c1 x f32 : (i64) -> !llvm.ptr\n    llvm.return\n  }",
            &["k.mlir:2:3: error", "`llvm.alloca`"],
        ),
        (
            "  llvm.func @k(%p: !llvm.ptr) attributes {gpu.kernel} {\n    llvm.return\n  }\n  gpu.func @g() kernel {\n    gpu.return\n  }",
            &["mixes `gpu.func` and `llvm.func` kernels", "two gpu.modules"],
        ),
        (
            "  gpu.func @k(%f: memref<?xi1>) kernel {\n    gpu.return\n  }",
            &["cannot take or store `i1`", "use a memref of it as i8 or i32"],
        ),
        (
            "  gpu.func @k(%a: memref<?xi16>) kernel {\n    %c0 = arith.constant 0 : index\n    %one = arith.constant 1 : i16\n    %old = memref.atomic_rmw addi %one, %a[%c0] : (i16, memref<?xi16>) -> i16\n    gpu.return\n  }",
            &["k.mlir:5:12: error", "`memref.atomic_rmw` cannot be lowered for opencl", "an atomic on i16 values"],
        ),
    ];
    for (kernel, expected) in cases {
        let error = opencl_error(kernel);
        let message = error.message();
        for part in expected {
            assert!(message.contains(part), "expected `{part}` in:\n{message}");
        }
        assert!(!message.contains("internal error"), "{message}");
    }
}

#[test]
fn unknown_spirv_versions_are_refused_with_the_known_ones() {
    let error = compile_error(
        "k.mlir",
        b"gpu.module @k {\n  gpu.func @k() kernel {\n    gpu.return\n  }\n}\n",
        |b| {
            b.target(Vendor::OpenCl, &["spirv2.0"]);
        },
    );
    assert_eq!(error.kind(), ErrorKind::InvalidTarget);
    assert!(
        error.message().contains(
            "unknown opencl SPIR-V version `spirv2.0`; use one of spirv1.0, spirv1.1, \
             spirv1.2, spirv1.3, spirv1.4"
        ),
        "{error}"
    );
}

/// LLVM's SPIR-V back end keeps its module analysis in a static, so compilations of
/// LLVM-dialect kernels at the same time in one process must not run it at once: eight builds
/// in parallel threads, each compiling saxpy for three SPIR-V versions, all succeed and give the
/// same bytes.
#[test]
fn llvm_dialect_kernels_compile_in_parallel_builds_of_one_process() {
    let saxpy = workspace().join("sample-project/kernels/saxpy.mlir");
    let builds: Vec<Vec<Vec<u8>>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..8)
            .map(|_| {
                scope.spawn(|| {
                    let out = tempfile::tempdir().unwrap();
                    let mut build = build_in(out.path());
                    build.kernel(&saxpy);
                    build.target(Vendor::OpenCl, &["spirv1.0", "spirv1.2", "spirv1.3"]);
                    let report = build.compile().unwrap_or_else(|e| panic!("{e}"));
                    objects_of(&report, Vendor::OpenCl)
                        .into_iter()
                        .map(|(_, bytes)| bytes)
                        .collect()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for build in &builds {
        assert_eq!(build.len(), 3);
        assert_eq!(build, &builds[0]);
    }
}
