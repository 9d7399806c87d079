// A checked object's thread loop's accesses of global memory as rows, for the checked loops'
// versioning (version_checked_loops.cpp; global_rows.cpp defines them): while the launch's
// checks need the global-memory hook (`GPU_EMBED_CHECK=uninitialized` or `races`), a loop whose
// every such access is made by every thread its guard lets through, at an address stepping by
// at least the access's size from thread to thread, runs a copy without the per-access calls,
// and tells the runtime of each access once per row of threads before the copy runs.
#pragma once

#include "checked_loops.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/Analysis/AliasAnalysis.h"
#include "llvm/Analysis/LoopInfo.h"
#include "llvm/Analysis/ScalarEvolution.h"
#include "llvm/IR/Dominators.h"
#include "llvm/IR/Instructions.h"
#include "llvm/Transforms/Utils/ScalarEvolutionExpander.h"

namespace gpu_check {

// A `gpu.check.global` marker of a thread loop's body as a row: thread x (the loop's counter)
// accesses `bytes` at start + step x, for the threads its guard lets through (guardOf with
// `ranges`: below a bound, and not a first thread it turns away).
struct GlobalRow {
  llvm::CallInst *call;
  const llvm::SCEV *start, *step, *bytes;
  Guard guard;
};

// The `gpu.check.global` markers of loop `L` as rows, in the order an iteration makes them,
// when there is at least one and every one is a row (see the top of the file), the checks
// `answers` has holding and the switch on. False otherwise (nothing changes).
bool describeGlobalRows(llvm::Loop &L, llvm::LoopInfo &LI, llvm::DominatorTree &DT,
                        llvm::ScalarEvolution &SE, llvm::AAResults &AA,
                        llvm::SCEVExpander &expander,
                        const llvm::DenseMap<llvm::Value *, bool> &answers,
                        llvm::SmallVectorImpl<GlobalRow> &rows);

// A call of the global row hook (CHECK_GLOBAL_ROWS_OFFSET's): its function, the switch that
// says whether to make it, and its arguments.
struct GlobalRowCall {
  llvm::Value *hook, *on;
  llvm::SmallVector<llvm::Value *, 12> arguments;
};

// The row hook's calls for `rows` of `L`, whose iterations are `iterations` (i128), computed
// before `L` (at `at`, in its preheader); `valid` (i1) gets the conditions under which they
// are the rows (a thread a guard turns away is the first, if any).
llvm::SmallVector<GlobalRowCall, 4> globalRowCalls(llvm::ArrayRef<GlobalRow> rows,
                                                   const llvm::Loop &L,
                                                   llvm::ScalarEvolution &SE, llvm::AAResults &AA,
                                                   llvm::SCEVExpander &expander,
                                                   llvm::Value *iterations,
                                                   llvm::Instruction *at, llvm::Value *&valid);

// Makes `calls` before `at` while their switch is on. Adds blocks in no loop LoopInfo knows of.
void callGlobalRows(llvm::ArrayRef<GlobalRowCall> calls, llvm::Instruction *at);

} // namespace gpu_check
