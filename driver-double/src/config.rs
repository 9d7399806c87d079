//! What the double pretends to be, read once from the environment of the process that loads it.

use std::sync::OnceLock;

pub struct Config {
    /// The NVIDIA devices, one compute capability each (`sm_90,sm_80`).
    pub cuda_devices: Vec<String>,
    /// NVIDIA devices (ordinals) in the prohibited compute mode: no context can be made on them.
    pub cuda_prohibited: Vec<usize>,
    /// NVIDIA devices (ordinals) in the exclusive-process compute mode, held by another process:
    /// listed, but their context cannot be made.
    pub cuda_busy: Vec<usize>,
    /// `cuDriverGetVersion`'s answer (12080 for CUDA 12.8).
    pub cuda_version: i32,
    /// The AMD devices, one `gcnArchName` each (`gfx90a:sramecc+:xnack-,gfx1030`).
    pub hip_devices: Vec<String>,
    /// `hipRuntimeGetVersion`'s answer (60300000 for ROCm 6.3).
    pub hip_version: i32,
    /// Memory per device, in bytes.
    pub memory: u64,
    /// Where the record goes (`record.rs`); none: nowhere.
    pub log: Option<String>,
    /// The vendors whose registered host memory devices see at an address of their own
    /// (`cuda`, `hip`; default `hip`, whose runtime may map it elsewhere; CUDA with unified
    /// addressing uses the host's).
    pub mapped_registrations: Vec<crate::vendor::Vendor>,
    /// Calls to fail: `cuMemAlloc_v2=2` (every call) or `cuMemAlloc_v2#3=2` (the third),
    /// comma-separated.
    pub failures: Vec<Failure>,
}

pub struct Failure {
    pub call: String,
    /// 1-based; none: every call.
    pub nth: Option<u64>,
    pub code: i32,
}

fn list(name: &str, default: &str) -> Vec<String> {
    std::env::var(name)
        .unwrap_or_else(|_| default.to_string())
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(String::from)
        .collect()
}

fn number<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(default)
}

fn ordinals(name: &str) -> Vec<usize> {
    list(name, "")
        .iter()
        .filter_map(|o| o.parse().ok())
        .collect()
}

fn failures() -> Vec<Failure> {
    list("GPU_DOUBLE_FAIL", "")
        .iter()
        .filter_map(|spec| {
            let (call, code) = spec.split_once('=')?;
            let (call, nth) = match call.split_once('#') {
                Some((call, nth)) => (call, Some(nth.parse().ok()?)),
                None => (call, None),
            };
            Some(Failure {
                call: call.to_string(),
                nth,
                code: code.parse().ok()?,
            })
        })
        .collect()
}

pub fn config() -> &'static Config {
    static CONFIG: OnceLock<Config> = OnceLock::new();
    CONFIG.get_or_init(|| Config {
        cuda_devices: list("GPU_DOUBLE_CUDA_DEVICES", "sm_90,sm_80"),
        cuda_version: number("GPU_DOUBLE_CUDA_VERSION", 12080),
        cuda_prohibited: ordinals("GPU_DOUBLE_CUDA_PROHIBITED"),
        cuda_busy: ordinals("GPU_DOUBLE_CUDA_BUSY"),
        hip_devices: list("GPU_DOUBLE_HIP_DEVICES", "gfx90a:sramecc+:xnack-,gfx1030"),
        hip_version: number("GPU_DOUBLE_HIP_VERSION", 60_300_000),
        memory: number("GPU_DOUBLE_MEMORY", 1 << 30),
        log: std::env::var("GPU_DOUBLE_LOG").ok(),
        failures: failures(),
        mapped_registrations: list("GPU_DOUBLE_MAPPED_REGISTRATIONS", "hip")
            .iter()
            .filter_map(|v| match v.as_str() {
                "cuda" => Some(crate::vendor::Vendor::Cuda),
                "hip" => Some(crate::vendor::Vendor::Hip),
                _ => None,
            })
            .collect(),
    })
}
