//! The OpenCL driver on every OpenCL device that takes SPIR-V (Intel's CPU Runtime for OpenCL
//! where there is no Intel GPU: `scripts/setup.sh` installs it). Skipped, visibly, only where no
//! such device is found.
//!
//! The kernel is `fixtures/opencl/vadd.mlir`, compiled by gpu-build's opencl target
//! (`fixtures/opencl/regenerate.sh`); its ABI (the arguments' table) is written here as the
//! target writes it, and launched with the lowered parameters a stub passes.
//!
//! The module runs again under valgrind's memcheck, with Intel's kernel vectorizer off
//! (`CL_CONFIG_USE_VECTORIZER=False`): its vectorized kernels, taking a code path for the CPU
//! valgrind emulates, read and write one element past a 4-byte buffer under valgrind (never
//! without: a buffer of 64 elements launched for 1 keeps its second element), in JIT code with no
//! frame of ours; with the vectorizer off they have none. What remains is glibc's loader
//! over-reading RUNPATH strings while it maps Intel's libraries, suppressed by
//! `fixtures/opencl/valgrind.supp` (explained there).

use crate::common::{binary, object_with_abi};
use gpu_embed::{Binary, Device, DeviceBuffer, ErrorKind, LaunchConfig, Object, Stream, Vendor};
use gpu_manifest::targets::opencl::{OpenClAbi, OpenClArgument, OpenClArgumentKind, OpenClKernel};
use std::ffi::c_void;
use std::sync::LazyLock;

/// The function slot of this file's hand-written launches (a stub has its own; one shared
/// by several kernels is found stale and looked up again).
static LAUNCH_SLOT: gpu_embed::FunctionSlot = gpu_embed::FunctionSlot::new();

static VADD_SPIRV: &[u8] = include_bytes!("fixtures/opencl/vadd.spv");

/// The object's ABI: `vadd(a, b, c: memref<?xf32>, n: index)`, three descriptors of 5
/// parameters, then `n`; and `vsub`, in the table but not in the program (a table and an object
/// that disagree).
fn vadd_abi() -> OpenClAbi {
    let memref = |param| OpenClArgument {
        param,
        kind: OpenClArgumentKind::FirstElement { element_bytes: 4 },
    };
    let arguments = vec![
        memref(0),
        memref(5),
        memref(10),
        OpenClArgument {
            param: 15,
            kind: OpenClArgumentKind::Scalar { bytes: 8 },
        },
    ];
    let kernel = |name: &str| OpenClKernel {
        name: name.into(),
        workgroup_memory: 0,
        max_block_threads: None,
        required_block: None,
        arguments: arguments.clone(),
    };
    OpenClAbi {
        spirv_version: "1.0".into(),
        capabilities: ["Addresses", "Kernel", "Int64"].map(String::from).to_vec(),
        extensions: Vec::new(),
        kernels: vec![kernel("vadd"), kernel("vsub")],
    }
}

fn vadd_object(bytes: &'static [u8]) -> Object {
    object_with_abi(Vendor::OpenCl, "spirv1.0", bytes, &vadd_abi())
}

static VADD: LazyLock<Binary> = LazyLock::new(|| {
    binary(
        "vadd",
        vec![vadd_object(VADD_SPIRV)],
        &["vadd", "vsub", "vmul"],
    )
});

/// The same object with its words damaged after the header: SPIR-V the driver cannot take.
static DAMAGED_SPIRV: [u8; 916] = {
    let mut bytes = [0u8; 916];
    let mut i = 0;
    while i < VADD_SPIRV.len() && i < bytes.len() {
        bytes[i] = if i >= 20 && i % 7 == 0 {
            0xff
        } else {
            VADD_SPIRV[i]
        };
        i += 1;
    }
    bytes
};
static DAMAGED: LazyLock<Binary> =
    LazyLock::new(|| binary("damaged", vec![vadd_object(&DAMAGED_SPIRV)], &["vadd"]));

/// Not SPIR-V at all: 18 bytes.
static SHORT: LazyLock<Binary> = LazyLock::new(|| {
    let abi = OpenClAbi {
        capabilities: Vec::new(),
        ..vadd_abi()
    };
    let object = object_with_abi(Vendor::OpenCl, "spirv1.0", b"not a SPIR-V file!", &abi);
    binary("short", vec![object], &["vadd"])
});

#[test]
fn memcheck() {
    let suppressions = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/embed/fixtures/opencl/valgrind.supp");
    crate::common::memcheck_module_with(
        module_path!(),
        &[("CL_CONFIG_USE_VECTORIZER", "False")],
        Some(&suppressions),
    );
}

fn opencl_devices() -> Vec<Device> {
    let devices: Vec<Device> = Device::all()
        .into_iter()
        .filter(|d| d.vendor() == Vendor::OpenCl)
        .collect();
    if devices.is_empty() {
        eprintln!(
            "skipped: no OpenCL device that takes SPIR-V ({}); scripts/setup.sh installs Intel's \
             CPU runtime",
            Device::discovery_report().join("; ")
        );
    }
    devices
}

/// Buffers of `n` elements: a, b and the output.
fn buffers(device: &Device, n: usize) -> [DeviceBuffer<f32>; 3] {
    let a: Vec<f32> = (0..n).map(|i| i as f32 * 0.5).collect();
    let b: Vec<f32> = (0..n).map(|i| 1000.0 - i as f32).collect();
    [
        DeviceBuffer::from_slice(device, &a).unwrap(),
        DeviceBuffer::from_slice(device, &b).unwrap(),
        DeviceBuffer::alloc(device, n).unwrap(),
    ]
}

/// Launches `kernel` of `binary` with vadd's lowered parameters over the first `n` elements of
/// `buffers`, `params` of them (16 for vadd's signature).
///
/// # Safety
/// `n` is at most each buffer's length.
unsafe fn vadd(
    queue: impl Into<gpu_embed::Queue<'static>>,
    binary: &'static Binary,
    kernel: &'static str,
    config: &LaunchConfig,
    buffers: &[DeviceBuffer<f32>; 3],
    n: usize,
    params: usize,
) -> gpu_embed::Result<()> {
    let mut words: Vec<u64> = Vec::new();
    for buffer in buffers {
        let address = buffer.device_ptr().0;
        words.extend([address, address, 0, n as u64, 1]);
    }
    words.push(n as u64);
    words.truncate(params);
    let mut pointers: Vec<*mut c_void> = words.iter_mut().map(|w| (w as *mut u64).cast()).collect();
    let sizes = vec![8; pointers.len()];
    // SAFETY: vadd's lowered parameters over buffers of at least n elements.
    unsafe {
        gpu_embed::launch(
            queue.into(),
            binary,
            kernel,
            &LAUNCH_SLOT,
            config,
            &mut pointers,
            &sizes,
            &[],
        )
    }
}

#[test]
fn vadd_matches_the_reference_on_every_block_size() {
    for device in opencl_devices() {
        let device: &'static Device = Box::leak(Box::new(device));
        for (n, block) in [
            (1usize, 1u32),
            (63, 64),
            (1000, 128),
            (4099, 256),
            (65536, 100),
        ] {
            let buffers = buffers(device, n);
            // SAFETY: n elements in each buffer.
            unsafe {
                vadd(
                    device,
                    &VADD,
                    "vadd",
                    &LaunchConfig::for_elements(n, block),
                    &buffers,
                    n,
                    16,
                )
            }
            .unwrap();
            let (a, b) = (buffers[0].to_vec().unwrap(), buffers[1].to_vec().unwrap());
            let expected: Vec<f32> = a.iter().zip(&b).map(|(x, y)| x + y).collect();
            assert_eq!(
                buffers[2].to_vec().unwrap(),
                expected,
                "n = {n}, block = {block}"
            );
        }
    }
}

#[test]
fn streams_order_their_work_and_events_time_it() {
    for device in opencl_devices() {
        let device: &'static Device = Box::leak(Box::new(device));
        let n = 1 << 16;
        let buffers = buffers(device, n);
        let stream: &'static Stream = Box::leak(Box::new(device.create_stream().unwrap()));
        let (start, end) = (
            device.create_event().unwrap(),
            device.create_event().unwrap(),
        );
        stream.record(&start).unwrap();
        // SAFETY: n elements in each buffer.
        unsafe {
            vadd(
                stream,
                &VADD,
                "vadd",
                &LaunchConfig::for_elements(n, 256),
                &buffers,
                n,
                16,
            )
        }
        .unwrap();
        stream.record(&end).unwrap();
        end.synchronize().unwrap();
        let ms = start.elapsed(&end).unwrap().as_secs_f64() * 1e3;
        assert!((0.0..10_000.0).contains(&ms), "{ms} ms");
        // The default stream's copy follows the stream's launch (the legacy default stream).
        let out = buffers[2].to_vec().unwrap();
        assert_eq!(out[n - 1], (n - 1) as f32 * 0.5 + 1000.0 - (n - 1) as f32);
        stream.synchronize().unwrap();
    }
}

#[test]
fn damaged_or_foreign_objects_are_errors_naming_what_is_wrong() {
    for device in opencl_devices() {
        let device: &'static Device = Box::leak(Box::new(device));
        let error = DAMAGED
            .kernel(device, "vadd")
            .expect_err("a damaged object loads");
        assert!(
            matches!(error.kind(), ErrorKind::Driver | ErrorKind::InvalidArgument)
                && error.message().contains("opencl spirv1.0"),
            "{error}"
        );
        let error = SHORT.kernel(device, "vadd").expect_err("18 bytes load");
        assert!(error.message().contains("is not SPIR-V"), "{error}");
    }
}

#[test]
fn a_kernel_the_program_or_its_table_lacks_is_an_error() {
    for device in opencl_devices() {
        let device: &'static Device = Box::leak(Box::new(device));
        // In the table, not in the program: the driver names the program's kernels.
        let error = VADD
            .kernel(device, "vsub")
            .expect_err("vsub is not in the program");
        assert!(
            error.message().contains("no kernel `vsub`") && error.message().contains("vadd"),
            "{error}"
        );
        // In neither.
        let error = VADD
            .kernel(device, "vmul")
            .expect_err("vmul is in no table");
        assert!(error.message().contains("vmul"), "{error}");
    }
}

#[test]
fn launches_the_device_or_the_kernel_cannot_take_are_errors() {
    for device in opencl_devices() {
        let device: &'static Device = Box::leak(Box::new(device));
        let n = 256;
        let buffers = buffers(device, n);
        let limit = VADD
            .kernel(device, "vadd")
            .unwrap()
            .attributes()
            .max_threads_per_block;
        let too_wide = LaunchConfig {
            grid: [1, 1, 1],
            block: [limit + 1, 1, 1],
            shared_mem_bytes: 0,
        };
        // SAFETY: n elements in each buffer.
        let error = unsafe { vadd(device, &VADD, "vadd", &too_wide, &buffers, n, 16) }.unwrap_err();
        assert_eq!(error.kind(), ErrorKind::InvalidArgument, "{error}");
        // Fewer lowered parameters than the argument table reads.
        // SAFETY: as above.
        let error = unsafe {
            vadd(
                device,
                &VADD,
                "vadd",
                &LaunchConfig::for_elements(n, 64),
                &buffers,
                n,
                12,
            )
        }
        .unwrap_err();
        assert!(
            error.kind() == ErrorKind::InvalidArgument && error.message().contains("parameter"),
            "{error}"
        );
        // Dynamic shared memory, which these kernels do not take.
        let shared = LaunchConfig {
            shared_mem_bytes: 1024,
            ..LaunchConfig::for_elements(n, 64)
        };
        // SAFETY: as above.
        let error = unsafe { vadd(device, &VADD, "vadd", &shared, &buffers, n, 16) }.unwrap_err();
        assert!(error.message().contains("dynamic shared memory"), "{error}");
        // Nothing was written by the refused launches.
        assert!(buffers[2].to_vec().unwrap().iter().all(|&x| x == 0.0));
    }
}
