// Loop helpers the host target's passes share (optimize.cpp defines them).
#pragma once

#include "llvm/Analysis/LoopInfo.h"
#include "llvm/Analysis/ScalarEvolution.h"
#include "llvm/IR/Dominators.h"
#include "llvm/Transforms/Utils/ValueMapper.h"

namespace gpu_host {

// A copy of `L` (whose own preheader is `preheader`) with a preheader of its own that enters
// it, named with `suffix`; `map` takes the original's values to the copy's. Nothing branches to
// the copy yet, and its exits' phis do not yet take its values.
llvm::BasicBlock *copyLoop(llvm::Loop &L, llvm::BasicBlock *preheader, const char *suffix,
                           llvm::LoopInfo &LI, llvm::DominatorTree &DT,
                           llvm::ValueToValueMapTy &map);

// A copy of `L` as copyLoop makes, whose exit blocks' phis (`L` in LCSSA form, with dedicated
// exits) take the copy's values from the copy's exiting blocks.
llvm::BasicBlock *copyLoopJoiningExits(llvm::Loop &L, llvm::BasicBlock *preheader,
                                       const char *suffix, llvm::LoopInfo &LI,
                                       llvm::DominatorTree &DT, llvm::ValueToValueMapTy &map);

// Whether `L` is one of the two copies of a thread loop versioned at a guard (optimize.cpp's
// versionAtGuard): which of them a row of threads runs depends on the row.
bool versionedAtGuard(const llvm::Loop &L);

// Makes `L` leave at its header's guard once the guard has turned for good (a thread loop whose
// threads past a bound do nothing), when everything outside the guarded work is free of
// effects and no value leaves the loop. Returns whether it did.
bool exitAtGuard(llvm::Loop &L, llvm::DominatorTree &DT, llvm::ScalarEvolution &SE);

} // namespace gpu_host
