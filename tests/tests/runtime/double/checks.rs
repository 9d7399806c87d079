//! Each of the double's checks, shown failing a call made as a runtime with a bug would make it:
//! the double's entry points called directly (through `libloading`, as gpu-embed loads them)
//! with the sample's real objects. Every case asserts the code the double returns and the
//! violation it records.

use super::Double;
use gpu_embed::{Binary, Format};
use libloading::{Library, Symbol};
use std::ffi::{c_int, c_uint, c_void};

type Result = c_int;
const SUCCESS: Result = 0;
const INVALID_VALUE: Result = 1;
const NOT_INITIALIZED: Result = 3;
const INVALID_IMAGE: Result = 200;
const INVALID_CONTEXT: Result = 201;
const NO_BINARY_FOR_GPU: Result = 209;
const INVALID_HANDLE: Result = 400;
const ILLEGAL_ADDRESS: Result = 700;
const CAPTURE_UNSUPPORTED: Result = 900;
const CAPTURE_INVALIDATED: Result = 901;
const HIP_INVALID_IMAGE: Result = 200;
const HIP_INVALID_HANDLE: Result = 400;
const UNSUPPORTED_PTX_VERSION: Result = 222;

type Pointer = *mut c_void;

/// The double, opened as gpu-embed opens a driver.
struct Api(Library);

impl Api {
    fn open() -> Api {
        // SAFETY: the double's initializers have no preconditions.
        Api(unsafe { Library::new(super::library()) }.unwrap())
    }

    /// An entry point of the type `T` the vendor's header declares for `name`.
    fn get<T>(&self, name: &str) -> Symbol<'_, T> {
        // SAFETY: each caller names the entry point's declared type.
        unsafe { self.0.get(name.as_bytes()) }.unwrap()
    }

    fn call1<A>(&self, name: &str, a: A) -> Result {
        // SAFETY: an entry point of one argument of type `A`.
        unsafe { self.get::<unsafe extern "C" fn(A) -> Result>(name)(a) }
    }

    fn call2<A, B>(&self, name: &str, a: A, b: B) -> Result {
        // SAFETY: an entry point of two arguments of these types.
        unsafe { self.get::<unsafe extern "C" fn(A, B) -> Result>(name)(a, b) }
    }

    fn call3<A, B, C>(&self, name: &str, a: A, b: B, c: C) -> Result {
        // SAFETY: an entry point of three arguments of these types.
        unsafe { self.get::<unsafe extern "C" fn(A, B, C) -> Result>(name)(a, b, c) }
    }

    fn call4<A, B, C, D>(&self, name: &str, a: A, b: B, c: C, d: D) -> Result {
        // SAFETY: an entry point of four arguments of these types.
        unsafe { self.get::<unsafe extern "C" fn(A, B, C, D) -> Result>(name)(a, b, c, d) }
    }

    /// `cuLaunchKernel` / `hipModuleLaunchKernel` with a grid of one block.
    fn launch(
        &self,
        name: &str,
        function: Pointer,
        block: [c_uint; 3],
        shared: c_uint,
        stream: Pointer,
        params: &mut [Pointer],
    ) -> Result {
        type Launch = unsafe extern "C" fn(
            Pointer,
            c_uint,
            c_uint,
            c_uint,
            c_uint,
            c_uint,
            c_uint,
            c_uint,
            Pointer,
            *mut Pointer,
            *mut Pointer,
        ) -> Result;
        // SAFETY: `params` points to each argument's bytes (or, in the seeded bugs, to fewer
        // bytes than the kernel reads: the double reads them from this test's own memory).
        unsafe {
            self.get::<Launch>(name)(
                function,
                1,
                1,
                1,
                block[0],
                block[1],
                block[2],
                shared,
                stream,
                params.as_mut_ptr(),
                std::ptr::null_mut(),
            )
        }
    }

    /// `cuLaunchKernel` of one block on the default stream.
    fn cu_launch(
        &self,
        function: Pointer,
        block: [c_uint; 3],
        shared: c_uint,
        params: &mut [Pointer],
    ) -> Result {
        self.launch(
            "cuLaunchKernel",
            function,
            block,
            shared,
            std::ptr::null_mut(),
            params,
        )
    }

    /// Makes device `ordinal`'s primary context current.
    fn use_device(&self, ordinal: c_int) -> Pointer {
        let mut context: Pointer = std::ptr::null_mut();
        assert_eq!(
            self.call2("cuDevicePrimaryCtxRetain", &mut context, ordinal),
            SUCCESS
        );
        assert_eq!(self.call1("cuCtxSetCurrent", context), SUCCESS);
        context
    }

    fn load(&self, loader: &str, image: &[u8]) -> (Result, Pointer) {
        let mut module: Pointer = std::ptr::null_mut();
        let code = self.call2(loader, &mut module, image.as_ptr());
        (code, module)
    }

    fn function(&self, module: Pointer, name: &std::ffi::CStr) -> Pointer {
        let mut function: Pointer = std::ptr::null_mut();
        assert_eq!(
            self.call3("cuModuleGetFunction", &mut function, module, name.as_ptr()),
            SUCCESS
        );
        function
    }

    fn alloc(&self, bytes: usize) -> u64 {
        let mut pointer = 0u64;
        assert_eq!(self.call2("cuMemAlloc_v2", &mut pointer, bytes), SUCCESS);
        pointer
    }
}

/// The sample's saxpy object for `chip` in `format`, NUL-terminated (PTX is read as a C string).
fn saxpy(chip: &str, format: Format) -> Vec<u8> {
    let binary: &Binary = sample_project::BINARIES[1];
    let object = binary
        .objects()
        .iter()
        .find(|o| o.chip() == chip && o.format() == format)
        .unwrap();
    object.bytes().iter().copied().chain([0]).collect()
}

/// The last violation the double recorded so far.
fn last_violation(double: &Double) -> String {
    double
        .record()
        .starting("violation")
        .last()
        .map(|l| l.to_string())
        .unwrap_or_default()
}

#[test]
fn a_seeded_abi_bug_fails_the_double() {
    let double = Double::new("checks_abi");
    if super::here(&double, module_path!(), "a_seeded_abi_bug_fails_the_double") {
        let api = Api::open();
        assert_eq!(api.call1("cuInit", 0u32), SUCCESS);
        api.use_device(0);
        let (code, module) = api.load("cuModuleLoadData", &saxpy("sm_90", Format::Isa));
        assert_eq!(code, SUCCESS);
        let function = api.function(module, c"saxpy");
        let (x, y) = (api.alloc(4096), api.alloc(4096));
        let (mut a, mut n) = (2.5f32, 1024i64);
        // Right: each argument at its size.
        let (mut px, mut py) = (x, y);
        let mut params: Vec<Pointer> = vec![
            (&raw mut a).cast(),
            (&raw mut px).cast(),
            (&raw mut py).cast(),
            (&raw mut n).cast(),
        ];
        assert_eq!(
            api.cu_launch(function, [256, 1, 1], 0, &mut params),
            SUCCESS
        );
        // Seeded: the pointer x packed as 4 bytes, the next 4 bytes something else.
        #[repr(C)]
        struct Packed {
            low: u32,
            next: u32,
        }
        let mut packed = Packed {
            low: x as u32,
            next: 0x1234_5678,
        };
        params[1] = (&raw mut packed).cast();
        assert_eq!(
            api.cu_launch(function, [256, 1, 1], 0, &mut params),
            ILLEGAL_ADDRESS
        );
        assert!(
            last_violation(&double).contains("parameter 1 (a pointer at offset 8)"),
            "{}",
            last_violation(&double)
        );
        let _ = packed.next;
        // Seeded: a kernel loaded from the wrong object: a cubin of another major, an hsaco.
        api.use_device(1);
        assert_eq!(
            api.load("cuModuleLoadData", &saxpy("sm_90", Format::Bin)).0,
            NO_BINARY_FOR_GPU
        );
        assert!(
            last_violation(&double).contains("cubin sm_90 does not run on sm_80"),
            "{}",
            last_violation(&double)
        );
        assert_eq!(
            api.load("cuModuleLoadData", &saxpy("gfx90a", Format::Bin))
                .0,
            INVALID_IMAGE
        );
        assert_eq!(
            api.load("hipModuleLoadData", &saxpy("sm_80", Format::Bin))
                .0,
            HIP_INVALID_IMAGE
        );
        // Seeded: a stream destroyed with a copy queued that nobody waited for.
        api.use_device(0);
        let mut stream: Pointer = std::ptr::null_mut();
        assert_eq!(api.call2("cuStreamCreate", &mut stream, 0u32), SUCCESS);
        let mut host = vec![0u8; 4096];
        let mut pinned: Pointer = std::ptr::null_mut();
        assert_eq!(
            api.call2("cuMemAllocHost_v2", &mut pinned, 4096usize),
            SUCCESS
        );
        assert_eq!(
            api.call4("cuMemcpyDtoHAsync_v2", pinned, x, 4096usize, stream),
            SUCCESS
        );
        assert_eq!(api.call1("cuStreamDestroy_v2", stream), SUCCESS);
        assert!(
            last_violation(&double).contains("destroyed with 1 operations queued"),
            "{}",
            last_violation(&double)
        );
        assert_eq!(
            api.call3("cuMemcpyDtoH_v2", host.as_mut_ptr(), x, 4096usize),
            SUCCESS
        );
        return;
    }
    // The seeded bugs are in the record; nothing else is.
    let record = double.record();
    assert_eq!(
        record.starting("violation").len(),
        5,
        "{:#?}",
        record.starting("violation")
    );
}

#[test]
fn each_rule_of_the_driver_is_checked() {
    let double = Double::new("checks_rules");
    if super::here(
        &double,
        module_path!(),
        "each_rule_of_the_driver_is_checked",
    ) {
        let api = Api::open();
        let expect = |code: Result, want: Result, violation: &str| {
            assert_eq!(code, want, "{violation}");
            let last = last_violation(&double);
            assert!(
                last.contains(violation),
                "wanted `{violation}`, the last violation is `{last}`"
            );
        };
        expect(
            api.call1("cuCtxSynchronize", 0),
            NOT_INITIALIZED,
            "called before cuInit",
        );
        assert_eq!(api.call1("cuInit", 0u32), SUCCESS);
        let mut pointer = 0u64;
        expect(
            api.call2("cuMemAlloc_v2", &mut pointer, 16usize),
            INVALID_CONTEXT,
            "no context is current",
        );
        api.use_device(0);
        let (_, module) = api.load("cuModuleLoadData", &saxpy("sm_90", Format::Isa));
        let function = api.function(module, c"saxpy");
        let x = api.alloc(256);
        let mut host = [0u8; 512];
        // Ranges: past the end, after the free, a device address given as host memory.
        expect(
            api.call3("cuMemcpyDtoH_v2", host.as_mut_ptr(), x, 512usize),
            ILLEGAL_ADDRESS,
            "run 256 bytes past the end of allocation",
        );
        expect(
            api.call3("cuMemcpyHtoD_v2", x, x as Pointer, 16usize),
            INVALID_VALUE,
            "is not host memory",
        );
        let freed = api.alloc(64);
        assert_eq!(api.call1("cuMemFree_v2", freed), SUCCESS);
        expect(
            api.call3("cuMemsetD32_v2", freed, 0u32, 4usize),
            ILLEGAL_ADDRESS,
            "already freed",
        );
        expect(
            api.call1("cuMemFree_v2", freed),
            ILLEGAL_ADDRESS,
            "already freed",
        );
        // Launch limits: block size, dynamic shared memory without and with the opt-in.
        let (mut a, mut px, mut py, mut n) = (1.0f32, x, x, 64i64);
        let mut params: Vec<Pointer> = vec![
            (&raw mut a).cast(),
            (&raw mut px).cast(),
            (&raw mut py).cast(),
            (&raw mut n).cast(),
        ];
        let null = std::ptr::null_mut();
        expect(
            api.cu_launch(function, [2048, 1, 1], 0, &mut params),
            INVALID_VALUE,
            "exceeds the device's",
        );
        expect(
            api.cu_launch(function, [64, 1, 1], 64 * 1024, &mut params),
            INVALID_VALUE,
            "(no opt-in set)",
        );
        assert_eq!(
            api.call3(
                "cuFuncSetAttribute",
                function,
                8 as c_int,
                64 * 1024 as c_int
            ),
            SUCCESS
        );
        assert_eq!(
            api.cu_launch(function, [64, 1, 1], 64 * 1024, &mut params),
            SUCCESS
        );
        // A pointer to freed memory.
        px = freed;
        params[1] = (&raw mut px).cast();
        expect(
            api.cu_launch(function, [64, 1, 1], 0, &mut params),
            ILLEGAL_ADDRESS,
            "parameter 1 (a pointer at offset 8)",
        );
        // Another device's memory without peer access, then with.
        let other = api.use_device(1);
        let elsewhere = api.alloc(256);
        api.use_device(0);
        px = elsewhere;
        params[1] = (&raw mut px).cast();
        expect(
            api.cu_launch(function, [64, 1, 1], 0, &mut params),
            ILLEGAL_ADDRESS,
            "without peer access",
        );
        params[1] = (&raw mut px).cast();
        assert_eq!(api.call2("cuCtxEnablePeerAccess", other, 0u32), SUCCESS);
        assert_eq!(api.cu_launch(function, [64, 1, 1], 0, &mut params), SUCCESS);
        // Streams and events: use after destroy, timing of an event made without it.
        let mut stream: Pointer = null;
        assert_eq!(api.call2("cuStreamCreate", &mut stream, 0u32), SUCCESS);
        assert_eq!(api.call1("cuStreamSynchronize", stream), SUCCESS);
        assert_eq!(api.call1("cuStreamDestroy_v2", stream), SUCCESS);
        expect(
            api.call1("cuStreamSynchronize", stream),
            INVALID_HANDLE,
            "used after it was destroyed",
        );
        let (mut start, mut end): (Pointer, Pointer) = (null, null);
        assert_eq!(api.call2("cuEventCreate", &mut start, 2u32), SUCCESS);
        assert_eq!(api.call2("cuEventCreate", &mut end, 0u32), SUCCESS);
        assert_eq!(api.call2("cuEventRecord", start, null), SUCCESS);
        assert_eq!(api.call2("cuEventRecord", end, null), SUCCESS);
        let mut ms = 0f32;
        expect(
            api.call3("cuEventElapsedTime", &mut ms, start, end),
            INVALID_HANDLE,
            "created without timing",
        );
        // Capture: a synchronous call while capturing invalidates the capture.
        assert_eq!(api.call2("cuStreamCreate", &mut stream, 0u32), SUCCESS);
        assert_eq!(
            api.call2("cuStreamBeginCapture_v2", stream, 1 as c_int),
            SUCCESS
        );
        expect(
            api.call1("cuCtxSynchronize", 0),
            CAPTURE_UNSUPPORTED,
            "while this thread captures",
        );
        let mut graph: Pointer = null;
        expect(
            api.call2("cuStreamEndCapture", stream, &mut graph),
            CAPTURE_INVALIDATED,
            "invalidated by cuCtxSynchronize",
        );
        // A module unloaded while a launch of its kernel is queued.
        assert_eq!(
            api.launch(
                "cuLaunchKernel",
                function,
                [64, 1, 1],
                0,
                stream,
                &mut params
            ),
            SUCCESS
        );
        expect(
            api.call1("cuModuleUnload", module),
            INVALID_VALUE,
            "unloaded while launches of its kernels are queued",
        );
        assert_eq!(api.call1("cuStreamSynchronize", stream), SUCCESS);
        assert_eq!(api.call1("cuModuleUnload", module), SUCCESS);
        // Queued work runs when waited for: a copy into pinned memory is not there before.
        let mut pinned: Pointer = null;
        assert_eq!(
            api.call2("cuMemAllocHost_v2", &mut pinned, 256usize),
            SUCCESS
        );
        assert_eq!(api.call3("cuMemsetD32_v2", x, 7u32, 64usize), SUCCESS);
        assert_eq!(
            api.call4("cuMemcpyDtoHAsync_v2", pinned, x, 256usize, stream),
            SUCCESS
        );
        // SAFETY: 256 bytes of pinned memory the double allocated; no copy into it is running
        // (the double runs queued work only inside its calls).
        let seen = unsafe { *pinned.cast::<u32>() };
        assert_ne!(seen, 7, "the copy ran before anything waited for it");
        assert_eq!(api.call1("cuStreamSynchronize", stream), SUCCESS);
        // SAFETY: as above.
        assert_eq!(unsafe { *pinned.cast::<u32>() }, 7);
        return;
    }
    // Not freed: x, the peer's memory, the pinned memory, two events and a stream.
    let record = double.record();
    let leaks = record.starting("leak ");
    assert_eq!(leaks.len(), 6, "{leaks:#?}");
}

/// A kernel written by hand in PTX: a struct parameter (16 bytes at 8-byte alignment after a
/// 4-byte one), a pointer, and a required block size.
const REQUIRED_BLOCK_PTX: &str = ".version 7.0\n.target sm_80\n.address_size 64\n\
    .visible .entry fixed(\n  .param .u32 fixed_param_0,\n  .param .align 8 .b8 fixed_param_1[16],\n  \
    .param .u64 .ptr .global .align 4 fixed_param_2\n)\n.reqntid 64, 1, 1\n{\n  ret;\n}\n\0";

#[test]
fn a_required_block_size_and_a_struct_argument() {
    let double = Double::new("checks_reqntid");
    if super::here(
        &double,
        module_path!(),
        "a_required_block_size_and_a_struct_argument",
    ) {
        let api = Api::open();
        assert_eq!(api.call1("cuInit", 0u32), SUCCESS);
        api.use_device(1);
        let (code, module) = api.load("cuModuleLoadData", REQUIRED_BLOCK_PTX.as_bytes());
        assert_eq!(code, SUCCESS);
        let function = api.function(module, c"fixed");
        let mut pointer = api.alloc(256);
        let (mut count, mut pair) = (3u32, [7u64, 9u64]);
        let mut params: Vec<Pointer> = vec![
            (&raw mut count).cast(),
            (&raw mut pair).cast(),
            (&raw mut pointer).cast(),
        ];
        assert_eq!(api.cu_launch(function, [64, 1, 1], 0, &mut params), SUCCESS);
        assert_eq!(
            api.cu_launch(function, [32, 2, 1], 0, &mut params),
            INVALID_VALUE
        );
        assert!(
            last_violation(&double).contains("requires blocks of [64, 1, 1]"),
            "{}",
            last_violation(&double)
        );
        return;
    }
    let record = double.record();
    // The struct at offset 8 (after the u32, at its alignment), the pointer after it at 24.
    record.assert_has(&[
        "launch kernel=fixed image=ptx 7.0 sm_80",
        "params(32 bytes)=[4B 0x3, 16B 0x7, ptr 0xc0de",
    ]);
}

#[test]
fn a_hip_kernel_launched_on_another_device() {
    let double = Double::new("checks_hip_device");
    if super::here(
        &double,
        module_path!(),
        "a_hip_kernel_launched_on_another_device",
    ) {
        let api = Api::open();
        assert_eq!(api.call1("hipSetDevice", 0 as c_int), SUCCESS);
        let (code, module) = api.load("hipModuleLoadData", &saxpy("gfx90a", Format::Bin));
        assert_eq!(code, SUCCESS);
        let mut function: Pointer = std::ptr::null_mut();
        assert_eq!(
            api.call3(
                "hipModuleGetFunction",
                &mut function,
                module,
                c"saxpy".as_ptr()
            ),
            SUCCESS
        );
        let mut pointer: Pointer = std::ptr::null_mut();
        assert_eq!(api.call2("hipMalloc", &mut pointer, 256usize), SUCCESS);
        let (mut a, mut n) = (1.0f32, 64i64);
        let (mut x, mut y) = (pointer, pointer);
        let mut params: Vec<Pointer> = vec![
            (&raw mut a).cast(),
            (&raw mut x).cast(),
            (&raw mut y).cast(),
            (&raw mut n).cast(),
        ];
        let null = std::ptr::null_mut();
        assert_eq!(
            api.launch(
                "hipModuleLaunchKernel",
                function,
                [64, 1, 1],
                0,
                null,
                &mut params
            ),
            SUCCESS
        );
        // Device 1 current: the null stream is device 1's, the kernel was loaded on device 0.
        assert_eq!(api.call1("hipSetDevice", 1 as c_int), SUCCESS);
        assert_eq!(
            api.launch(
                "hipModuleLaunchKernel",
                function,
                [64, 1, 1],
                0,
                null,
                &mut params
            ),
            HIP_INVALID_HANDLE
        );
        assert!(
            last_violation(&double).contains("loaded in another context"),
            "{}",
            last_violation(&double)
        );
        return;
    }
    double
        .record()
        .assert_has(&["launch kernel=saxpy image=hsaco gfx90a"]);
}

#[test]
fn ptx_newer_than_the_driver() {
    let double = Double::new("checks_old_driver").with("GPU_DOUBLE_CUDA_VERSION", "11000");
    if super::here(&double, module_path!(), "ptx_newer_than_the_driver") {
        let api = Api::open();
        assert_eq!(api.call1("cuInit", 0u32), SUCCESS);
        api.use_device(0);
        // The sample's PTX for sm_90 is ISA 7.8; CUDA 11.0 compiles 7.0 at most.
        assert_eq!(
            api.load("cuModuleLoadData", &saxpy("sm_90", Format::Isa)).0,
            UNSUPPORTED_PTX_VERSION
        );
        assert!(
            last_violation(&double).contains("PTX ISA 7.8 is newer than this driver's 7.0"),
            "{}",
            last_violation(&double)
        );
        // sm_80's PTX is ISA 7.0: that one it compiles.
        assert_eq!(
            api.load("cuModuleLoadData", &saxpy("sm_80", Format::Isa)).0,
            SUCCESS
        );
        return;
    }
    double
        .record()
        .assert_has(&["loaded module", "ptx 7.0 sm_80"]);
}
