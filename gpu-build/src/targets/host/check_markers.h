// The conditions of the checked host objects' checks, as calls of two functions the
// optimization pipeline knows (check.cpp writes them, optimize.cpp versions thread loops on
// them, then `lowerCheckMarkers` turns every call into the code it stands for). As calls, each
// condition stays one value through LLVM's pipeline, whatever instcombine does with its users,
// so a copy of a thread loop in which it is known to hold can replace it by a constant.
#pragma once

namespace llvm {
class Function;
}

namespace gpu_check {

// `i1 gpu.check.within(i64 address, i64 bytes, i64 low, i64 high)`: whether the `bytes` from
// `address` lie within [low, high) (without wrapping). Reads no memory.
constexpr const char *WITHIN = "gpu.check.within";

// `i1 gpu.check.unready(ptr slot, i32 stamp)`: whether the i32 at `slot` (a workgroup
// variable's ready slot in the launch context) is not `stamp` (the running block's): once a
// block has written a variable in full, the runtime stamps the slot, and it keeps the stamp
// for the rest of the block. Reads memory.
constexpr const char *UNREADY = "gpu.check.unready";

// Replaces every call of either function in `F` by the code it stands for. Returns whether it
// changed anything.
bool lowerCheckMarkers(llvm::Function &F);

} // namespace gpu_check
