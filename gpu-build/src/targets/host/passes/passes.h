// The C API of the host target's pass library: every entry point the Rust side calls
// (passes/mod.rs mirrors this header), each defined in the file of its pass. The C++ is where
// LLVM's C API has no equivalent: cloning, SSA repair, pass registration.
#pragma once

#include "llvm-c/Core.h"
#include "llvm-c/TargetMachine.h"

#include <cstdint>

// One memref argument of a kernel: its descriptor's aligned pointer is parameter `aligned`, the
// offset `aligned + 1`, then `rank` sizes and `rank` strides.
struct GpuCheckMemref {
  uint32_t kernel;
  uint32_t aligned;
  uint32_t rank;
  uint32_t element_bytes;
};

// Where the checked run's functions and tables are in the context (gpu_build_check_accesses).
struct GpuCheckLayout {
  uint32_t report_offset;
  uint32_t find_offset;
  uint32_t bounds_offset;
  uint32_t workgroup_offset;
  uint32_t barrier_offset;
  // The ready slots (`host_abi::CHECK_READY_OFFSET`): `ready_slots` u32s.
  uint32_t ready_offset;
  uint32_t ready_slots;
  // Bytes of a dynamic workgroup array.
  uint32_t dynamic_workgroup_bytes;
  uint32_t barriers_offset;
  uint32_t writes_offset;
  // The global-memory hook and its switch (`host_abi::CHECK_GLOBAL_OFFSET`, `_ON_OFFSET`).
  uint32_t global_offset;
  uint32_t global_on_offset;
  uint32_t global_rows_offset;
  // The context's size.
  uint32_t context_bytes;
};

extern "C" {

// LLVM's default pipeline at `level` (0 to 3) with loop unrolling, interleaving and both
// vectorizers on (as upstream's makeOptimizingTransformer), plus ExitThreadLoopsAtGuards and
// then the row blocking of thread_rows.cpp before the vectorizers, on the functions whose names
// end with `entrySuffix`; before them, with
// `cpuCount` CPUs, the blocks entries multiversioned for them (see multiversionEntries).
// Returns false with `*error` set (free it with LLVMDisposeMessage) on failure. Defined in
// pipeline.cpp.
LLVMBool gpu_build_optimize_host(LLVMModuleRef module, LLVMTargetMachineRef machine,
                                 unsigned level, const char *entrySuffix,
                                 const char *const *cpus, unsigned cpuCount,
                                 const char *baselineCpu, unsigned levelOffset,
                                 const char *threadLoopMark, const char *threadBodyMark,
                                 const char *threadsMark, char **error);

// The region function of `body` (see the top of fission.cpp); null without `*reason` when `body`
// never reaches a barrier; null with `*reason` set (free it with LLVMDisposeMessage) when its
// barriers cannot be split this way. `uniform` are functions whose result is the same in every
// thread of a block; `threadIds` the three functions that read thread id x, y and z (each may be
// null); `subgroupBarrier` (one of `barriers`, or null) is the one only a subgroup waits at.
// `*subgroupStates` is Fissioned::subgroupStates. Defined in fission.cpp.
LLVMValueRef gpu_build_fission(LLVMValueRef body, LLVMValueRef *barriers, unsigned barrierCount,
                               LLVMValueRef subgroupBarrier, LLVMValueRef *uniform,
                               unsigned uniformCount, LLVMValueRef *threadIds,
                               const char *name, uint32_t done,
                               uint64_t *uniformBytes, uint64_t *threadBytes,
                               unsigned *barrierTotal, LLVMValueRef *subgroupStates,
                               char **reason);

// Instruments every function defined in `module` (see the top of check_accesses.cpp); `kernels`
// are the kernel functions, `memrefs` their memref arguments (`kernel` indexes `kernels`).
// `context` is the thread-local pointer to the launch's context; `source` names the kernel file
// where an op has no location of its own. Returns null, or a message (LLVMDisposeMessage) saying
// why not. Defined in check_accesses.cpp.
char *gpu_build_check_accesses(LLVMModuleRef module, LLVMValueRef context, const char *source,
                               LLVMValueRef const *kernels, uint32_t kernel_count,
                               const GpuCheckMemref *memrefs, uint32_t memref_count,
                               const GpuCheckLayout *layout);

} // extern "C"
