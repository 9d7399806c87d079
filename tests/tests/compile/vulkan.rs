//! The Vulkan target's objects checked with the Khronos SPIR-V validator (`spirv-val`, from
//! `spirv-tools`) for the Vulkan version each was built for, its kernel ABI in the manifest, and
//! the clear error for every kernel Vulkan cannot express.

use crate::common::*;
use gpu_build::{ErrorKind, Vendor};
use gpu_manifest::targets::vulkan::{VulkanAbi, VulkanBindingKind, WORKGROUP_SIZE_SPEC_IDS};
use std::process::Command;

/// `spirv-val --target-env <chip>` on `spirv`: `Err` with its complaint when it refuses.
pub(crate) fn spirv_val(spirv: &[u8], chip: &str) -> Result<(), String> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("object.spv");
    std::fs::write(&path, spirv).unwrap();
    let output = Command::new("spirv-val")
        .args(["--target-env", chip])
        .arg(&path)
        .output()
        .expect("spirv-val runs (scripts/setup.sh installs spirv-tools)");
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

/// `spirv-dis` of `spirv`, one instruction per line without indentation.
fn disassemble(spirv: &[u8]) -> String {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("object.spv");
    std::fs::write(&path, spirv).unwrap();
    let output = Command::new("spirv-dis")
        .arg("--raw-id")
        .arg(&path)
        .output()
        .expect("spirv-dis runs (scripts/setup.sh installs spirv-tools)");
    assert!(output.status.success(), "{output:?}");
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(str::trim)
        .collect::<Vec<_>>()
        .join("\n")
}

fn vulkan_kernels() -> Vec<std::path::PathBuf> {
    let root = workspace();
    vec![
        root.join("sample-project/kernels/vadd.mlir"),
        root.join("sample-project/kernels/reduce.mlir"),
        root.join("sample-project/kernels/math.mlir"),
        root.join("sample-project/kernels/matmul.mlir"),
        root.join("sample-project/kernels/stencil.mlir"),
        root.join("sample-project/kernels/block_total.mlir"),
        root.join("tests/kernels/vulkan.mlir"),
        root.join("tests/kernels/f64_math.mlir"),
        root.join("tests/kernels/vulkan_extras.mlir"),
        root.join("tests/kernels/mma.mlir"),
        root.join("tests/kernels/llvm_dialect.mlir"),
        root.join("tests/kernels/spirv_atomics.mlir"),
        root.join("tests/kernels/llvm_walk.mlir"),
    ]
}

#[test]
fn spirv_val_accepts_every_vulkan_object_for_its_vulkan_version() {
    let out = tempfile::tempdir().unwrap();
    let mut build = build_in(out.path());
    for kernel in vulkan_kernels() {
        build.kernel(kernel);
    }
    build.target(Vendor::Vulkan, &["vulkan1.1", "vulkan1.2", "vulkan1.3"]);
    let report = build.compile().unwrap_or_else(|e| panic!("{e}"));
    let objects = objects_of(&report, Vendor::Vulkan);
    assert_eq!(
        objects.len(),
        14 * 3,
        "fourteen modules for three Vulkan versions"
    );
    for (object, bytes) in &objects {
        spirv_val(bytes, &object.chip).unwrap_or_else(|why| {
            panic!(
                "spirv-val refuses {} for {}: {why}",
                object.path, object.chip
            )
        });
        let vulkan: VulkanAbi = object.abi.decode().expect("the Vulkan ABI");
        assert!(vulkan.capabilities.contains(&"Shader".to_string()));
    }
    // The workgroup size is specialization constants: the `WorkgroupSize` built-in decorates a
    // composite of them (spirv-val checks the ids), and no `Input` variable is left for it.
    let text = disassemble(&objects[0].1);
    let built_in = text
        .lines()
        .find_map(|l| {
            l.strip_prefix("OpDecorate ")?
                .strip_suffix(" BuiltIn WorkgroupSize")
        })
        .unwrap_or_else(|| panic!("no WorkgroupSize built-in:\n{text}"));
    assert!(
        text.contains(&format!("{built_in} = OpSpecConstantComposite")),
        "{text}"
    );
    for id in WORKGROUP_SIZE_SPEC_IDS {
        assert!(text.contains(&format!("SpecId {id}")), "{id}: {text}");
    }
    // A check that could never fail would prove nothing: a damaged object is refused.
    let (object, bytes) = &objects[0];
    let mut damaged = bytes.clone();
    // The fifth word is the schema (0); the instructions follow. Give the first a bad opcode.
    damaged[20..24].copy_from_slice(&0xffff_ffffu32.to_le_bytes());
    assert!(spirv_val(&damaged, &object.chip).is_err());
}

#[test]
fn the_manifest_records_bindings_workgroup_sizes_and_the_capabilities_used() {
    let (report, _dir) = compile_ok(
        "k.mlir",
        &std::fs::read_to_string(workspace().join("tests/kernels/vulkan.mlir")).unwrap(),
        |b| {
            b.target(Vendor::Vulkan, &[]);
        },
    );
    let module = &report.manifest.modules[0];
    let object = &module.objects[0];
    assert_eq!(object.chip, "vulkan1.1");
    assert!(object.path.ends_with(".spv"), "{}", object.path);
    let vulkan: VulkanAbi = object.abi.decode().unwrap();
    // Only what the kernels use: 8-, 16- and 64-bit values and subgroup arithmetic, not Float64.
    for capability in [
        "Int8",
        "Int64",
        "Float16",
        "StorageBuffer8BitAccess",
        "GroupNonUniformArithmetic",
    ] {
        assert!(
            vulkan.capabilities.iter().any(|c| c == capability),
            "{capability}: {vulkan:?}"
        );
    }
    assert!(
        !vulkan.capabilities.iter().any(|c| c == "Float64"),
        "{vulkan:?}"
    );
    let kernel = |name: &str| vulkan.kernels.iter().find(|k| k.name == name).unwrap();
    assert_eq!(kernel("scale").workgroup_size, Some([128, 1, 1]));
    assert_eq!(kernel("any_block").workgroup_size, None);
    assert_eq!(kernel("scale").subgroup_size, None);
    // Shuffles work on any subgroup size, through workgroup memory for blocks up to 1024.
    assert_eq!(kernel("shuffle_sum").subgroup_size, None);
    assert_eq!(kernel("shuffle_sum").max_block_threads, Some(1024));
    assert_eq!(kernel("block_max").workgroup_memory, 64 * 4);
    let widths = kernel("widths");
    // Each binding with its argument's first lowered parameter (a 1-D memref's descriptor is 5).
    let bindings: Vec<(u32, u32, usize, VulkanBindingKind)> = widths
        .bindings
        .iter()
        .map(|b| (b.set, b.binding, b.param, b.kind))
        .collect();
    let elements = |element_bytes| VulkanBindingKind::Elements {
        rank: 1,
        element_bytes,
    };
    assert_eq!(
        bindings,
        [
            (0, 0, 0, elements(1)),
            (0, 1, 5, elements(2)),
            (0, 2, 10, elements(8)),
            (0, 3, 15, VulkanBindingKind::Scalar { bytes: 8 }),
            // `index` travels as 32 bits.
            (0, 4, 16, VulkanBindingKind::Scalar { bytes: 4 }),
        ]
    );
    // The stubs' parameters are those of every other target: a memref is its descriptor.
    let params: Vec<&str> = module
        .kernels
        .iter()
        .find(|k| k.name == "scale")
        .unwrap()
        .params
        .iter()
        .map(|p| p.llvm_type.as_str())
        .collect();
    assert_eq!(params, ["ptr", "ptr", "i64", "i64", "i64", "float", "i64"]);
}

#[test]
fn memrefs_with_dynamic_inner_sizes_get_their_sizes_as_hidden_bindings() {
    let (report, _dir) = compile_ok(
        "k.mlir",
        &std::fs::read_to_string(workspace().join("sample-project/kernels/stencil.mlir")).unwrap(),
        |b| {
            b.target(Vendor::Vulkan, &[]);
        },
    );
    let object = &report.manifest.modules[0].objects[0];
    let vulkan: VulkanAbi = object.abi.decode().unwrap();
    let jacobi = &vulkan.kernels[0];
    let size = |argument, dim| VulkanBindingKind::MemrefSize {
        argument,
        rank: 2,
        dim,
    };
    // Each with where its memref's descriptor starts among the lowered parameters (7 each).
    let bindings: Vec<(u32, usize, VulkanBindingKind)> = jacobi
        .bindings
        .iter()
        .map(|b| (b.binding, b.param, b.kind))
        .collect();
    let elements = VulkanBindingKind::Elements {
        rank: 2,
        element_bytes: 4,
    };
    assert_eq!(
        bindings,
        [
            (0, 0, elements),
            (1, 7, elements),
            (2, 0, size(0, 0)),
            (3, 0, size(0, 1)),
            (4, 7, size(1, 0)),
            (5, 7, size(1, 1)),
        ]
    );
    // A size read with an index the kernel computes cannot become one argument.
    let error = vulkan_error(
        "  gpu.func @k(%a: memref<?x?xf32>, %d: index) kernel {\n    %n = memref.dim %a, %d : memref<?x?xf32>\n    gpu.return\n  }",
    );
    assert!(
        error
            .message()
            .contains("`memref.dim` of kernel argument 0 with a size index that is not a constant"),
        "{error}"
    );
}

#[test]
fn pointer_arguments_of_llvm_dialect_kernels_are_device_addresses() {
    let (report, _dir) = compile_ok(
        "k.mlir",
        &std::fs::read_to_string(workspace().join("sample-project/kernels/saxpy.mlir")).unwrap(),
        |b| {
            b.target(Vendor::Vulkan, &[]);
        },
    );
    let object = &report.manifest.modules[0].objects[0];
    let vulkan: VulkanAbi = object.abi.decode().unwrap();
    let saxpy = &vulkan.kernels[0];
    let kinds: Vec<(usize, VulkanBindingKind)> =
        saxpy.bindings.iter().map(|b| (b.param, b.kind)).collect();
    assert_eq!(
        kinds,
        [
            (0, VulkanBindingKind::Scalar { bytes: 4 }),
            (1, VulkanBindingKind::Address),
            (2, VulkanBindingKind::Address),
            (3, VulkanBindingKind::Scalar { bytes: 8 }),
        ]
    );
    // Loads and stores through physical storage buffer pointers: the device must have
    // `bufferDeviceAddress`, which the runtime checks from the capability.
    assert!(
        vulkan
            .capabilities
            .iter()
            .any(|c| c == "PhysicalStorageBufferAddresses"),
        "{:?}",
        vulkan.capabilities
    );
}

#[test]
fn a_kernel_vulkan_cannot_express_is_refused_alone_and_its_module_still_builds() {
    let text = "gpu.module @two {
  gpu.func @fine(%a: memref<?xf64>) kernel {
    %i = gpu.global_id x
    %x = memref.load %a[%i] : memref<?xf64>
    %y = math.cos %x : f64
    memref.store %y, %a[%i] : memref<?xf64>
    gpu.return
  }
  gpu.func @bad(%a: memref<?xf64>) kernel {
    %i = gpu.global_id x
    %x = memref.load %a[%i] : memref<?xf64>
    %y = math.atan %x : f64
    memref.store %y, %a[%i] : memref<?xf64>
    gpu.return
  }
}
";
    let (report, dir) = compile_ok("k.mlir", text, |b| {
        b.target(Vendor::Vulkan, &[]);
    });
    let object = &report.manifest.modules[0].objects[0];
    let vulkan: VulkanAbi = object.abi.decode().unwrap();
    let names: Vec<&str> = vulkan.kernels.iter().map(|k| k.name.as_str()).collect();
    assert_eq!(names, ["fine"]);
    let warning = report
        .warnings
        .iter()
        .find(|w| w.contains("kernel `bad` is not built for vulkan"))
        .unwrap_or_else(|| panic!("{:?}", report.warnings));
    assert!(
        warning.contains("k.mlir:12:10: error: `math.atan`"),
        "{warning}"
    );
    // The manifest says which kernel the object leaves out, and why, for the runtime's error.
    assert_eq!(object.refused.len(), 1, "{:?}", object.refused);
    assert_eq!(object.refused[0].name, "bad");
    assert!(
        object.refused[0]
            .reason
            .starts_with("k.mlir:12:10: error: `math.atan`"),
        "{:?}",
        object.refused
    );
    // The object holds `fine` only, and spirv-val accepts it.
    let bytes = std::fs::read(dir.path().join(&object.path)).unwrap();
    spirv_val(&bytes, "vulkan1.1").unwrap();
    // A module whose every kernel fails still fails the build.
    let error = vulkan_error("  gpu.func @k(%a: memref<?xf64>) kernel {\n    %c0 = arith.constant 0 : index\n    %x = memref.load %a[%c0] : memref<?xf64>\n    %y = math.atan %x : f64\n    memref.store %y, %a[%c0] : memref<?xf64>\n    gpu.return\n  }");
    assert!(error.message().contains("`math.atan`"), "{error}");
}

/// Builds `kernel` (one gpu.func inside a module) for Vulkan and returns the error.
fn vulkan_error(kernel: &str) -> gpu_build::Error {
    let text = format!("gpu.module @k {{\n{kernel}\n}}\n");
    compile_error("k.mlir", text.as_bytes(), |b| {
        b.target(Vendor::Vulkan, &[]);
    })
}

#[test]
fn kernels_vulkan_cannot_express_are_refused_naming_what_and_the_way_around() {
    let cases: [(&str, &[&str]); 6] = [
        (
            "  gpu.func @k(%p: !llvm.ptr) kernel attributes {known_block_size = array<i32: 64, 1, 1>} {\n    %c1 = llvm.mlir.constant(1 : i32) : i32\n    %a = llvm.alloca %c1 x f32 : (i32) -> !llvm.ptr\n    gpu.return\n  }",
            &["k.mlir:4:10: error: a Vulkan kernel in the LLVM dialect cannot use `llvm.alloca` here", "write it as a gpu.func with memref arguments"],
        ),
        (
            "  gpu.func @k(%p: !llvm.ptr<3>) kernel attributes {known_block_size = array<i32: 64, 1, 1>} {\n    gpu.return\n  }",
            &["cannot use a pointer to workgroup memory (address space 3)"],
        ),
        (
            "  gpu.func @k(%f: memref<?xi1>) kernel attributes {known_block_size = array<i32: 64, 1, 1>} {\n    gpu.return\n  }",
            &["cannot hold `i1`", "as i32"],
        ),
        (
            "  gpu.func @k(%a: memref<?xindex>) kernel attributes {known_block_size = array<i32: 64, 1, 1>} {\n    gpu.return\n  }",
            &["`index` is 32 bits wide in a Vulkan kernel"],
        ),
        (
            "  gpu.func @k(%a: memref<?xf64>) kernel attributes {known_block_size = array<i32: 64, 1, 1>} {\n    %c0 = arith.constant 0 : index\n    %x = memref.load %a[%c0] : memref<?xf64>\n    %y = math.atan %x : f64\n    memref.store %y, %a[%c0] : memref<?xf64>\n    gpu.return\n  }",
            &["k.mlir:5:10: error: `math.atan` cannot be lowered for vulkan (vulkan1.1)", "16- and 32-bit floats only", "implements exp, exp2, log"],
        ),
        // MLIR 22's verifier accepts a matrix load with more indices than its memref has
        // dimensions; the emulation had no element to address and panicked (found by the fuzzer).
        (
            "  gpu.func @k(%c: memref<16xf32>) kernel attributes {known_block_size = array<i32: 32, 1, 1>} {\n    %c0 = arith.constant 0 : index\n    %m = gpu.subgroup_mma_load_matrix %c[%c0, %c0] {leadDimension = 16 : index} : memref<16xf32> -> !gpu.mma_matrix<16x16xf32, \"COp\">\n    gpu.subgroup_mma_store_matrix %m, %c[%c0] {leadDimension = 16 : index} : !gpu.mma_matrix<16x16xf32, \"COp\">, memref<16xf32>\n    gpu.return\n  }",
            &["k.mlir:4:10: error: `gpu.subgroup_mma_load_matrix` gives 2 indices into `memref<16xf32>`, which has 1 dimensions; give one index per dimension"],
        ),
    ];
    for (kernel, expected) in cases {
        let error = vulkan_error(kernel);
        let message = error.message();
        for part in expected {
            assert!(message.contains(part), "expected `{part}` in:\n{message}");
        }
        assert!(!message.contains("internal error"), "{message}");
    }
}

#[test]
fn unknown_vulkan_versions_and_llvm_ir_are_refused() {
    let error = compile_error(
        "k.mlir",
        b"gpu.module @k {\n  gpu.func @k() kernel attributes {known_block_size = array<i32: 1, 1, 1>} {\n    gpu.return\n  }\n}\n",
        |b| {
            b.target(Vendor::Vulkan, &["vulkan2.0"]);
        },
    );
    assert_eq!(error.kind(), ErrorKind::InvalidTarget);
    assert!(
        error.message().contains(
            "unknown Vulkan version `vulkan2.0`; use one of vulkan1.1, vulkan1.2, vulkan1.3"
        ),
        "{error}"
    );
    let ll =
        "target triple = \"nvptx64-nvidia-cuda\"\ndefine ptx_kernel void @k() {\n  ret void\n}\n";
    let error = compile_error("k.ll", ll.as_bytes(), |b| {
        b.target(Vendor::Vulkan, &[]);
    });
    assert!(
        error
            .message()
            .contains("cannot be compiled for vulkan; only MLIR input"),
        "{error}"
    );
}
