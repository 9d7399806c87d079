//! Where a build's time goes, per stage, summed over every worker thread: what the benchmark
//! prints to show how much of a build is the floor (LLVM's optimizer and code generator, ptxas,
//! ld.lld) and how much is gpu-build's own pipeline.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// The stages of a build.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// Reading kernel files and describing their gpu.modules (MLIR or LLVM parser).
    Parse,
    /// The MLIR lowering pipeline and the translation to LLVM IR.
    Lower,
    /// Linking user bitcode and device libraries, and the vendor's pre/post-link steps.
    Link,
    /// LLVM's optimization pipeline.
    Optimize,
    /// LLVM's code generator (ISA and object emission).
    Codegen,
    /// ptxas (PTX to cubin).
    Ptxas,
    /// ld.lld (AMDGPU object to hsaco).
    Lld,
    /// Looking up and storing objects in the cache.
    Cache,
    /// Writing objects, the host library and the manifest.
    Output,
}

const STAGES: [Stage; 9] = [
    Stage::Parse,
    Stage::Lower,
    Stage::Link,
    Stage::Optimize,
    Stage::Codegen,
    Stage::Ptxas,
    Stage::Lld,
    Stage::Cache,
    Stage::Output,
];

impl Stage {
    /// Whether the stage is work any compiler of these kernels must do (LLVM's optimizer and code
    /// generator, the vendors' tools) rather than gpu-build's own pipeline.
    pub fn is_floor(self) -> bool {
        matches!(
            self,
            Stage::Optimize | Stage::Codegen | Stage::Ptxas | Stage::Lld
        )
    }

    /// The stage's name in reports.
    pub fn name(self) -> &'static str {
        match self {
            Stage::Parse => "parse",
            Stage::Lower => "lower (MLIR)",
            Stage::Link => "link",
            Stage::Optimize => "LLVM optimize",
            Stage::Codegen => "LLVM codegen",
            Stage::Ptxas => "ptxas",
            Stage::Lld => "ld.lld",
            Stage::Cache => "cache",
            Stage::Output => "outputs",
        }
    }
}

/// Time spent per stage, summed over threads (so it can exceed the build's wall time).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StageTimes {
    times: Vec<(Stage, Duration)>,
}

impl StageTimes {
    /// Every stage with its time, in pipeline order.
    pub fn iter(&self) -> impl Iterator<Item = (Stage, Duration)> + '_ {
        self.times.iter().copied()
    }

    /// The time spent in `stage`.
    pub fn get(&self, stage: Stage) -> Duration {
        self.iter()
            .find(|(s, _)| *s == stage)
            .map_or(Duration::ZERO, |(_, t)| t)
    }

    /// The time spent in every stage.
    pub fn total(&self) -> Duration {
        self.iter().map(|(_, t)| t).sum()
    }

    /// The time of the stages any compiler must spend ([`Stage::is_floor`]).
    pub fn floor(&self) -> Duration {
        self.iter()
            .filter(|(s, _)| s.is_floor())
            .map(|(_, t)| t)
            .sum()
    }
}

/// The build's counters, shared by its threads.
#[derive(Debug, Default)]
pub(crate) struct Timings {
    nanos: [AtomicU64; STAGES.len()],
}

impl Timings {
    /// Runs `work`, adding its duration to `stage`.
    pub fn time<R>(&self, stage: Stage, work: impl FnOnce() -> R) -> R {
        let start = Instant::now();
        let result = work();
        self.add(stage, start.elapsed());
        result
    }

    pub fn add(&self, stage: Stage, duration: Duration) {
        let index = STAGES.iter().position(|s| *s == stage).unwrap_or(0);
        let nanos = u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX);
        self.nanos[index].fetch_add(nanos, Ordering::Relaxed);
    }

    pub fn snapshot(&self) -> StageTimes {
        StageTimes {
            times: STAGES
                .iter()
                .zip(&self.nanos)
                .map(|(stage, nanos)| (*stage, Duration::from_nanos(nanos.load(Ordering::Relaxed))))
                .collect(),
        }
    }
}
