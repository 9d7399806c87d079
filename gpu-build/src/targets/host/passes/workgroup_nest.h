// A nest of thread loops' workgroup accesses, for the checked loops' versioning
// (version_checked_loops.cpp; workgroup_nest.cpp defines them): the accesses as affine
// functions of the threads' ids, the test before the loop that no two threads of the nest
// touch a byte one of them writes, and the calls of the row hook that tell the runtime's shadow
// of a copy's stores a row at a time.
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

#include <utility>

namespace gpu_check {

// A workgroup access in a thread loop's body (a `gpu.check.workgroup` marker), as an affine
// function of its thread's ids over the whole nest of thread loops: its byte offset in the
// variable is base + stride[0] x + stride[1] y + stride[2] z, every term the same for the nest.
struct WorkgroupAccess {
  llvm::CallInst *call;
  llvm::Value *variable;
  bool writes;
  const llvm::SCEV *base;
  const llvm::SCEV *stride[3];
  const llvm::SCEV *bytes;
  // The offset for thread x = 0 of the running row (the same for the loop).
  const llvm::SCEV *row;
  // Where only threads x below a bound make the access.
  Guard guard;
  // Every thread of the row the guard lets through (all, without one) makes the access.
  bool everyThread = false;
};

// The workgroup accesses of an innermost thread loop, the whole of its block's barrier interval
// (a region of a split kernel runs as one nest of thread loops, z, y and x, from one barrier to
// the next; a kernel without barriers as one nest): what a test before the loop needs to tell
// that no byte one thread accesses is written by another thread of the nest.
struct WorkgroupNest {
  llvm::SmallVector<WorkgroupAccess, 8> accesses;
  // The nest's threads per dimension, x y z (i64).
  const llvm::SCEV *threads[3];
  // Some access's base is known for the running row only, or the loop is one of a pair
  // versioned at a guard, either of which a row may run: the test also asks for one row.
  bool rowOnly = false;
  // Per variable the nest reads, its ready slot and the block's stamp (sameEveryIteration: the
  // same for all the loop's iterations, as the block is): the variable must be written in full.
  llvm::SmallVector<std::pair<llvm::Value *, llvm::Value *>, 4> ready;
  // The stores of the variables the nest only writes, every one made by every thread its guard
  // lets through (indices into `accesses`): the copy tells the runtime of them before it runs
  // (`rowWrites`), a row at a time, instead of the variable being written in full.
  llvm::SmallVector<unsigned, 4> recorded;
};

// The workgroup accesses of innermost loop `L` as a WorkgroupNest, when `L` is the x loop of a
// nest of thread loops (every marker's thread ids its and its parents' counters) and every
// access is affine in the thread's x, when the checks `answers` has hold. False where one is
// not (nothing changes).
bool describeWorkgroupNest(llvm::Loop &L, llvm::DominatorTree &DT, llvm::ScalarEvolution &SE,
                           llvm::AAResults &AA, llvm::SCEVExpander &expander,
                           const llvm::DenseMap<llvm::Value *, bool> &answers,
                           WorkgroupNest &nest);

// The test before the loop (at `at`) that no thread of `nest` accesses a byte of a variable
// another thread writes, and that the block has written every variable the nest reads in full
// (its ready stamp): then the accesses need no shadow. In 128 bits nothing wraps. Two accesses
// with the same offsets and size (a thread reading the element it writes) overlap only within
// a thread when one thread's bytes never reach another's (the strides in x, y, z each step
// past what the dimensions below span); any other two, when the bytes the whole nest's threads
// reach with them do not meet.
llvm::Value *raceFreeTest(const WorkgroupNest &nest, const llvm::Loop &L, llvm::AAResults &AA,
                          llvm::SCEVExpander &expander, llvm::Instruction *at);

// A call of the workgroup row hook (CHECK_WRITES_OFFSET's): its function and arguments, and
// the slot and stamp that tell whether the variable is written in full already (null: no slot).
struct RowWrites {
  llvm::Value *hook, *slot, *stamp;
  llvm::SmallVector<llvm::Value *, 12> arguments;
};

// The calls of the row hook that tell the runtime of the stores `nest.recorded` the threads
// of the running row make: what their markers would tell it, thread by thread. Computed before
// `L` (at `at`, in its preheader).
llvm::SmallVector<RowWrites, 4> rowWrites(const WorkgroupNest &nest, const llvm::Loop &L,
                                          llvm::AAResults &AA, llvm::SCEVExpander &expander,
                                          llvm::Instruction *at);

// Makes `calls` before `at` (the copy's preheader), each where its variable is not written in
// full yet: once it is, nothing the nest does can race with or read what the call would record.
void callRowWrites(llvm::ArrayRef<RowWrites> calls, const WorkgroupNest &nest,
                   llvm::Instruction *at);

} // namespace gpu_check
