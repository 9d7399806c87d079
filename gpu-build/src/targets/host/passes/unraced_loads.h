// The kernel analyses of the checked objects' instrumentation (check_accesses.cpp), in
// unraced_loads.cpp.
#pragma once

#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringRef.h"

namespace llvm {
class Function;
class GlobalVariable;
class Instruction;
class Value;
}

namespace gpu_check {

// NVPTX's shared (workgroup) address space.
constexpr unsigned WORKGROUP_ADDRESS_SPACE = 3;

// What `pointer` was computed from: LLVM's underlying object, also through the memref
// descriptors MLIR's lowering builds with `insertvalue` and reads with `extractvalue`.
const llvm::Value *underlyingObject(const llvm::Value *pointer);

// NVVM's block-wide barriers (what gpu.barrier lowers to).
bool isBlockBarrier(llvm::StringRef name);

// The workgroup variable an access's pointer is traced to, if it is one.
llvm::GlobalVariable *workgroupVariable(llvm::Value *pointer);

// The workgroup loads of kernel `F` that no write of their variable can race with: no write
// of the variable follows any of the barriers (or the kernel's start) the load follows
// without another barrier between. Threads of a block pass the same barriers (a divergent
// one is reported as such), so such a load and a write of its variable are never in the same
// barrier interval. Empty where something the instrumentation cannot see may write workgroup
// memory: a call of anything but a barrier, a memory intrinsic or a function that writes no
// memory, a workgroup pointer made generic, or a workgroup write whose variable is unknown.
llvm::DenseSet<llvm::Instruction *> unracedLoads(llvm::Function &F);

} // namespace gpu_check
