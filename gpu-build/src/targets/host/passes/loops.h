// Loop helpers the host target's passes share (loops.cpp defines them): copying a loop, the
// marks a pass leaves on a loop, and a thread loop's guard and its exit there.
#pragma once

#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/Analysis/LoopInfo.h"
#include "llvm/Analysis/ScalarEvolution.h"
#include "llvm/IR/Dominators.h"
#include "llvm/IR/Instructions.h"
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

// Whether `L` is one of the two copies of a thread loop versioned at a guard
// (exit_thread_loops_at_guards.cpp's versionAtGuard): which of them a row of threads runs
// depends on the row.
bool versionedAtGuard(const llvm::Loop &L);

// Marks the loop ending at `latch` as one versionedAtGuard names.
void markVersioned(llvm::BasicBlock *latch);

// Adds `property` to the id of the loop whose back edge is `backEdge`, keeping what the id said
// besides (a parallel thread loop's access group, an interleave count). A loop's id is a
// distinct node whose first operand is itself.
void addLoopProperty(llvm::Instruction *backEdge, llvm::MDNode *property);

// Asks the vectorizer not to interleave the loop ending at `latch`. A thread loop runs as many
// iterations as the block is wide, often 16 or 32 threads: a 16-wide AVX-512 loop interleaved
// twice needs 32 threads before its vector body runs at all, and a 16 x 16 block's rows then
// ran in the scalar remainder (measured on the stencil: 2.5-4.1 ms instead of 3.0-5.5 ms).
void interleaveOnce(llvm::BasicBlock *latch);

// In which senses an increasing AddRec never wraps over the loop.
struct NoWrap {
  bool asUnsigned = false;
  bool asSigned = false;
};

// `S` as an affine AddRec of `L` with a positive constant step (a thread id, or an index made
// from one, increasing over the loop), with the senses in which it does not wrap; null if it is
// not one. No signed wrap from a non-negative start is no unsigned wrap either, which is what
// sign-extended thread ids give.
const llvm::SCEVAddRecExpr *increasing(const llvm::SCEV *S, const llvm::Loop &L,
                                       llvm::ScalarEvolution &SE, NoWrap &noWrap);

// Whether a comparison of an increasing AddRec keeps its order in `predicate`'s sense.
bool orderKept(llvm::ICmpInst::Predicate predicate, const NoWrap &noWrap);

// The header's guard of a loop whose one exit is at its latch (other than the header), with
// the loop's exit block; null if the loop has another shape.
llvm::BranchInst *headerGuard(const llvm::Loop &L, llvm::BasicBlock *&exit);

// Whether an iteration of `L` that does not take its header's edge to `work` has no effect, so
// that a loop may skip such iterations: what runs outside the guarded work must be free of
// effects and outside subloops, and must stay reachable once the header's other edge is gone
// (so the loop keeps its blocks). Values leaving the loop are the callers' to check.
bool idleIterationsHaveNoEffect(const llvm::Loop &L, llvm::BasicBlock *work,
                                const llvm::DominatorTree &DT);

// The values of `L` used after it (an exit block's phi counts as a use after it).
llvm::SmallVector<llvm::Instruction *, 4> valuesLeaving(const llvm::Loop &L);

// Sends the header's edge to `idle` to the loop's exit instead: the loop leaves at the first
// iteration that does not do the work. Each exit phi takes `atHeader` of what it takes from
// the latch.
void leaveWhenIdle(llvm::Loop &L, llvm::BranchInst *guard, llvm::BasicBlock *idle,
                   llvm::BasicBlock *exit,
                   llvm::function_ref<llvm::Value *(llvm::Value *)> atHeader);

// Makes `L` leave at its header's guard once the guard has turned for good (a thread loop whose
// threads past a bound do nothing), when everything outside the guarded work is free of
// effects and no value leaves the loop. Returns whether it did.
bool exitAtGuard(llvm::Loop &L, llvm::DominatorTree &DT, llvm::ScalarEvolution &SE);

} // namespace gpu_host
