//! The Vulkan driver on the first Vulkan device found (Mesa's lavapipe where there is no GPU:
//! `scripts/setup.sh` installs it), under the Khronos validation layer: every test fails on any
//! warning or error the layer reports. Skipped, visibly, only where no Vulkan device is found.
//!
//! The kernels are `fixtures/vulkan/vadd.mlir`, `widen.mlir` (8-, 16- and 64-bit types) and
//! `scale2d.mlir` (a 2-D grid over a matrix),
//! compiled to SPIR-V by `fixtures/vulkan/regenerate.sh` (MLIR 22's SPIR-V lowering); their
//! binding tables are written here as `include_gpu_binary!` writes them, and launched with the
//! lowered parameters a stub passes.

use crate::common::{binary, object_with_abi};
use gpu_embed::{
    memref_descriptor, Binary, Device, DeviceBuffer, ErrorKind, LaunchConfig, MemrefLayout,
    MemrefType, MemrefView, Object, Queue, Stream, Vendor,
};
use gpu_manifest::targets::vulkan::{VulkanAbi, VulkanBinding, VulkanBindingKind, VulkanKernel};
use std::ffi::c_void;
use std::sync::LazyLock;

/// The function slot of this file's hand-written launches (a stub has its own; one shared
/// by several kernels is found stale and looked up again).
static LAUNCH_SLOT: gpu_embed::FunctionSlot = gpu_embed::FunctionSlot::new();

static VADD_SPIRV: &[u8] = include_bytes!("fixtures/vulkan/vadd.spv");

fn memref(binding: u32, param: usize) -> VulkanBinding {
    memref_of(binding, param, 4)
}

fn memref_of(binding: u32, param: usize, element_bytes: u32) -> VulkanBinding {
    VulkanBinding {
        set: 0,
        binding,
        param,
        kind: VulkanBindingKind::Elements {
            rank: 1,
            element_bytes,
        },
    }
}

fn scalar(binding: u32, param: usize, bytes: u32) -> VulkanBinding {
    VulkanBinding {
        set: 0,
        binding,
        param,
        kind: VulkanBindingKind::Scalar { bytes },
    }
}

/// A Vulkan object of `chip` with one kernel, compiled for `workgroup_size`, whose arguments
/// are bound as `bindings` say.
fn vulkan_object(
    chip: &'static str,
    spirv: &'static [u8],
    capabilities: &[&str],
    name: &str,
    workgroup_size: [u32; 3],
    bindings: Vec<VulkanBinding>,
) -> Object {
    let abi = VulkanAbi {
        spirv_version: "1.3".into(),
        capabilities: capabilities.iter().map(|c| c.to_string()).collect(),
        extensions: Vec::new(),
        kernels: vec![VulkanKernel {
            name: name.into(),
            workgroup_size: Some(workgroup_size),
            workgroup_memory: 0,
            subgroup_size: None,
            max_block_threads: None,
            bindings,
            log: Vec::new(),
        }],
    };
    object_with_abi(Vendor::Vulkan, chip, spirv, &abi)
}

/// `vadd(a, b, c: memref<?xf32>, n: index)`: three descriptors of 5 parameters, then `n`.
fn vadd_bindings() -> Vec<VulkanBinding> {
    vec![memref(0, 0), memref(1, 5), memref(2, 10), scalar(3, 15, 4)]
}

fn vadd_object(chip: &'static str, capabilities: &[&str]) -> Object {
    vulkan_object(
        chip,
        VADD_SPIRV,
        capabilities,
        "vadd",
        [64, 1, 1],
        vadd_bindings(),
    )
}

static VADD: LazyLock<Binary> = LazyLock::new(|| {
    binary(
        "vadd",
        vec![vadd_object("vulkan1.1", &["Shader"])],
        &["vadd"],
    )
});

/// The same SPIR-V claiming a capability no Vulkan device has.
static KERNEL_CAPABILITY: LazyLock<Binary> = LazyLock::new(|| {
    binary(
        "opencl",
        vec![vadd_object("vulkan1.1", &["Shader", "Kernel"])],
        &["vadd"],
    )
});

static WIDEN_SPIRV: &[u8] = include_bytes!("fixtures/vulkan/widen.spv");
/// `widen(a: memref<?xi8>, b: memref<?xi16>, h: memref<?xf16>, w: memref<?xi64>,
/// out: memref<?xf64>, n: index)`.
static WIDEN: LazyLock<Binary> = LazyLock::new(|| {
    let bindings = vec![
        memref_of(0, 0, 1),
        memref_of(1, 5, 2),
        memref_of(2, 10, 2),
        memref_of(3, 15, 8),
        memref_of(4, 20, 8),
        scalar(5, 25, 4),
    ];
    let capabilities = [
        "StorageBuffer8BitAccess",
        "Shader",
        "StorageBuffer16BitAccess",
        "Int64",
        "Float64",
        "Int8",
        "Int16",
        "Float16",
    ];
    let object = vulkan_object(
        "vulkan1.1",
        WIDEN_SPIRV,
        &capabilities,
        "widen",
        [64, 1, 1],
        bindings,
    );
    binary("widen", vec![object], &["widen"])
});

static SCALE2D_SPIRV: &[u8] = include_bytes!("fixtures/vulkan/scale2d.spv");
/// `scale2d(in, out: memref<40x24xf32>, s: f32)`: two rank-2 descriptors of 7 parameters, then
/// `s` (4 bytes).
static SCALE2D: LazyLock<Binary> = LazyLock::new(|| {
    let matrix = |binding, param| VulkanBinding {
        set: 0,
        binding,
        param,
        kind: VulkanBindingKind::Elements {
            rank: 2,
            element_bytes: 4,
        },
    };
    let bindings = vec![matrix(0, 0), matrix(1, 7), scalar(2, 14, 4)];
    let object = vulkan_object(
        "vulkan1.1",
        SCALE2D_SPIRV,
        &["Shader"],
        "scale2d",
        [8, 8, 1],
        bindings,
    );
    binary("scale2d", vec![object], &["scale2d"])
});

/// A binding table naming more lowered parameters than vadd's launch passes.
static OVERLONG: LazyLock<Binary> = LazyLock::new(|| {
    let bindings = vec![memref(0, 0), memref(1, 5), memref(2, 10), memref(3, 14)];
    let object = vulkan_object(
        "vulkan1.1",
        VADD_SPIRV,
        &["Shader"],
        "vadd",
        [64, 1, 1],
        bindings,
    );
    binary("overlong", vec![object], &["vadd"])
});

/// The same SPIR-V for a Vulkan version no device has yet.
static FUTURE: LazyLock<Binary> = LazyLock::new(|| {
    binary(
        "future",
        vec![vadd_object("vulkan9.9", &["Shader"])],
        &["vadd"],
    )
});

use crate::common::{on_vulkan, test_name};

const DYNAMIC_1D: MemrefType<1> = MemrefType {
    shape: [None],
    layout: MemrefLayout::Identity,
};
const STRIDED_1D: MemrefType<1> = MemrefType {
    shape: [None],
    layout: MemrefLayout::Strided {
        strides: [None],
        offset: None,
    },
};

/// Launches `vadd` as its stub would, with the views' descriptors for memrefs of type `ty`.
///
/// # Safety
/// `n` is at most each view's length.
unsafe fn vadd<'q>(
    queue: impl Into<Queue<'q>>,
    config: &LaunchConfig,
    ty: &MemrefType<1>,
    views: [MemrefView<'_, f32, 1>; 3],
    n: i64,
) -> gpu_embed::Result<()> {
    let queue = queue.into();
    let uses = views.map(|view| view.tracked());
    let mut descriptors = Vec::new();
    for (view, name) in views.into_iter().zip(["a", "b", "c"]) {
        descriptors.push(memref_descriptor(view, ty, queue.device(), name)?);
    }
    let mut n = n;
    let mut params: Vec<*mut c_void> = Vec::new();
    for d in &mut descriptors {
        params.push((&mut d.allocated as *mut u64).cast());
        params.push((&mut d.aligned as *mut u64).cast());
        params.push((&mut d.offset as *mut i64).cast());
        params.push(d.sizes.as_mut_ptr().cast());
        params.push(d.strides.as_mut_ptr().cast());
    }
    params.push((&mut n as *mut i64).cast());
    let sizes = vec![8; params.len()];
    // SAFETY: the parameters are vadd's lowered signature; the caller keeps n in bounds.
    unsafe {
        gpu_embed::launch(
            queue,
            &VADD,
            "vadd",
            &LAUNCH_SLOT,
            config,
            &mut params,
            &sizes,
            &uses,
        )
    }
}

fn inputs(n: usize) -> (Vec<f32>, Vec<f32>) {
    let a = (0..n).map(|i| i as f32 * 0.5).collect();
    let b = (0..n).map(|i| 1000.0 - i as f32).collect();
    (a, b)
}

#[test]
fn vadd_matches_the_reference() {
    on_vulkan(|device| {
        for n in [1usize, 63, 64, 1000, 4099] {
            let (a, b) = inputs(n);
            let (da, db) = (
                DeviceBuffer::from_slice(device, &a).unwrap(),
                DeviceBuffer::from_slice(device, &b).unwrap(),
            );
            let dc = DeviceBuffer::<f32>::alloc(device, n).unwrap();
            let views = [
                da.slice(0..n).unwrap(),
                db.slice(0..n).unwrap(),
                dc.slice(0..n).unwrap(),
            ];
            // SAFETY: n elements in each view.
            unsafe {
                vadd(
                    device,
                    &LaunchConfig::for_elements(n, 64),
                    &DYNAMIC_1D,
                    views,
                    n as i64,
                )
            }
            .unwrap();
            let expected: Vec<f32> = a.iter().zip(&b).map(|(x, y)| x + y).collect();
            assert_eq!(dc.to_vec().unwrap(), expected, "n = {n}");
        }
    });
}

/// The same launches bound through a descriptor pool per launch, as on devices without
/// `VK_KHR_push_descriptor`: the test above in a child process that turns push descriptors off.
#[test]
fn vadd_matches_the_reference_without_push_descriptors() {
    const CHILD: &str = "GPU_EMBED_VULKAN_PUSH_DESCRIPTORS";
    if std::env::var_os(CHILD).is_some() {
        return;
    }
    let output = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            test_name(module_path!(), "vadd_matches_the_reference").as_str(),
            &test_name(
                module_path!(),
                "views_bind_where_they_start_or_say_why_they_cannot",
            ),
            &test_name(
                module_path!(),
                "stream_b_reads_what_stream_a_wrote_after_an_event",
            ),
            "--exact",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD, "0")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success() && stdout.contains("3 passed"),
        "without push descriptors ({}):\n{stdout}\n{stderr}",
        output.status
    );
    if stderr.contains("skipped: no Vulkan device") {
        eprintln!("{stderr}");
    }
}

/// Pushes the lowered parameters of a memref descriptor: pointers, offset, sizes, strides.
fn push_descriptor<const N: usize>(
    params: &mut Vec<*mut c_void>,
    d: &mut gpu_embed::MemrefDescriptor<N>,
) {
    params.push((&mut d.allocated as *mut u64).cast());
    params.push((&mut d.aligned as *mut u64).cast());
    params.push((&mut d.offset as *mut i64).cast());
    for size in &mut d.sizes {
        params.push((size as *mut i64).cast());
    }
    for stride in &mut d.strides {
        params.push((stride as *mut i64).cast());
    }
}

#[test]
fn eight_sixteen_and_sixty_four_bit_types_where_the_device_has_them() {
    on_vulkan(|device| {
        let n = 1000usize;
        let a: Vec<i8> = (0..n).map(|i| (i % 256) as u8 as i8).collect();
        let b: Vec<i16> = (0..n).map(|i| (i as i16).wrapping_mul(97)).collect();
        let h: Vec<gpu_embed::f16> = (0..n)
            .map(|i| gpu_embed::f16::from_f32(i as f32 * 0.25 - 100.0))
            .collect();
        let w: Vec<i64> = (0..n).map(|i| i as i64 * 1_000_003 - 7).collect();
        let (da, db, dh, dw) = (
            DeviceBuffer::from_slice(device, &a).unwrap(),
            DeviceBuffer::from_slice(device, &b).unwrap(),
            DeviceBuffer::from_slice(device, &h).unwrap(),
            DeviceBuffer::from_slice(device, &w).unwrap(),
        );
        let out = DeviceBuffer::<f64>::alloc(device, n).unwrap();
        let mut descriptors = (
            memref_descriptor(da.slice(0..n).unwrap(), &DYNAMIC_1D, device, "a").unwrap(),
            memref_descriptor(db.slice(0..n).unwrap(), &DYNAMIC_1D, device, "b").unwrap(),
            memref_descriptor(dh.slice(0..n).unwrap(), &DYNAMIC_1D, device, "h").unwrap(),
            memref_descriptor(dw.slice(0..n).unwrap(), &DYNAMIC_1D, device, "w").unwrap(),
            memref_descriptor(out.slice(0..n).unwrap(), &DYNAMIC_1D, device, "out").unwrap(),
        );
        let mut count = n as i64;
        let mut params = Vec::new();
        push_descriptor(&mut params, &mut descriptors.0);
        push_descriptor(&mut params, &mut descriptors.1);
        push_descriptor(&mut params, &mut descriptors.2);
        push_descriptor(&mut params, &mut descriptors.3);
        push_descriptor(&mut params, &mut descriptors.4);
        params.push((&mut count as *mut i64).cast());
        let sizes = vec![8; params.len()];
        let config = LaunchConfig::for_elements(n, 64);
        let uses = [
            da.slice(0..n).unwrap().tracked(),
            db.slice(0..n).unwrap().tracked(),
            dh.slice(0..n).unwrap().tracked(),
            dw.slice(0..n).unwrap().tracked(),
            out.slice(0..n).unwrap().tracked(),
        ];
        // SAFETY: widen's lowered parameters; n elements in every view.
        let launched = unsafe {
            gpu_embed::launch(
                device.into(),
                &WIDEN,
                "widen",
                &LAUNCH_SLOT,
                &config,
                &mut params,
                &sizes,
                &uses,
            )
        };
        if let Err(error) = &launched {
            // A device without the features says which; lavapipe has them all.
            assert_eq!(error.kind(), ErrorKind::NotSupported, "{error}");
            assert!(!device.name().contains("llvmpipe"), "{error}");
            eprintln!("skipped: {error}");
            return;
        }
        let expected: Vec<f64> = (0..n)
            .map(|i| {
                f64::from(a[i]) + f64::from(b[i]) * f64::from(h[i].to_f32()) + (w[i] * w[i]) as f64
            })
            .collect();
        assert_eq!(out.to_vec().unwrap(), expected);
    });
}

/// Launches `scale2d` over `input` into `output` (each 40x24) with factor `s`.
fn scale2d(
    device: &Device,
    ty: &MemrefType<2>,
    input: MemrefView<'_, f32, 2>,
    output: MemrefView<'_, f32, 2>,
    s: f32,
) -> gpu_embed::Result<()> {
    let uses = [input.tracked(), output.tracked()];
    let mut descriptors = (
        memref_descriptor(input, ty, device, "in")?,
        memref_descriptor(output, ty, device, "out")?,
    );
    let mut s = s;
    let mut params = Vec::new();
    push_descriptor(&mut params, &mut descriptors.0);
    push_descriptor(&mut params, &mut descriptors.1);
    params.push((&mut s as *mut f32).cast());
    let mut sizes = vec![8; params.len()];
    sizes[14] = 4;
    let config = LaunchConfig {
        grid: [3, 5, 1],
        block: [8, 8, 1],
        shared_mem_bytes: 0,
    };
    // SAFETY: scale2d's lowered parameters; both views are 40x24 (checked against the type).
    unsafe {
        gpu_embed::launch(
            device.into(),
            &SCALE2D,
            "scale2d",
            &LAUNCH_SLOT,
            &config,
            &mut params,
            &sizes,
            &uses,
        )
    }
}

#[test]
fn a_two_dimensional_grid_over_matrices_and_their_row_blocks() {
    on_vulkan(|device| {
        const ROWS: usize = 40;
        const COLUMNS: usize = 24;
        let identity = MemrefType {
            shape: [Some(ROWS as u64), Some(COLUMNS as u64)],
            layout: MemrefLayout::Identity,
        };
        let strided = MemrefType {
            shape: [Some(ROWS as u64), Some(COLUMNS as u64)],
            layout: MemrefLayout::Strided {
                strides: [None, None],
                offset: None,
            },
        };
        // 48 rows: the kernel's 40 start at row 8 (byte 768, a multiple of every alignment).
        let data: Vec<f32> = (0..48 * COLUMNS).map(|k| k as f32 * 0.5).collect();
        let input = DeviceBuffer::from_slice(device, &data).unwrap();
        let output = DeviceBuffer::<f32>::alloc(device, 48 * COLUMNS).unwrap();
        let expected = |first_row: usize| -> Vec<f32> {
            let mut all = vec![0.0; 48 * COLUMNS];
            for i in 0..ROWS {
                for j in 0..COLUMNS {
                    let k = (first_row + i) * COLUMNS + j;
                    all[k] = data[k] * 3.0 + i as f32;
                }
            }
            all
        };
        scale2d(
            device,
            &identity,
            input.view([ROWS, COLUMNS]).unwrap(),
            output.view([ROWS, COLUMNS]).unwrap(),
            3.0,
        )
        .unwrap();
        assert_eq!(output.to_vec().unwrap(), expected(0));

        let mut cleared = DeviceBuffer::<f32>::alloc(device, 48 * COLUMNS).unwrap();
        for ty in [&identity, &strided] {
            cleared.fill(0.0).unwrap();
            let rows = |buffer| {
                DeviceBuffer::strided_view(buffer, 8 * COLUMNS, [ROWS, COLUMNS], [COLUMNS, 1])
                    .unwrap()
            };
            scale2d(device, ty, rows(&input), rows(&cleared), 3.0).unwrap();
            assert_eq!(cleared.to_vec().unwrap(), expected(8));
        }

        // Column-major: not one row-major range.
        let transposed = input.strided_view(0, [ROWS, COLUMNS], [1, ROWS]).unwrap();
        let error = scale2d(
            device,
            &strided,
            transposed,
            output.view([ROWS, COLUMNS]).unwrap(),
            3.0,
        )
        .unwrap_err();
        assert_eq!(error.kind(), ErrorKind::InvalidArgument);
        assert!(
            error
                .message()
                .contains("binding 0: a view with sizes [40, 24] and strides [1, 40]"),
            "{error}"
        );
    });
}

#[test]
fn threads_share_the_device() {
    on_vulkan(|device| {
        std::thread::scope(|scope| {
            for thread in 0..4 {
                scope.spawn(move || {
                    let stream = device.create_stream().unwrap();
                    for round in 0..20 {
                        let n = 100 + 37 * thread + round;
                        let (a, b) = inputs(n);
                        let (da, db) = (
                            DeviceBuffer::from_slice(device, &a).unwrap(),
                            DeviceBuffer::from_slice(device, &b).unwrap(),
                        );
                        let dc = DeviceBuffer::<f32>::alloc(device, n).unwrap();
                        let config = LaunchConfig::for_elements(n, 64);
                        // Half the launches on the default stream.
                        let queue = if round % 2 == 0 {
                            Queue::Stream(&stream)
                        } else {
                            Queue::Default(device)
                        };
                        let views = [
                            da.slice(0..n).unwrap(),
                            db.slice(0..n).unwrap(),
                            dc.slice(0..n).unwrap(),
                        ];
                        // SAFETY: n elements in each view.
                        unsafe { vadd(queue, &config, &DYNAMIC_1D, views, n as i64) }.unwrap();
                        // In odd rounds the copy runs on another stream than the launch: the
                        // default stream's rule orders it (a stream's work waits for the
                        // default stream's earlier work).
                        let mut out = vec![0.0; n];
                        stream.copy_to_host(&mut out, &dc).unwrap();
                        let expected: Vec<f32> = a.iter().zip(&b).map(|(x, y)| x + y).collect();
                        assert_eq!(out, expected, "thread {thread}, round {round}");
                    }
                });
            }
        });
    });
}

#[test]
fn views_bind_where_they_start_or_say_why_they_cannot() {
    on_vulkan(|device| {
        let (a, b) = inputs(300);
        let (da, db) = (
            DeviceBuffer::from_slice(device, &a).unwrap(),
            DeviceBuffer::from_slice(device, &b).unwrap(),
        );
        let dc = DeviceBuffer::<f32>::alloc(device, 300).unwrap();
        // Element 64 is byte 256: a multiple of every device's storage buffer alignment.
        let n = 200;
        let views = [
            da.slice(64..64 + n).unwrap(),
            db.slice(0..n).unwrap(),
            dc.slice(64..64 + n).unwrap(),
        ];
        for ty in [&DYNAMIC_1D, &STRIDED_1D] {
            // SAFETY: n elements in each view.
            unsafe {
                vadd(
                    device,
                    &LaunchConfig::for_elements(n, 64),
                    ty,
                    views,
                    n as i64,
                )
            }
            .unwrap();
            let c = dc.to_vec().unwrap();
            assert!(c[..64].iter().all(|&x| x == 0.0));
            for i in 0..n {
                assert_eq!(c[64 + i], a[64 + i] + b[i], "element {i}");
            }
            assert!(c[64 + n..].iter().all(|&x| x == 0.0));
        }

        // A view starting one element in: 4 bytes past an aligned start.
        let misaligned = [
            da.slice(1..1 + n).unwrap(),
            db.slice(0..n).unwrap(),
            dc.slice(0..n).unwrap(),
        ];
        let alignment_error = |ty| {
            // SAFETY: n elements in each view.
            unsafe {
                vadd(
                    device,
                    &LaunchConfig::for_elements(n, 64),
                    ty,
                    misaligned,
                    n as i64,
                )
            }
            .unwrap_err()
        };
        for ty in [&DYNAMIC_1D, &STRIDED_1D] {
            let error = alignment_error(ty);
            assert_eq!(error.kind(), ErrorKind::InvalidArgument);
            assert!(
                error
                    .message()
                    .contains("binding 0: a view starting at byte offset 4 of its buffer"),
                "{error}"
            );
            assert!(
                error
                    .message()
                    .contains("binds storage buffers at multiples of"),
                "{error}"
            );
        }

        // Every other element: not one contiguous range.
        let strided = da.strided_view(0, [100], [2]).unwrap();
        let views = [
            strided,
            db.slice(0..100).unwrap(),
            dc.slice(0..100).unwrap(),
        ];
        // SAFETY: 100 elements in each view.
        let error = unsafe {
            vadd(
                device,
                &LaunchConfig::for_elements(100, 64),
                &STRIDED_1D,
                views,
                100,
            )
        }
        .unwrap_err();
        assert_eq!(error.kind(), ErrorKind::InvalidArgument);
        assert!(error.message().contains("binding 0"), "{error}");
        assert!(
            error
                .message()
                .contains("Vulkan binds a memref as one contiguous range"),
            "{error}"
        );

        // Views without elements bind a placeholder; nothing is read or written.
        let views = [
            da.slice(0..0).unwrap(),
            db.slice(0..0).unwrap(),
            dc.slice(0..0).unwrap(),
        ];
        // SAFETY: n = 0.
        unsafe {
            vadd(
                device,
                &LaunchConfig::for_elements(1, 64),
                &DYNAMIC_1D,
                views,
                0,
            )
        }
        .unwrap();
    });
}

#[test]
fn launches_the_kernel_was_not_built_for_are_errors() {
    on_vulkan(|device| {
        let n = 128;
        let (a, b) = inputs(n);
        let (da, db) = (
            DeviceBuffer::from_slice(device, &a).unwrap(),
            DeviceBuffer::from_slice(device, &b).unwrap(),
        );
        let dc = DeviceBuffer::<f32>::alloc(device, n).unwrap();
        let views = [
            da.slice(0..n).unwrap(),
            db.slice(0..n).unwrap(),
            dc.slice(0..n).unwrap(),
        ];

        // SAFETY: n elements in each view.
        let error = unsafe {
            vadd(
                device,
                &LaunchConfig::for_elements(n, 128),
                &DYNAMIC_1D,
                views,
                n as i64,
            )
        }
        .unwrap_err();
        assert_eq!(error.kind(), ErrorKind::InvalidArgument);
        assert!(
            error.message().contains(
                "kernel `vadd` was compiled for workgroup size [64, 1, 1] on vulkan (its \
                 `known_block_size`); launch it with that block size"
            ),
            "{error}"
        );

        let mut shared = LaunchConfig::for_elements(n, 64);
        shared.shared_mem_bytes = 1024;
        // SAFETY: n elements in each view.
        let error = unsafe { vadd(device, &shared, &DYNAMIC_1D, views, n as i64) }.unwrap_err();
        assert_eq!(error.kind(), ErrorKind::InvalidArgument);
        assert!(error.message().contains("dynamic shared memory"), "{error}");

        // An index that does not fit the kernel's 32-bit integer (the kernel would read none of
        // it: the error comes first).
        let too_big = 1i64 << 40;
        // SAFETY: refused before it runs.
        let error = unsafe {
            vadd(
                device,
                &LaunchConfig::for_elements(n, 64),
                &DYNAMIC_1D,
                views,
                too_big,
            )
        }
        .unwrap_err();
        assert_eq!(error.kind(), ErrorKind::InvalidArgument);
        assert!(
            error
                .message()
                .contains(&format!("binding 3: the value {too_big} does not fit")),
            "{error}"
        );

        // Nothing ran: c is still zero.
        assert!(dc.to_vec().unwrap().iter().all(|&x| x == 0.0));
    });
}

#[test]
fn objects_the_device_cannot_run_are_refused_by_name() {
    on_vulkan(|device| {
        let n = 64;
        let buffer = DeviceBuffer::<f32>::alloc(device, n).unwrap();
        let mut descriptor =
            memref_descriptor(buffer.slice(0..n).unwrap(), &DYNAMIC_1D, device, "x").unwrap();
        let mut count = n as i64;
        let mut params: Vec<*mut c_void> = Vec::new();
        for _ in 0..3 {
            params.push((&mut descriptor.allocated as *mut u64).cast());
            params.push((&mut descriptor.aligned as *mut u64).cast());
            params.push((&mut descriptor.offset as *mut i64).cast());
            params.push(descriptor.sizes.as_mut_ptr().cast());
            params.push(descriptor.strides.as_mut_ptr().cast());
        }
        params.push((&mut count as *mut i64).cast());
        let sizes = vec![8; params.len()];
        let config = LaunchConfig::for_elements(n, 64);
        // SAFETY: refused before anything runs.
        let error = unsafe {
            gpu_embed::launch(
                device.into(),
                &KERNEL_CAPABILITY,
                "vadd",
                &LAUNCH_SLOT,
                &config,
                &mut params,
                &sizes,
                &[],
            )
        }
        .unwrap_err();
        assert_eq!(error.kind(), ErrorKind::NotSupported);
        assert!(
            error.message().contains("SPIR-V capability Kernel"),
            "{error}"
        );
        // SAFETY: as above.
        let error = unsafe {
            gpu_embed::launch(
                device.into(),
                &FUTURE,
                "vadd",
                &LAUNCH_SLOT,
                &config,
                &mut params,
                &sizes,
                &[],
            )
        }
        .unwrap_err();
        assert_eq!(error.kind(), ErrorKind::NoFittingObject);
        assert!(error.message().contains("vulkan9.9"), "{error}");
        // SAFETY: as above.
        let error = unsafe {
            gpu_embed::launch(
                device.into(),
                &OVERLONG,
                "vadd",
                &LAUNCH_SLOT,
                &config,
                &mut params,
                &sizes,
                &[],
            )
        }
        .unwrap_err();
        assert_eq!(error.kind(), ErrorKind::InvalidArgument);
        assert!(
            error.message().contains(
                "binding 3: a memref of rank 1 from lowered parameter 14, but the launch passes 16"
            ),
            "{error}"
        );
    });
}

#[test]
fn a_freed_address_is_an_error_not_a_crash() {
    on_vulkan(|device| {
        let n = 64;
        let buffer = DeviceBuffer::from_slice(device, &vec![1.0f32; n]).unwrap();
        let mut descriptor =
            memref_descriptor(buffer.slice(0..n).unwrap(), &DYNAMIC_1D, device, "x").unwrap();
        let raw = buffer.into_raw();
        // SAFETY: the allocation `into_raw` gave up; dropping frees it.
        drop(unsafe { DeviceBuffer::<f32>::from_raw_parts(device, raw, n) });
        let mut count = n as i64;
        let mut params: Vec<*mut c_void> = Vec::new();
        for _ in 0..3 {
            params.push((&mut descriptor.allocated as *mut u64).cast());
            params.push((&mut descriptor.aligned as *mut u64).cast());
            params.push((&mut descriptor.offset as *mut i64).cast());
            params.push(descriptor.sizes.as_mut_ptr().cast());
            params.push(descriptor.strides.as_mut_ptr().cast());
        }
        params.push((&mut count as *mut i64).cast());
        let sizes = vec![8; params.len()];
        // SAFETY: the address is stale on purpose: the driver must refuse it.
        let error = unsafe {
            gpu_embed::launch(
                device.into(),
                &VADD,
                "vadd",
                &LAUNCH_SLOT,
                &LaunchConfig::for_elements(n, 64),
                &mut params,
                &sizes,
                &[],
            )
        }
        .unwrap_err();
        assert_eq!(error.kind(), ErrorKind::InvalidArgument);
        assert!(
            error.message().contains("is not in any live allocation"),
            "{error}"
        );

        // Copies through the stale address too.
        // SAFETY: breaks `from_raw_parts`' contract on purpose (the memory was freed): the
        // driver checks every address against its allocation table.
        let stale = unsafe { DeviceBuffer::<f32>::from_raw_parts(device, raw, n) };
        let error = stale.to_vec().unwrap_err();
        assert_eq!(error.kind(), ErrorKind::InvalidArgument);
        assert!(
            error.message().contains("is not in any live allocation"),
            "{error}"
        );
        // Never freed twice: forget the stale buffer.
        let _ = stale.into_raw();
    });
}

#[test]
fn stream_b_reads_what_stream_a_wrote_after_an_event() {
    on_vulkan(|device| {
        let (a, b): (Stream, Stream) = (
            device.create_stream().unwrap(),
            device.create_stream().unwrap(),
        );
        let n = 1 << 16;
        let (x, y) = inputs(n);
        let (dx, dy) = (
            DeviceBuffer::from_slice(device, &x).unwrap(),
            DeviceBuffer::from_slice(device, &y).unwrap(),
        );
        let sum = DeviceBuffer::<f32>::alloc(device, n).unwrap();
        let copy = DeviceBuffer::<f32>::alloc(device, n).unwrap();
        let filled = DeviceBuffer::<u32>::alloc(device, n).unwrap();
        let filled_copy = DeviceBuffer::<u32>::alloc(device, n).unwrap();
        let written = device.create_event().unwrap();
        for round in 0..3u32 {
            a.fill(&filled, round + 7).unwrap();
            let config = LaunchConfig::for_elements(n, 64);
            let views = [
                dx.slice(0..n).unwrap(),
                dy.slice(0..n).unwrap(),
                sum.slice(0..n).unwrap(),
            ];
            // SAFETY: n elements in each view.
            unsafe { vadd(&a, &config, &DYNAMIC_1D, views, n as i64) }.unwrap();
            a.record(&written).unwrap();
            b.wait(&written).unwrap();
            b.copy(&copy, &sum).unwrap();
            b.copy(&filled_copy, &filled).unwrap();
            b.synchronize().unwrap();
            assert!(written.query().unwrap());
            let expected: Vec<f32> = x.iter().zip(&y).map(|(p, q)| p + q).collect();
            assert_eq!(copy.to_vec().unwrap(), expected);
            assert!(filled_copy
                .to_vec()
                .unwrap()
                .iter()
                .all(|&v| v == round + 7));
        }
        let never = device.create_event().unwrap();
        assert!(
            never.query().unwrap(),
            "an event never recorded counts as complete"
        );
        never.synchronize().unwrap();
        b.wait(&never).unwrap();
        b.synchronize().unwrap();
        let error = never.elapsed_ms(&written).unwrap_err();
        assert_eq!(error.kind(), ErrorKind::InvalidArgument);
        assert!(error.message().contains("never recorded"), "{error}");
    });
}

#[test]
fn async_copies_and_fills_of_unaligned_ranges() {
    on_vulkan(|device| {
        let stream = device.create_stream().unwrap();
        let n = 1001;
        let mut bytes = vec![0u8; n];
        let buffer = DeviceBuffer::<u8>::alloc(device, n).unwrap();
        // Fills of every alignment and length around a word.
        for (start, end, value) in [
            (0, n, 0x11),
            (1, 2, 0x22),
            (3, 10, 0x33),
            (5, 999, 0x44),
            (998, 1001, 0x55),
            (4, 8, 0x66),
        ] {
            stream
                .fill(&buffer.slice(start..end).unwrap(), value)
                .unwrap();
            bytes[start..end].fill(value);
        }
        let mut out = vec![0u8; n];
        stream.copy_to_host(&mut out, &buffer).unwrap();
        assert_eq!(out, bytes);

        let halves = DeviceBuffer::<u16>::alloc(device, 333).unwrap();
        let mut expected = vec![0u16; 333];
        for (start, end, value) in [
            (0, 333, 0xaaaa),
            (1, 2, 0x1234),
            (3, 300, 0xbeef),
            (331, 333, 0x0102),
        ] {
            stream
                .fill(&halves.slice(start..end).unwrap(), value)
                .unwrap();
            expected[start..end].fill(value);
        }
        assert_eq!(halves.to_vec().unwrap(), expected);

        let words = DeviceBuffer::<u32>::alloc(device, 257).unwrap();
        stream.fill(&words, 0xdead_beef).unwrap();
        stream.fill(&words.slice(7..200).unwrap(), 42).unwrap();
        let mut expected = vec![0xdead_beefu32; 257];
        expected[7..200].fill(42);
        assert_eq!(words.to_vec().unwrap(), expected);

        // Copies to and from the device at odd offsets and lengths, and on the device.
        let data: Vec<u8> = (0..n).map(|i| (i * 7 % 251) as u8).collect();
        stream
            .copy_to_device(&buffer.slice(3..n - 2).unwrap(), &data[3..n - 2])
            .unwrap();
        bytes[3..n - 2].copy_from_slice(&data[3..n - 2]);
        let mut part = vec![0u8; 500];
        stream
            .copy_to_host(&mut part, &buffer.slice(101..601).unwrap())
            .unwrap();
        assert_eq!(part, bytes[101..601]);
        let other = DeviceBuffer::<u8>::alloc(device, n).unwrap();
        stream
            .copy(
                &other.slice(1..n - 1).unwrap(),
                &buffer.slice(0..n - 2).unwrap(),
            )
            .unwrap();
        stream.synchronize().unwrap();
        let mut shifted = vec![0u8; n];
        shifted[1..n - 1].copy_from_slice(&bytes[..n - 2]);
        assert_eq!(other.to_vec().unwrap(), shifted);

        // The synchronous forms on the default stream.
        let mut whole = DeviceBuffer::<u8>::alloc(device, n).unwrap();
        whole.copy_from_buffer(&other).unwrap();
        assert_eq!(whole.to_vec().unwrap(), shifted);
        whole.copy_from(&data).unwrap();
        assert_eq!(whole.to_vec().unwrap(), data);
        whole.fill(9).unwrap();
        assert!(whole.to_vec().unwrap().iter().all(|&b| b == 9));
        let mut longs = DeviceBuffer::<u64>::alloc(device, 100).unwrap();
        longs.fill(0x0102_0304_0506_0708).unwrap();
        assert!(longs
            .to_vec()
            .unwrap()
            .iter()
            .all(|&l| l == 0x0102_0304_0506_0708));
    });
}

#[test]
fn events_time_work_in_order() {
    on_vulkan(|device| {
        let stream = device.create_stream().unwrap();
        let events: Vec<_> = (0..3).map(|_| device.create_event().unwrap()).collect();
        let big = DeviceBuffer::<u32>::alloc(device, 1 << 22).unwrap();
        stream.record(&events[0]).unwrap();
        stream.fill(&big, 1).unwrap();
        stream.record(&events[1]).unwrap();
        for value in 2..5 {
            stream.fill(&big, value).unwrap();
        }
        stream.record(&events[2]).unwrap();
        events[2].synchronize().unwrap();
        assert!(events.iter().all(|e| e.query().unwrap()));
        let first = events[0].elapsed_ms(&events[1]).unwrap();
        let both = events[0].elapsed_ms(&events[2]).unwrap();
        assert!(first > 0.0, "{first} ms");
        assert!(both >= first, "{both} ms < {first} ms");
        let error = events[2].elapsed(&events[0]).unwrap_err();
        assert!(error.message().contains("before the start"), "{error}");
        // On the default stream too.
        let (start, end) = (
            device.create_event().unwrap(),
            device.create_event().unwrap(),
        );
        device.record(&start).unwrap();
        let mut words = DeviceBuffer::<u32>::alloc(device, 1 << 20).unwrap();
        words.fill(3).unwrap();
        device.record(&end).unwrap();
        end.synchronize().unwrap();
        assert!(start.elapsed_ms(&end).unwrap() > 0.0);
    });
}

#[test]
fn streams_and_events_may_go_before_their_work_has_run() {
    on_vulkan(|device| {
        let n = 1 << 20;
        let buffer = DeviceBuffer::<u32>::alloc(device, n).unwrap();
        let (start, end) = (
            device.create_event().unwrap(),
            device.create_event().unwrap(),
        );
        {
            let stream = device.create_stream().unwrap();
            stream.record(&start).unwrap();
            for value in 0..4 {
                stream.fill(&buffer, value).unwrap();
            }
            stream.record(&end).unwrap();
            // Dropped with its work queued: the work still runs, the events still complete.
        }
        end.synchronize().unwrap();
        assert!(start.elapsed_ms(&end).unwrap() >= 0.0);
        assert!(buffer.to_vec().unwrap().iter().all(|&v| v == 3));
        let stream = device.create_stream().unwrap();
        let other = device.create_event().unwrap();
        stream.record(&other).unwrap();
        drop(other);
        drop(stream);
        device.synchronize().unwrap();
    });
}

#[test]
fn device_facts_are_sane_and_a_cpu_device_is_never_the_default() {
    on_vulkan(|device| {
        let arch = device.arch().arch;
        assert!(arch.starts_with("vulkan1."), "{arch}");
        let limits = device.limits();
        assert_eq!(limits.multiprocessors, 1, "{limits:?}");
        assert!(
            limits.warp_size.is_power_of_two() && limits.warp_size <= 128,
            "{limits:?}"
        );
        assert!(limits.max_threads_per_block >= 128, "{limits:?}");
        assert!(
            limits.max_block[0] >= 128 && limits.max_block[2] >= 64,
            "{limits:?}"
        );
        assert!(limits.max_grid.iter().all(|&g| g >= 65535), "{limits:?}");
        assert!(limits.shared_memory_per_block >= 16 * 1024, "{limits:?}");
        let memory = device.memory().unwrap();
        assert!(
            memory.total > 0 && memory.free <= memory.total,
            "{memory:?}"
        );
        assert_eq!(memory.total, limits.total_memory);
        let buffer = DeviceBuffer::<u8>::alloc(device, 1 << 20).unwrap();
        assert!(device.memory().unwrap().free <= memory.free - (1 << 20));
        drop(buffer);
        if device.name().contains("llvmpipe") {
            assert!(!Device::default_device().is_same(device));
            assert!(Device::default_gpu().map_or(true, |gpu| !gpu.is_same(device)));
        }
        // Sizes no allocation can have.
        assert!(DeviceBuffer::<u8>::alloc(device, usize::MAX / 2).is_err());
        let error = DeviceBuffer::<u64>::alloc(device, usize::MAX / 4).unwrap_err();
        assert!(
            matches!(
                error.kind(),
                ErrorKind::InvalidArgument | ErrorKind::OutOfMemory
            ),
            "{error}"
        );
    });
}

#[test]
fn the_fixture_is_regenerated_from_its_source() {
    // Where MLIR 22 and the SPIR-V tools are installed, the checked-in SPIR-V is what the
    // script makes from the .mlir sources (into a scratch copy of the folder).
    let tools = ["mlir-opt-22", "mlir-translate-22", "spirv-val"];
    if tools.iter().any(|tool| {
        std::process::Command::new(tool)
            .arg("--version")
            .output()
            .map_or(true, |o| !o.status.success())
    }) {
        eprintln!("skipped: needs {}", tools.join(", "));
        return;
    }
    let fixtures =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/embed/fixtures/vulkan");
    let scratch = std::env::temp_dir().join(format!("gpu-embed-vulkan-{}", std::process::id()));
    std::fs::create_dir_all(&scratch).unwrap();
    for file in ["regenerate.sh", "vadd.mlir", "widen.mlir", "scale2d.mlir"] {
        std::fs::copy(fixtures.join(file), scratch.join(file)).unwrap();
    }
    let output = std::process::Command::new("bash")
        .arg(scratch.join("regenerate.sh"))
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(std::fs::read(scratch.join("vadd.spv")).unwrap(), VADD_SPIRV);
    assert_eq!(
        std::fs::read(scratch.join("widen.spv")).unwrap(),
        WIDEN_SPIRV
    );
    assert_eq!(
        std::fs::read(scratch.join("scale2d.spv")).unwrap(),
        SCALE2D_SPIRV
    );
    std::fs::remove_dir_all(&scratch).unwrap();
}

/// Runs this binary's test `probe` in a child process with `env` set.
fn child(probe: &str, env: &[(&str, &str)]) {
    let mut command = std::process::Command::new(std::env::current_exe().unwrap());
    command.args([
        test_name(module_path!(), probe).as_str(),
        "--exact",
        "--nocapture",
        "--ignored",
    ]);
    for (name, value) in env {
        command.env(name, value);
    }
    let output = command.output().unwrap();
    assert!(
        output.status.success() && String::from_utf8_lossy(&output.stdout).contains("1 passed"),
        "{probe} ({}):\n{}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

#[test]
fn discovery_says_why_there_is_no_vulkan_device() {
    if Device::gpus().map_or(true, |gpus| {
        !gpus.iter().any(|d| d.vendor() == Vendor::Vulkan)
    }) {
        eprintln!("skipped: no Vulkan device here to hide");
        return;
    }
    // No driver (ICD) for the loader to find; no OpenCL driver either (ocl-icd's vendor
    // folder moved away), so that no other device hides the Vulkan loader's reason.
    child(
        "probe_no_vulkan_device",
        &[
            ("VK_ICD_FILENAMES", "/nonexistent/icd.json"),
            ("VK_DRIVER_FILES", "/nonexistent/icd.json"),
            ("OCL_ICD_VENDORS", "/nonexistent"),
        ],
    );
    // Validation asked for, its layer not found: an error, never a run without it.
    child(
        "probe_validation_without_its_layer",
        &[
            ("VK_LAYER_PATH", "/nonexistent"),
            ("VK_ADD_LAYER_PATH", "/nonexistent"),
            ("XDG_DATA_DIRS", "/nonexistent"),
            ("XDG_DATA_HOME", "/nonexistent"),
            ("GPU_EMBED_VULKAN_VALIDATION", "1"),
            ("OCL_ICD_VENDORS", "/nonexistent"),
        ],
    );
}

#[test]
#[ignore = "run by discovery_says_why_there_is_no_vulkan_device, in a child process"]
fn probe_no_vulkan_device() {
    assert!(!Device::all().iter().any(|d| d.vendor() == Vendor::Vulkan));
    let error = Device::gpus().unwrap_err();
    println!("{error}");
    assert!(error.message().contains("libvulkan.so.1: "), "{error}");
    assert!(
        error.message().contains("no Vulkan driver (ICD)"),
        "{error}"
    );
    assert_eq!(Device::default_device().vendor(), Vendor::Host);
}

#[test]
#[ignore = "run by discovery_says_why_there_is_no_vulkan_device, in a child process"]
fn probe_validation_without_its_layer() {
    let error = Device::gpus().unwrap_err();
    println!("{error}");
    assert!(
        error
            .message()
            .contains("the layer VK_LAYER_KHRONOS_validation is not installed"),
        "{error}"
    );
}

/// Every other test asserts the validation layer said nothing; that proves something only if
/// the layer is really on and what it says is really caught. Here a child process runs vadd with
/// the layer's best-practice checks also enabled (`VK_LAYER_ENABLES`), which comment on ordinary
/// code: the child must catch at least one message.
#[test]
fn the_validation_layer_is_on_and_its_messages_are_caught() {
    if Device::all().iter().all(|d| d.vendor() != Vendor::Vulkan) {
        eprintln!("skipped: no Vulkan device");
        return;
    }
    let output = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--ignored",
            "--exact",
            &test_name(module_path!(), "probe_validation_messages"),
            "--nocapture",
        ])
        .env(
            "VK_LAYER_ENABLES",
            "VK_VALIDATION_FEATURE_ENABLE_BEST_PRACTICES_EXT",
        )
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let caught: usize = stdout
        .lines()
        .find_map(|line| line.strip_prefix("validation messages: "))
        .and_then(|count| count.trim().parse().ok())
        .unwrap_or_else(|| panic!("the probe printed no count: {stdout}"));
    assert!(
        caught > 0,
        "best-practice checks on, yet nothing was caught"
    );
}

#[test]
#[ignore = "probe: run by the_validation_layer_is_on_and_its_messages_are_caught"]
fn probe_validation_messages() {
    gpu_embed::enable_vulkan_validation();
    let device = Device::all()
        .into_iter()
        .find(|d| d.vendor() == Vendor::Vulkan)
        .unwrap();
    let (a, b) = inputs(100);
    let da = DeviceBuffer::from_slice(&device, &a).unwrap();
    let db = DeviceBuffer::from_slice(&device, &b).unwrap();
    let dc = DeviceBuffer::<f32>::alloc(&device, 100).unwrap();
    let views = [
        da.view([100]).unwrap(),
        db.view([100]).unwrap(),
        dc.view([100]).unwrap(),
    ];
    // SAFETY: every view holds the 100 elements the kernel touches.
    unsafe {
        vadd(
            &device,
            &LaunchConfig::for_elements(100, 64),
            &DYNAMIC_1D,
            views,
            100,
        )
    }
    .unwrap();
    device.synchronize().unwrap();
    println!(
        "validation messages: {}",
        gpu_embed::take_vulkan_validation_messages().len()
    );
}
