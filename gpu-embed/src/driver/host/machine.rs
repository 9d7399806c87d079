//! What the machine has, read once where reading costs: its hardware threads, the CPU level
//! the host objects' entry points are chosen by, its memory; and how host allocations are laid
//! out on it.

use gpu_manifest::targets::host as host_abi;
use std::alloc::Layout;
use std::sync::OnceLock;

/// Alignment of host allocations, as GPU allocations are at least this aligned.
pub(super) const ALIGNMENT: usize = 256;
/// Allocations of at least this size start on a huge-page boundary and ask the kernel for
/// transparent huge pages: a kernel streaming over tens of megabytes then takes a TLB miss
/// every 2 MiB instead of every 4 KiB (saxpy over 2^24 floats: about 12% faster here, which
/// is what PoCL's buffers had over ours).
const HUGE_PAGE: usize = 2 << 20;

/// How an allocation of `bytes` (plus its header) is laid out; `None` past the address space.
pub(super) fn allocation_layout(bytes: usize) -> Option<Layout> {
    let total = bytes.checked_add(ALIGNMENT)?;
    let align = if bytes >= HUGE_PAGE {
        HUGE_PAGE
    } else {
        ALIGNMENT
    };
    Layout::from_size_align(total, align).ok()
}

/// Asks for transparent huge pages over a fresh allocation, before anything touches it (pages
/// faulted in later come as huge pages where the system allows; a refusal changes nothing but
/// speed, so it is ignored).
pub(super) fn advise_huge_pages(base: *mut u8, layout: Layout) {
    #[cfg(target_os = "linux")]
    if layout.align() == HUGE_PAGE {
        // SAFETY: `base` starts an allocation of `layout.size()` bytes that this process owns;
        // MADV_HUGEPAGE changes only how its pages are backed, never their contents.
        unsafe { libc::madvise(base.cast(), layout.size(), libc::MADV_HUGEPAGE) };
    }
    #[cfg(not(target_os = "linux"))]
    let _ = (base, layout);
}

/// The machine's memory, from `/proc/meminfo` (zero where it cannot be read).
pub(super) struct MemInfo {
    pub total: u64,
    pub available: u64,
}

pub(super) fn host_memory() -> MemInfo {
    let text = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let field = |name: &str| {
        text.lines()
            .find_map(|line| line.strip_prefix(name))
            .and_then(|rest| {
                rest.trim()
                    .trim_end_matches("kB")
                    .trim()
                    .parse::<u64>()
                    .ok()
            })
            .map_or(0, |kib| kib * 1024)
    };
    MemInfo {
        total: field("MemTotal:"),
        available: field("MemAvailable:"),
    }
}

/// The hardware threads the host device runs blocks on, read once: the standard library reads
/// the cgroup quota files on every call, which cost an empty launch most of its time.
pub(super) fn cores() -> usize {
    static CORES: OnceLock<usize> = OnceLock::new();
    *CORES.get_or_init(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

/// Which of `host_abi::X86_64_CPUS` the blocks entries of x86-64 host objects run: the
/// highest this processor has every feature of (0 elsewhere: other objects have one copy), or
/// a lower one named by `GPU_EMBED_HOST_CPU` (to compare them, or to run what a user with an
/// older processor runs; a higher one than the processor has is never taken).
pub(super) fn cpu_level() -> u32 {
    static LEVEL: OnceLock<u32> = OnceLock::new();
    *LEVEL.get_or_init(|| {
        let detected = detected_cpu_level();
        std::env::var(HOST_CPU_VARIABLE)
            .ok()
            .and_then(|name| host_abi::X86_64_CPUS.iter().position(|cpu| *cpu == name))
            .map_or(detected, |asked| detected.min(asked as u32))
    })
}

/// Chooses a lower CPU level than the processor's (see [`cpu_level`]).
const HOST_CPU_VARIABLE: &str = "GPU_EMBED_HOST_CPU";

/// The name of [`cpu_level`]'s CPU, or the architecture's where objects have one copy.
pub(super) fn cpu_name() -> &'static str {
    if cfg!(target_arch = "x86_64") {
        host_abi::X86_64_CPUS[cpu_level() as usize]
    } else {
        std::env::consts::ARCH
    }
}

/// The highest x86-64 microarchitecture level whose every feature (as LLVM defines the level)
/// this processor and its operating system support.
#[cfg(target_arch = "x86_64")]
fn detected_cpu_level() -> u32 {
    use std::arch::is_x86_feature_detected as has;
    let v2 = has!("cmpxchg16b")
        && has!("popcnt")
        && has!("sse3")
        && has!("ssse3")
        && has!("sse4.1")
        && has!("sse4.2");
    let v3 = v2
        && has!("avx")
        && has!("avx2")
        && has!("bmi1")
        && has!("bmi2")
        && has!("f16c")
        && has!("fma")
        && has!("lzcnt")
        && has!("movbe")
        && has!("xsave");
    let v4 = v3
        && has!("avx512f")
        && has!("avx512bw")
        && has!("avx512cd")
        && has!("avx512dq")
        && has!("avx512vl");
    if v4 {
        2
    } else if v3 {
        1
    } else {
        0
    }
}

#[cfg(not(target_arch = "x86_64"))]
fn detected_cpu_level() -> u32 {
    0
}
