// The checked host objects' checks, as calls of functions the optimization pipeline knows
// (check_accesses.cpp writes them; version_checked_loops.cpp versions thread loops on the
// conditions and gather_barrier_hooks.cpp gathers a thread loop's barrier hooks into one call;
// then `lowerCheckMarkers`, in check_markers.cpp, turns every call into the code it stands
// for). As a call, a condition stays one value through LLVM's pipeline, whatever instcombine
// does with its users, so a copy of a thread loop in which it is known to hold can replace it by
// a constant.
#pragma once

#include "llvm/Support/ModRef.h"

#include <cstdint>

namespace llvm {
class CallInst;
class Function;
}

namespace gpu_check {

// What an access does, as a site's kind (gpu_manifest::targets::host::CHECK_*).
enum AccessKind : uint32_t {
  ACCESS_LOAD,
  ACCESS_STORE,
  ACCESS_ATOMIC,
  ACCESS_COPY_READ,
  ACCESS_COPY_WRITE
};

// `i1 gpu.check.within(i64 address, i64 bytes, i64 low, i64 high)`: whether the `bytes` from
// `address` lie within [low, high) (without wrapping). Reads no memory.
constexpr const char *WITHIN = "gpu.check.within";

// `i1 gpu.check.within.index(i64 index, i64 count, i64 low, i64 high)`: `within` for a memref
// index (gpu_check::INDEX), marked as reading memory: an index the same for every thread of a
// loop (a row's, in a loop over columns) would otherwise leave the loop before the versioning
// sees it, and the loop keep the branch to its report.
constexpr const char *INDEX_WITHIN = "gpu.check.within.index";

// `i1 gpu.check.aligned(i64 address, i64 alignment)`: whether `address` is a multiple of
// `alignment` (a power of two). Reads no memory.
constexpr const char *ALIGNED = "gpu.check.aligned";

// `void gpu.check.index(i64 index, i64 count, i64 size, i32 dimension)`: written by the MLIR
// lowering of a checked object (gpu-build's `targets/host/index_checks.rs`) just before a
// memref access, with the op's location: the `count` elements from `index` along
// `dimension` must lie within its `size`. check_accesses.cpp turns each into a `within` of
// the access that follows and a report, and erases it.
constexpr const char *INDEX = "gpu.check.index";

// What a site's check is (gpu_manifest::targets::host::CHECK_BOUNDS...).
enum SiteCheck : uint32_t { CHECK_BOUNDS, CHECK_INDEX, CHECK_ALIGNMENT };

// `i1 gpu.check.chosen(ptr on)`: whether the u32 at `on` (host_abi::CHECK_GLOBAL_ON_OFFSET in
// the launch's context) is not zero: the launch's chosen checks need the global-memory hook.
// The same for the whole launch: a loop it is false for runs a copy without the hook's calls.
// Reads memory (so that it stays in the loop for the versioning to find).
constexpr const char *CHOSEN = "gpu.check.chosen";

// `i1 gpu.check.unready(ptr slot, i32 stamp)`: whether the i32 at `slot` (a workgroup
// variable's ready slot in the launch context) is not `stamp` (the running block's): once a
// block has written a variable in full, the runtime stamps the slot, and it keeps the stamp
// for the rest of the block. Reads memory.
constexpr const char *UNREADY = "gpu.check.unready";

// `void gpu.check.barrier(ptr one, ptr row, ptr context, ptr site, i32 thread x, y, z,
// i32 block x, y, z)`: the thread reaching a barrier, told to the runtime by calling `one`
// (host_abi::CHECK_BARRIER_OFFSET's hook) with the arguments after `row`; a thread loop whose
// every thread reaches it calls `row` (CHECK_BARRIERS_OFFSET's) once after the loop instead.
// Touches its pointer arguments' memory and the runtime's own.
constexpr const char *BARRIER = "gpu.check.barrier";

// `void gpu.check.workgroup(ptr hook, ptr row, ptr slot, i32 stamp, ptr context, ptr site,
// ptr variable, i64 offset, i64 bytes, i32 thread x, y, z, i32 block x, y, z)`: an access of
// workgroup memory told to the runtime's shadow by calling `hook`
// (host_abi::CHECK_WORKGROUP_OFFSET's) with the arguments after `stamp`. `slot` is the
// variable's ready slot (null: it has none) and `stamp` the running block's, as for `unready`.
// A thread loop in which no two threads' accesses of a variable can overlap runs a copy
// without these calls: once the variables it reads are written in full, and with one call of
// `row` (CHECK_WRITES_OFFSET's) before it per store every thread makes. Touches its pointer
// arguments' memory and the runtime's own.
constexpr const char *WORKGROUP = "gpu.check.workgroup";

// The operands of a `gpu.check.workgroup` call, in order.
enum WorkgroupOperand : unsigned {
  WORKGROUP_HOOK,
  WORKGROUP_ROW,
  WORKGROUP_SLOT,
  WORKGROUP_STAMP,
  WORKGROUP_CONTEXT,
  WORKGROUP_SITE,
  WORKGROUP_VARIABLE,
  WORKGROUP_OFFSET,
  WORKGROUP_BYTES,
  WORKGROUP_THREAD,  // x, y, z
  WORKGROUP_BLOCK = WORKGROUP_THREAD + 3  // x, y, z
};

// `void gpu.check.global(ptr hook, ptr row, ptr on, ptr context, ptr site, ptr pointer,
// i64 bytes, i64 value, i32 value known, i32 thread x, y, z, i32 block x, y, z)`: an access of
// global memory told to the runtime's shadow by calling `hook`
// (host_abi::CHECK_GLOBAL_OFFSET's) with the arguments after `on` (the switch the CHOSEN
// marker reads, which guards the call). A thread loop whose every such access is made by every
// thread at an address stepping by at least its size runs a copy without these calls, and with
// one call of `row` (CHECK_GLOBAL_ROWS_OFFSET's) before it per access while the switch is on
// (global_rows.cpp). Touches its pointer arguments' memory and the runtime's own.
constexpr const char *GLOBAL = "gpu.check.global";

// The operands of a `gpu.check.global` call, in order.
enum GlobalOperand : unsigned {
  GLOBAL_HOOK,
  GLOBAL_ROW,
  GLOBAL_ON,
  GLOBAL_CONTEXT,
  GLOBAL_SITE,
  GLOBAL_POINTER,
  GLOBAL_BYTES,
  GLOBAL_VALUE,
  GLOBAL_KNOWN,
  GLOBAL_THREAD,  // x, y, z
  GLOBAL_BLOCK = GLOBAL_THREAD + 3  // x, y, z
};

// The metadata kind marking a call of a runtime's check function. Such a function is given the
// launch's context (the runtime's), constants of the object and values, never the address of a
// variable the module defines: it writes none of them, whatever LLVM's alias analysis can tell
// of the context pointer.
constexpr const char *HOOK_CALL = "gpu.check.hook";

// Marks `call` as a call of a runtime's check function (HOOK_CALL).
void markHookCall(llvm::CallInst *call);

// The memory a runtime's check function touches, for LLVM: what its pointer arguments point
// into (the context; the object's constants) as `arguments` says, and the runtime's own
// (reports, shadows) as `own` says, never the kernel's buffers or the object's variables (its
// thread and block ids), so the code around a call keeps those in registers.
llvm::MemoryEffects runtimeEffects(llvm::ModRefInfo arguments, llvm::ModRefInfo own);

// Replaces every call of the marker functions in `F` by the code it stands for. Returns whether it
// changed anything.
bool lowerCheckMarkers(llvm::Function &F);

} // namespace gpu_check
