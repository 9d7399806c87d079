//! The host target's ABI, between gpu-build's `targets/host/` (which generates the entry points)
//! and gpu-embed's `driver/host/` block scheduler (which calls them): written once here,
//! asserted with `offset_of!` by the runtime; and [`HostEntries`], what the manifest says of a
//! host object (the one target ABI `include_gpu_binary!` reads: its entry points must become
//! Rust symbols).

use serde::{Deserialize, Serialize};

/// The context a host entry point receives begins with this many `u32` ids: thread id,
/// block size, block id, grid size; x, y, z each.
pub const ID_SLOTS: usize = 12;
/// Byte offset of the ids in the context.
pub const IDS_OFFSET: usize = 0;
/// Byte offset of the barrier function pointer (`extern "C" fn(*mut context)`): the whole
/// block waits (coroutine kernels only).
pub const BARRIER_OFFSET: usize = 48;
/// Byte offset of the subgroup barrier function pointer (same type): the thread waits until
/// every thread of the block not waiting at a block barrier has run to its own next wait,
/// which is what a warp shuffle's exchange needs (coroutine kernels only).
pub const SUBGROUP_BARRIER_OFFSET: usize = 56;
/// Byte offset of the assertion report function pointer: `extern "C" fn(*mut context,
/// message, file, line: u32, function, thread x/y/z: u32, block x/y/z: u32)`, the C strings
/// of a failed `cf.assert`. The launch then fails with them.
pub const ASSERT_OFFSET: usize = 64;
/// Byte offset of the CPU level (`u32`): which of [`X86_64_CPUS`] the running processor
/// has (0: the baseline), written by the runtime, read by the blocks entries of x86-64
/// objects compiled for several CPUs to choose their copy.
pub const CPU_LEVEL_OFFSET: usize = 72;
/// Byte offset of the checked run's report function pointer (checked objects only,
/// [`HostEntries::checked`]): `extern "C" fn(*mut context, site: *const CheckSite,
/// address: u64, bytes: u64, low: u64, high: u64, thread x/y/z: u32, block x/y/z: u32)`,
/// called when an access of `bytes` at `address` falls outside `low..high`, the memory its
/// pointer may reach. The access is then not made (a load reads zero).
pub const CHECK_REPORT_OFFSET: usize = 80;
/// Byte offset of the checked run's allocation lookup: `extern "C" fn(*mut context,
/// address: u64) -> [u64; 2]`, the bounds of the live allocation holding `address` (both 0
/// where none does), for pointers the instrumentation cannot trace to a kernel argument.
pub const CHECK_FIND_OFFSET: usize = 88;
/// Byte offset of the checked run's argument bounds: a pointer to `[low, high]` `u64` pairs,
/// one per kernel parameter, the live allocation a pointer parameter points into (both 0
/// where it points into none, or is not a pointer).
pub const CHECK_BOUNDS_OFFSET: usize = 96;
/// Byte offset of the checked run's workgroup-memory hook: `extern "C" fn(*mut context, site:
/// *const CheckSite, variable: *const { name: *const c_char, bytes: u64, slot: u64 },
/// offset: u64, bytes: u64, thread x/y/z: u32, block x/y/z: u32)`, called for every access
/// of `bytes` at byte `offset` of a workgroup variable (a constant of the object names it;
/// `slot` is its [`CHECK_READY_OFFSET`] slot, or `u64::MAX`) except the loads
/// [`CHECK_READY_OFFSET`] lets the object skip; the runtime keeps the variable's shadow to
/// find races between the block's threads and reads of bytes not written since the block
/// began.
pub const CHECK_WORKGROUP_OFFSET: usize = 104;
/// Byte offset of the checked run's barrier hook: `extern "C" fn(*mut context, site:
/// *const CheckSite, thread x/y/z: u32, block x/y/z: u32)`, called by each thread just
/// before it waits at a `gpu.barrier`.
pub const CHECK_BARRIER_OFFSET: usize = 112;
/// Byte offset of the checked run's ready slots: `[u32; CHECK_READY_SLOTS]`, zero when a
/// launch starts. The runtime sets a workgroup variable's slot to the block's linear id plus
/// one (`x + grid_x * (y + grid_y * z) + 1`, wrapping) once every byte of the variable has
/// been written in that block; a load the object proved no write of its variable can race
/// with (no write of it follows the same barrier) then has nothing to check, and the object
/// skips the hook while the slot holds its block's value.
pub const CHECK_READY_OFFSET: usize = 144;
/// The number of ready slots; workgroup variables past them get `u64::MAX`, and every load
/// of theirs calls the hook.
pub const CHECK_READY_SLOTS: usize = 32;
/// Byte offset of the checked run's barrier hook for a row of threads: `extern "C"
/// fn(*mut context, site: *const CheckSite, first thread x: u32, count: u32, thread y/z:
/// u32, block x/y/z: u32)`, what [`CHECK_BARRIER_OFFSET`]'s hook does for each thread
/// `(first + i, y, z)`, `i < count`: a thread loop whose every thread reaches the barrier
/// calls it once after its threads ran.
pub const CHECK_BARRIERS_OFFSET: usize = CHECK_READY_OFFSET + 4 * CHECK_READY_SLOTS;
/// Byte offset of the checked run's workgroup-store hook for a row of threads: `extern "C"
/// fn(*mut context, variable, offset: u64, stride: i64, bytes: u64, count: u32, thread y/z:
/// u32, block x/y/z: u32)`: thread `(i, y, z)`, `i < count`, stored
/// `bytes` at byte `offset + i * stride` (wrapping). A thread loop that a test before it
/// proved free of races (no two of its threads touch a byte one of them writes, and it is
/// the whole of its barrier interval) calls it once per row, before its threads run, for
/// each store every thread below `count` makes; the runtime records the bytes as written
/// in the block (nothing else: no race can involve them).
pub const CHECK_WRITES_OFFSET: usize = CHECK_BARRIERS_OFFSET + 8;
/// Byte offset of the checked run's global-memory hook: `extern "C" fn(*mut context, site:
/// *const CheckSite, pointer: *const u8, bytes: u64, value: u64, value_known: u32, thread
/// x/y/z: u32, block x/y/z: u32)`, called before every access of global memory that passed
/// its checks, while [`CHECK_GLOBAL_ON_OFFSET`] is not zero: `bytes` at `pointer`, and for a
/// store of at most 8 bytes (`value_known` 1) the value stored, zero-extended. The runtime
/// keeps the shadow that finds reads of memory never written and races between the threads
/// of a launch.
pub const CHECK_GLOBAL_OFFSET: usize = CHECK_WRITES_OFFSET + 8;
/// Byte offset of the checked run's global-memory switch (`u32`): not zero while the
/// uninitialized-read or race check is chosen (`GPU_EMBED_CHECK`), the same for the whole
/// launch; zero, a checked object's loops run without the [`CHECK_GLOBAL_OFFSET`] calls.
pub const CHECK_GLOBAL_ON_OFFSET: usize = CHECK_GLOBAL_OFFSET + 8;
/// Byte offset of the checked run's global-memory hook for a row of threads: `extern "C"
/// fn(*mut context, site: *const CheckSite, start: u64, step: i64, bytes: u64, first: u32,
/// count: u32, thread y/z: u32, block x/y/z: u32)`, what [`CHECK_GLOBAL_OFFSET`]'s hook does
/// for each thread `(first + i, y, z)`, `i < count`, accessing `bytes` at `start + i * step`
/// (no value known): a thread loop whose every thread its guard lets through makes the
/// access, at an address stepping by at least its size, calls it once before its threads
/// run, for each such access in the order they are made, while [`CHECK_GLOBAL_ON_OFFSET`] is
/// not zero.
pub const CHECK_GLOBAL_ROWS_OFFSET: usize = CHECK_GLOBAL_ON_OFFSET + 8;
/// The bytes of a checked launch's context, at least: a checked object may read any of
/// them from the start of the kernel on.
pub const CHECK_CONTEXT_BYTES: usize = CHECK_GLOBAL_ROWS_OFFSET + 8;
/// What a checked object passes for an access that failed its check: a constant of the
/// object, `#[repr(C)]` `{ location: *const c_char, kind: u32, parameter: i32, check: u32,
/// detail: u32 }`, the op's `file:line:col` (NUL-terminated), a `CHECK_*` kind (what the
/// access does), the kernel parameter the pointer was traced to (-1: none), which check
/// failed (`CHECK_BOUNDS`, `CHECK_INDEX`, `CHECK_ALIGNMENT`) and what that check needs
/// said (the dimension; the alignment).
pub const CHECK_SITE_BYTES: usize = 24;
/// A site's check: the access lies outside the memory its pointer may reach; the report's
/// `address, bytes, low, high` are the access and that memory.
pub const CHECK_BOUNDS: u32 = 0;
/// A site's check: an index of a memref access lies outside its dimension (the site's
/// `detail`), even where the address stays inside the memref (a row overrun of a 2-D
/// memref); the report's `address, bytes, low, high` are the index, the elements the access
/// spans along the dimension (a vector's length), 0 and the dimension's size.
pub const CHECK_INDEX: u32 = 1;
/// A site's check: the address is not a multiple of the alignment the access declares (the
/// site's `detail`, from the op's `alignment` or its type), which faults on GPUs; the
/// report's `address, bytes` are the access.
pub const CHECK_ALIGNMENT: u32 = 2;
/// A load.
pub const CHECK_LOAD: u32 = 0;
/// A store.
pub const CHECK_STORE: u32 = 1;
/// An atomic read-modify-write or compare-and-swap.
pub const CHECK_ATOMIC: u32 = 2;
/// A copy's (or fill's) reads.
pub const CHECK_COPY_READ: u32 = 3;
/// A copy's (or fill's) writes.
pub const CHECK_COPY_WRITE: u32 = 4;
/// The CPUs (LLVM's names, the x86-64 psABI's microarchitecture levels) each blocks entry
/// of an x86-64 host object is compiled for when the build names no CPU: the baseline every
/// x86-64 processor runs (SSE2), v3 (AVX2, FMA, BMI2: Haswell, Zen 1 and later) and v4
/// (AVX-512 F/BW/CD/DQ/VL: Skylake-X, Zen 4 and later). Index i is CPU level i.
pub const X86_64_CPUS: [&str; 3] = ["x86-64", "x86-64-v3", "x86-64-v4"];
/// Dynamic shared memory a host launch may use (gpu-build reserves this much per thread).
pub const DYNAMIC_SHARED_BYTES: u32 = 64 * 1024;
/// The most threads a block of a host launch has.
pub const MAX_THREADS: u32 = 1024;
/// The most blocks a host launch has along each grid dimension (CUDA's limit for x): ids
/// and sizes then fit a non-negative `i32`, which gpu-build tells LLVM (the ranges let it
/// prove thread indices never wrap, as guards on them need).
pub const MAX_GRID: u32 = i32::MAX as u32;
/// Threads per subgroup (warp) of a host launch: shuffles, subgroup reductions and MMA
/// fragments run over groups of this many consecutive threads, as on NVIDIA GPUs.
pub const SUBGROUP_SIZE: u32 = 32;

/// The entry point that runs one GPU thread of `kernel`.
pub fn thread_entry(prefix: &str, kernel: &str) -> String {
    format!("{prefix}{kernel}")
}

/// The entry point that runs every thread of a range of blocks of `kernel`, one after
/// another: `(params, context, first: u64, count: u64) -> u32`, blocks by linear id (x
/// fastest), the context's block ids ignored; returns a `STATUS_*`. One call per chunk of
/// blocks amortizes what a call costs (the thread-local context, the parameters) over many
/// blocks.
pub fn blocks_entry(prefix: &str, kernel: &str) -> String {
    format!("{prefix}{kernel}.blocks")
}

/// The blocks ran.
pub const STATUS_OK: u32 = 0;
/// The threads of a block reached different barriers (a barrier in control flow that
/// depends on the thread, which the GPU programming model forbids); the context's block ids
/// (slots 6 to 8) name the block. Blocks before it ran.
pub const STATUS_DIVERGENT_BARRIER: u32 = 1;
/// The per-thread storage of a kernel split at its barriers could not be allocated; no
/// block ran.
pub const STATUS_OUT_OF_MEMORY: u32 = 2;
/// The kernel runs a coroutine per thread (`HostEntries::coroutine_kernels`); no block ran.
pub const STATUS_NEEDS_COROUTINES: u32 = 3;

/// How a host object's kernels are called: each kernel `k` has an entry point
/// `<symbol_prefix>k(void **params, void *context)` in the static library the build script links.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostEntries {
    /// What every entry point's symbol starts with (unique to the crate, file and module).
    pub symbol_prefix: String,
    /// Kernels whose threads the scheduler runs as coroutines, switching at each barrier
    /// (barriers `gpu-build` could not split the kernel at). Every other kernel runs through its
    /// blocks entry ([`blocks_entry`]).
    pub coroutine_kernels: Vec<String>,
    /// Whether the entry points check every memory access (`GPU_EMBED_CHECK=1` at build time):
    /// the runtime then passes the checked run's functions in the context
    /// ([`CHECK_REPORT_OFFSET`]) and fails the launch with what they report.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub checked: bool,
    /// The static library holding the entry points (`lib<library>.a` in `gpu-build/host/`).
    /// The build script links it into the crate; the embedding code names it as well, so that
    /// what the build script's link flags do not reach (the crate's doc tests) links it too.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub library: String,
}
