// What the host optimization pipeline's passes for checked objects' loops share
// (gather_barrier_hooks.cpp, version_checked_loops.cpp, workgroup_nest.cpp, global_rows.cpp;
// checked_loops.cpp defines it): a loop counter's guard, values the same in every iteration and
// computed outside the loop, thread loops' counters, which blocks an iteration reaches in a
// copy whose checks are known, and the driver that changes a function's loops one at a time.
#pragma once

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/Analysis/AliasAnalysis.h"
#include "llvm/Analysis/LoopInfo.h"
#include "llvm/Analysis/ScalarEvolution.h"
#include "llvm/IR/Dominators.h"
#include "llvm/IR/Instructions.h"
#include "llvm/IR/PassManager.h"
#include "llvm/Transforms/Utils/ScalarEvolutionExpander.h"

#include <optional>
#include <utility>

namespace gpu_check {

// A comparison of a loop's counter (from 0 by 1) with a bound the loop does not change, that
// lets only the iterations below the bound reach a block: `counter < limit` (`<=` where
// `inclusive`), signed or not, in the branch ending `from`, whose edge to `to` the block's
// every path takes. No limit: no such guard. With `ranges` (guardOf, for `L` alone: its bounds
// may be values it loads in every iteration, sameEveryIteration), every such comparison on
// the way counts, and `excluded`, where set, is an iteration that does not reach the block
// either (a stencil's interior: not `x == 0`), when it is the first; `conditions` are the
// branch conditions the iterations that reach it see, and their values there.
struct Guard {
  const llvm::SCEV *limit = nullptr;
  bool isSigned = false, inclusive = false;
  llvm::BasicBlock *from = nullptr, *to = nullptr;
  const llvm::SCEV *excluded = nullptr;
  llvm::SmallVector<std::pair<llvm::Value *, bool>, 2> conditions;
  // Values the same for the whole loop that `conditions` hold only when they are false.
  llvm::SmallVector<llvm::Value *, 2> mustBeFalse;
};

// `S` computed before `at`, extended to 128 bits (signed or not), where nothing wraps.
llvm::Value *wide(const llvm::SCEV *S, bool isSigned, llvm::SCEVExpander &expander,
                  llvm::Instruction *at);

// How many of the first `count` iterations (i128, at least 0) `guard` lets through (all of
// them without a guard), computed before `at`.
llvm::Value *passing(const Guard &guard, llvm::Value *count, llvm::SCEVExpander &expander,
                     llvm::Instruction *at);

// The iterations `guard` lets through of the first `count` (i128) as a range: the first
// (i128: 1 where the guard turns away iteration 0, else 0) and how many from there (an
// iteration it turns away further on is not left out: `turnedAwayLater` says where there is
// one). Computed before `at`.
struct PassingRange {
  llvm::Value *first, *count, *turnedAwayLater;
};
PassingRange passingRange(const Guard &guard, llvm::Value *count, llvm::SCEVExpander &expander,
                          llvm::Instruction *at);

// Whether `I` calls the marker function `name` (check_markers.h).
bool callsMarker(const llvm::Instruction &I, const char *name);

// `value`'s SCEV, also where it is a phi whose every incoming value is the same (GVN merges the
// thread id each side of a check computes into one).
const llvm::SCEV *sameOnEveryPath(llvm::Value *value, llvm::ScalarEvolution &SE);

// Whether `value` is the same in every iteration of `L` and can be computed outside it, before
// or after (`computeOutside`): defined outside it, a load of what the loop does not write (a
// hook's function pointer, the block's ids), a phi of such loads of one location (`locationOf`:
// the ids LLVM loads again after each hook call), or an operation without effects (the site a
// barrier's region selects) of such values.
bool sameEveryIteration(llvm::Value *value, const llvm::Loop &L, llvm::AAResults &AA,
                        unsigned depth = 0);

// `value` (sameEveryIteration) computed before `at`, outside `L` (in its preheader or after it):
// a phi of loads as a load of their location, which the loop leaves alone.
llvm::Value *computeOutside(llvm::Value *value, const llvm::Loop &L, llvm::AAResults &AA,
                            llvm::Instruction *at);

// Whether `S` is the same in every iteration of `L` and can be computed before it
// (`outsideOf`): invariant, or its values defined in `L` sameEveryIteration (a load of the
// block's ids, which the loop loads again after each hook call), and safe to expand.
bool sameEveryIteration(const llvm::SCEV *S, const llvm::Loop &L, llvm::ScalarEvolution &SE,
                        llvm::AAResults &AA, llvm::SCEVExpander &expander);

// `S` as the one term of it that recurs in `L` or a loop inside it (`S` itself where it is no
// sum with such a term) and the sum of the others, which `L` does not change where the result
// is to be of use (an address whose row offset is an outer loop's counter times a stride LLVM
// cannot fold into the recurrence).
std::pair<const llvm::SCEV *, const llvm::SCEV *>
recurringTerm(const llvm::SCEV *S, const llvm::Loop &L, llvm::ScalarEvolution &SE);

// `S` (sameEveryIteration) with its values defined in `L` computed before `at`
// (`computeOutside`): what may be expanded at `at`.
const llvm::SCEV *outsideOf(const llvm::SCEV *S, const llvm::Loop &L, llvm::ScalarEvolution &SE,
                            llvm::AAResults &AA, llvm::Instruction *at);

// Whether `id` (a thread id a marker passes) is the counter of `loop`, from 0 by 1: `loop` is
// the thread loop of that dimension.
bool isThreadCounter(llvm::Value *id, const llvm::Loop *loop, llvm::ScalarEvolution &SE);

// The iterations of `L` (i64), or null where ScalarEvolution cannot tell.
const llvm::SCEV *iterationsOf(const llvm::Loop &L, llvm::ScalarEvolution &SE);

// The guard in `L` that lets only the iterations below a bound (the same for all of `outer`'s)
// reach block `B`, if one does: the nearest such comparison of `L`'s counter among the branches
// whose one edge every path to `B` takes.
Guard guardOf(llvm::BasicBlock *B, llvm::Loop &L, const llvm::Loop *outer,
              llvm::DominatorTree &DT, llvm::ScalarEvolution &SE, llvm::SCEVExpander &expander,
              llvm::AAResults *ranges = nullptr);

// The value of `condition` in the copy, where it is a check whose answer the copy knows
// (`answers`) or `not`, `and` and `or` of such checks and constants (a checked access's report
// branches on the checks before it and its own).
std::optional<bool> knownValue(llvm::Value *condition,
                               const llvm::DenseMap<llvm::Value *, bool> &answers,
                               unsigned depth = 0);

// Whether every path of an iteration of innermost loop `L` from `start` reaches `target`
// before the loop's next iteration or exit, where a branch on a check the copy knows the
// answer of (`answers`) goes that way only.
bool alwaysReaches(llvm::BasicBlock *start, llvm::BasicBlock *target, const llvm::Loop &L,
                   const llvm::DenseMap<llvm::Value *, bool> &answers);

// Runs `change` on the loops of `F` one change at a time, with fresh analyses after each, until
// none changes (each loop at most once where `eachLoopOnce`). Returns whether any changed.
template <typename Change>
bool changeLoops(llvm::Function &F, llvm::FunctionAnalysisManager &FAM, bool eachLoopOnce,
                 Change change) {
  bool changed = false;
  llvm::SmallPtrSet<llvm::BasicBlock *, 16> done;
  for (unsigned round = 0; round < 256; ++round) {
    auto &LI = FAM.getResult<llvm::LoopAnalysis>(F);
    auto &DT = FAM.getResult<llvm::DominatorTreeAnalysis>(F);
    auto &SE = FAM.getResult<llvm::ScalarEvolutionAnalysis>(F);
    auto &AA = FAM.getResult<llvm::AAManager>(F);
    bool once = false;
    for (llvm::Loop *L : LI.getLoopsInPreorder()) {
      if (eachLoopOnce && !done.insert(L->getHeader()).second)
        continue;
      if (change(*L, LI, DT, SE, AA)) {
        once = true;
        break;
      }
    }
    if (!once)
      break;
    changed = true;
    FAM.invalidate(F, llvm::PreservedAnalyses::none());
  }
  return changed;
}

} // namespace gpu_check
