// The host optimization pipeline's pass for checked objects' loops (check_markers.h) that
// versions loops on the checks a test before the loop decides for every iteration, a thread
// loop also on a test that no two of its nest's threads touch a byte of workgroup memory one of
// them writes (workgroup_nest.cpp: then its copy tells the runtime's shadow nothing but the
// bytes it writes, a row at a time). pipeline.cpp adds it after its own thread-loop pass.

#include "check_markers.h"
#include "checked_loops.h"
#include "global_rows.h"
#include "loops.h"
#include "pipeline.h"
#include "workgroup_nest.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/Analysis/AliasAnalysis.h"
#include "llvm/Analysis/InstructionSimplify.h"
#include "llvm/Analysis/LoopInfo.h"
#include "llvm/Analysis/ScalarEvolution.h"
#include "llvm/Analysis/ScalarEvolutionExpressions.h"
#include "llvm/Analysis/ValueTracking.h"
#include "llvm/IR/Dominators.h"
#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/InstIterator.h"
#include "llvm/IR/Instructions.h"
#include "llvm/IR/IntrinsicInst.h"
#include "llvm/IR/PassManager.h"
#include "llvm/Transforms/Scalar/IndVarSimplify.h"
#include "llvm/Transforms/Scalar/LICM.h"
#include "llvm/Transforms/Scalar/LoopPassManager.h"
#include "llvm/Transforms/Scalar/LoopUnrollPass.h"
#include "llvm/Transforms/Utils/BasicBlockUtils.h"
#include "llvm/Transforms/Utils/Local.h"
#include "llvm/Transforms/Utils/LoopSimplify.h"
#include "llvm/Transforms/Utils/LoopUtils.h"
#include "llvm/Transforms/Utils/ScalarEvolutionExpander.h"
#include "llvm/Transforms/Utils/ValueMapper.h"

#include <utility>

using namespace llvm;
using namespace gpu_check;

namespace {

// The most instructions a loop of a checked object may have for `versionCheckedLoop` to copy it.
constexpr unsigned CheckedCopyBudget = 4000;

// A check of a checked object's loop (a marker of check_markers.h) that gives the same answer
// in every iteration when a test before the loop passes: for `within`, an address the same in
// every iteration or stepping by the same amount, with bounds the loop does not compute (the
// test: every address the iterations give lies within them); for `unready`, a slot and a stamp
// the same in every iteration (sameEveryIteration; the test: the block has stamped the slot already).
struct KnownCheck {
  CallInst *call;
  // within: the address at the first iteration and its step (unready: none).
  const SCEV *start, *step;
  const SCEV *bytes, *low, *high;
  // The call's value when the test passes.
  bool answer;
  // Where only the iterations below a bound make the check (`within`): those the test asks
  // about.
  Guard guard;
  // The loops inside the loop (`within` in one of them): per loop, the address's step and the
  // loop's backedges, the same in every iteration of the loop versioned.
  SmallVector<std::pair<const SCEV *, const SCEV *>, 2> inner;
};

// Whether `I` is a check a loop can be versioned on.
bool isCheckMarker(const Instruction &I) {
  return callsMarker(I, gpu_check::WITHIN) || callsMarker(I, gpu_check::INDEX_WITHIN) ||
         callsMarker(I, gpu_check::ALIGNED) ||
         callsMarker(I, gpu_check::CHOSEN) || callsMarker(I, gpu_check::UNREADY);
}

// `call` as a KnownCheck of `L`, if it is one (nothing changes).
bool describeCheck(CallInst *call, const Loop &L, ScalarEvolution &SE, AAResults &AA,
                   SCEVExpander &expander, KnownCheck &check) {
  auto invariant = [&](Value *value, const SCEV *&S) {
    if (!SE.isSCEVable(value->getType()))
      return false;
    S = SE.getSCEV(value);
    return sameEveryIteration(S, L, SE, AA, expander);
  };
  check = {call, nullptr, nullptr, nullptr, nullptr, nullptr, false, Guard(), {}};
  if (call->getCalledFunction()->getName() == gpu_check::UNREADY) {
    // The stamp is the block's: a loop it is the same in runs within one block.
    check.answer = false;
    return sameEveryIteration(call->getArgOperand(0), L, AA) &&
           sameEveryIteration(call->getArgOperand(1), L, AA);
  }
  if (call->getCalledFunction()->getName() == gpu_check::CHOSEN) {
    // The same for the whole launch: the copy is for launches without the global hook.
    check.answer = false;
    return sameEveryIteration(call->getArgOperand(0), L, AA);
  }
  check.answer = true;
  bool aligned = call->getCalledFunction()->getName() == gpu_check::ALIGNED;
  // `aligned`: the alignment in `bytes`, no bounds.
  if (!invariant(call->getArgOperand(1), check.bytes) ||
      (!aligned && (!invariant(call->getArgOperand(2), check.low) ||
                    !invariant(call->getArgOperand(3), check.high))))
    return false;
  // The address as start + step * (L's counter) + the steps of the loops inside L (each
  // run the same number of times in every iteration of L) times their counters: one term of a
  // sum recurs in those loops, the others are the same in every iteration (an outer loop's
  // counter times a stride LLVM cannot fold into the recurrence).
  auto [address, others] = recurringTerm(SE.getSCEV(call->getArgOperand(0)), L, SE);
  check.step = SE.getZero(address->getType());
  while (const auto *rec = dyn_cast<SCEVAddRecExpr>(address)) {
    const Loop *loop = rec->getLoop();
    if (!rec->isAffine() || !L.contains(loop))
      break;
    const SCEV *step = rec->getStepRecurrence(SE);
    if (loop == &L) {
      if (!check.step->isZero())
        return false;
      check.step = step;
    } else {
      const SCEV *backedges = SE.getBackedgeTakenCount(loop);
      if (isa<SCEVCouldNotCompute>(backedges) || !SE.isLoopInvariant(backedges, &L) ||
          !expander.isSafeToExpand(backedges) || !sameEveryIteration(step, L, SE, AA, expander) ||
          !loop->getLoopPreheader())
        return false;
      check.inner.push_back({step, backedges});
    }
    address = rec->getStart();
  }
  check.start = SE.getAddExpr(others, address);
  for (const SCEV *S : {check.start, check.step})
    if (!sameEveryIteration(S, L, SE, AA, expander))
      return false;
  return true;
}

// The test of `check` before loop `L` (at `at`, in its preheader), whose iterations after the
// first are `backedges`.
Value *testBefore(const KnownCheck &given, const Loop &L, ScalarEvolution &SE, AAResults &AA,
                  const SCEV *backedges, SCEVExpander &expander, Instruction *at) {
  IRBuilder<> b(at);
  // Its terms with the values they take from the loop computed before it.
  KnownCheck check = given;
  for (const SCEV **S : {&check.start, &check.step, &check.bytes, &check.low, &check.high})
    if (*S)
      *S = outsideOf(*S, L, SE, AA, at);
  for (auto &[step, innerBackedges] : check.inner)
    step = outsideOf(step, L, SE, AA, at);
  for (const SCEV **S : {&check.guard.limit, &check.guard.excluded})
    if (*S)
      *S = outsideOf(*S, L, SE, AA, at);
  if (check.call->getCalledFunction()->getName() == gpu_check::UNREADY) {
    Value *slot = computeOutside(check.call->getArgOperand(0), L, AA, at);
    Value *stamp = computeOutside(check.call->getArgOperand(1), L, AA, at);
    return b.CreateICmpEQ(b.CreateLoad(stamp->getType(), slot), stamp, "stamped");
  }
  if (check.call->getCalledFunction()->getName() == gpu_check::CHOSEN) {
    Value *on = computeOutside(check.call->getArgOperand(0), L, AA, at);
    return b.CreateICmpEQ(b.CreateLoad(b.getInt32Ty(), on), b.getInt32(0), "unchosen");
  }
  if (check.call->getCalledFunction()->getName() == gpu_check::ALIGNED) {
    // Every address is the first plus multiples of the steps: all aligned when they are.
    Value *bits = wide(check.start, false, expander, at);
    bits = b.CreateOr(bits, wide(check.step, true, expander, at));
    for (auto [step, innerBackedges] : check.inner)
      bits = b.CreateOr(bits, wide(step, true, expander, at));
    Value *mask = b.CreateSub(wide(check.bytes, false, expander, at), b.getIntN(128, 1));
    return b.CreateICmpEQ(b.CreateAnd(bits, mask), b.getIntN(128, 0), "aligned");
  }
  // In 128 bits nothing wraps: the addresses the iterations the guard lets through give (none:
  // nothing to test), with those of the loops inside.
  Value *iterations = b.CreateAdd(wide(backedges, false, expander, at), b.getIntN(128, 1));
  PassingRange range = passingRange(check.guard, iterations, expander, at);
  Value *count = range.count;
  Value *zero = b.getIntN(128, 0);
  // The first address of the range, computed in the access's own width (an index one below
  // zero at an iteration the guard turns away is zero one step on).
  Type *type = check.start->getType();
  Value *first = b.CreateZExt(
      b.CreateAdd(expander.expandCodeFor(check.start, type, at),
                  b.CreateMul(expander.expandCodeFor(check.step, type, at),
                              b.CreateTrunc(range.first, type))),
      count->getType());
  Value *none = b.CreateICmpEQ(count, b.getIntN(128, 0));
  Value *lowest = first, *highest = first;
  // Each loop's reach from the first address, down or up: the lowest and the highest address
  // are at the corners, every address between them.
  auto reach = [&](const SCEV *step, Value *steps) {
    Value *span = b.CreateMul(wide(step, true, expander, at), steps);
    Value *down = b.CreateICmpSLT(span, zero);
    lowest = b.CreateAdd(lowest, b.CreateSelect(down, span, zero));
    highest = b.CreateAdd(highest, b.CreateSelect(down, zero, span));
  };
  reach(check.step, b.CreateSelect(none, zero, b.CreateSub(count, b.getIntN(128, 1))));
  for (auto [step, innerBackedges] : check.inner)
    reach(step, wide(innerBackedges, false, expander, at));
  Value *within = b.CreateAnd(
      b.CreateICmpSGE(lowest, wide(check.low, false, expander, at)),
      b.CreateICmpSLE(b.CreateAdd(highest, wide(check.bytes, false, expander, at)),
                      wide(check.high, false, expander, at)));
  return b.CreateOr(none, within, "within");
}

// Whether `L` looks like a thread loop: its counter (from 0 by 1) is the thread id something in
// it is given, a check's report or hook (as their thread x, y or z: the ids are a hook's last six
// arguments, an index it reports comes before them) or the ids variable (one of `L`'s own blocks
// stores it there for the kernel's body). Only a heuristic, of which loops are worth a copy: a
// copy is right for any loop.
bool isThreadLoop(const Loop &L, LoopInfo &LI, ScalarEvolution &SE) {
  auto isCounter = [&](Value *value) {
    if (!SE.isSCEVable(value->getType()))
      return false;
    const SCEV *S = SE.getSCEV(value);
    if (const auto *cast = dyn_cast<SCEVTruncateExpr>(S))
      S = cast->getOperand();
    const auto *rec = dyn_cast<SCEVAddRecExpr>(S);
    return rec && rec->getLoop() == &L && rec->isAffine() && rec->getStart()->isZero() &&
           rec->getStepRecurrence(SE)->isOne();
  };
  for (BasicBlock *B : L.blocks())
    for (Instruction &I : *B) {
      if (auto *call = dyn_cast<CallInst>(&I)) {
        unsigned ids = call->arg_size() >= 6 ? call->arg_size() - 6 : 0;
        if (call->hasMetadata(gpu_check::HOOK_CALL) &&
            any_of(drop_begin(call->args(), ids), isCounter))
          return true;
        continue;
      }
      auto *store = dyn_cast<StoreInst>(&I);
      auto *variable = store ? dyn_cast<GlobalVariable>(
                                   getUnderlyingObject(store->getPointerOperand()))
                             : nullptr;
      if (variable && variable->getAddressSpace() == 0 && LI.getLoopFor(B) == &L &&
          isCounter(store->getValueOperand()))
        return true;
    }
  return false;
}

// In a checked object, runs a copy of loop `L` without the checks that give the same
// answer in every iteration, when the tests before the loop say they do (an access whose address
// steps by the same amount per thread, within its buffer for the first and the last thread, is
// within it for all; a variable's ready stamp, once set, stays for the block), and, when `L` is
// a thread loop whose nest no two threads of which touch a byte of workgroup memory one of them
// writes (`raceFreeTest`), without telling the shadow of its workgroup accesses: the copy keeps
// no report branches, so the vectorizer takes it as it takes the unchecked loop. Returns whether
// it changed `L`.
bool versionCheckedLoop(Loop &L, LoopInfo &LI, DominatorTree &DT, ScalarEvolution &SE,
                        AAResults &AA) {
  // Innermost loops, and thread loops around loops of the kernel's own (the matmul's k loop):
  // one test before the thread loop, and a copy whose kernel loops LLVM can unroll and whose
  // threads it can vectorize.
  bool kernelLoopsInside =
      !L.isInnermost() && isThreadLoop(L, LI, SE) &&
      all_of(L.getSubLoops(), [&](const Loop *inner) {
        return inner->isInnermost() && !isThreadLoop(*inner, LI, SE);
      });
  if ((!L.isInnermost() && !kernelLoopsInside) || none_of(L.blocks(), [](BasicBlock *B) {
        return any_of(*B, [](Instruction &I) {
          return isCheckMarker(I) || callsMarker(I, gpu_check::WORKGROUP);
        });
      }))
    return false;
  // The loops versioned before share their exits with their copies.
  simplifyLoop(&L, &DT, &LI, &SE, nullptr, nullptr, false);
  if (!L.getLoopPreheader() || !L.hasDedicatedExits())
    return false;
  const SCEV *backedges = SE.getBackedgeTakenCount(&L);
  if (isa<SCEVCouldNotCompute>(backedges))
    return false;
  backedges = SE.getTruncateOrZeroExtend(backedges, Type::getInt64Ty(L.getHeader()->getContext()));
  SCEVExpander expander(SE, "checked");
  SmallVector<KnownCheck, 16> known;
  unsigned size = 0;
  for (BasicBlock *B : L.blocks())
    for (Instruction &I : *B) {
      KnownCheck check;
      if (++size > CheckedCopyBudget)
        return false;
      if (!isCheckMarker(I))
        continue;
      if (!describeCheck(cast<CallInst>(&I), L, SE, AA, expander, check))
        continue;
      check.guard = guardOf(B, L, &L, DT, SE, expander, /*ranges=*/&AA);
      known.push_back(check);
    }
  DenseMap<Value *, bool> answers;
  for (const KnownCheck &check : known)
    answers[check.call] = check.answer;
  WorkgroupNest nest;
  bool raceFree = describeWorkgroupNest(L, DT, SE, AA, expander, answers, nest);
  // With the global-memory hook's switch on too, when the loop's accesses of global memory are
  // rows: the copy tells the runtime of them a row at a time.
  SmallVector<GlobalRow, 4> globalRows;
  bool rows = describeGlobalRows(L, LI, DT, SE, AA, expander, answers, globalRows);
  if (!raceFree)
    nest = WorkgroupNest();
  if ((known.empty() && !raceFree) || !expander.isSafeToExpand(backedges))
    return false;
  formLCSSA(L, DT, &LI, &SE);
  BasicBlock *header = L.getHeader();
  BasicBlock *preheader = SplitEdge(L.getLoopPreheader(), header, &DT, &LI, nullptr, "checked");
  Instruction *at = preheader->getTerminator();
  IRBuilder<> b(at);
  Value *all = b.getTrue();
  for (const KnownCheck &check : known)
    if (!rows || !callsMarker(*check.call, gpu_check::CHOSEN))
      all = b.CreateAnd(all, testBefore(check, L, SE, AA, backedges, expander, at));
  SmallVector<GlobalRowCall, 4> rowCalls;
  if (rows)
    rowCalls = globalRowCalls(globalRows, L, SE, AA, expander,
                              b.CreateAdd(wide(backedges, false, expander, at), b.getIntN(128, 1)),
                              at, all);
  SmallVector<RowWrites, 4> writes;
  if (raceFree) {
    all = b.CreateAnd(all, raceFreeTest(nest, L, AA, expander, at));
    writes = rowWrites(nest, L, AA, expander, at);
  }
  ValueToValueMapTy map;
  BasicBlock *copyPreheader =
      gpu_host::copyLoopJoiningExits(L, preheader, ".checked", LI, DT, map);
  BranchInst::Create(copyPreheader, header, all, at->getIterator());
  at->eraseFromParent();
  // The original keeps a preheader of its own.
  SplitEdge(preheader, header, nullptr, nullptr);
  // In the copy the known checks are constants, and what only a failed check reached goes.
  SmallVector<BasicBlock *, 16> copies;
  for (BasicBlock *B : L.blocks())
    copies.push_back(cast<BasicBlock>(map[B]));
  LLVMContext &C = header->getContext();
  for (const WorkgroupAccess &access : nest.accesses)
    cast<Instruction>(map[access.call])->eraseFromParent();
  for (const GlobalRow &row : globalRows)
    cast<Instruction>(map[row.call])->eraseFromParent();
  for (const KnownCheck &check : known)
    replaceAndRecursivelySimplify(cast<Instruction>(map[check.call]),
                                  ConstantInt::getBool(C, check.answer));
  for (BasicBlock *copy : copies)
    ConstantFoldTerminator(copy);
  removeUnreachableBlocks(*header->getParent());
  // Last: the blocks it adds are in no loop LoopInfo knows of (the caller computes it again).
  callRowWrites(writes, nest, copyPreheader->getTerminator());
  callGlobalRows(rowCalls, copyPreheader->getTerminator());
  return true;
}

// The running minima and maxima innermost loop `L` keeps of a value the same in every
// iteration (a checked object's barrier bookkeeping: the lowest and the highest state its
// threads reach, which a region's threads reach alike), each computed in every iteration before
// the loop's one exit: after the loop such an extreme is the extreme of its start and that
// value, computed before the loop instead, so no value leaves the loop for it (and exitAtGuard
// can end a race-free copy of a tree reduction's step at its guard). Returns whether it
// changed `L`.
bool foldInvariantExtremes(Loop &L, DominatorTree &DT) {
  BasicBlock *header = L.getHeader(), *latch = L.getLoopLatch();
  BasicBlock *preheader = L.getLoopPreheader(), *exit = L.getExitBlock();
  if (!L.isInnermost() || !latch || !preheader || !exit || L.getExitingBlock() != latch)
    return false;
  bool changed = false;
  for (PHINode &phi : header->phis()) {
    auto *running = dyn_cast<IntrinsicInst>(phi.getIncomingValueForBlock(latch));
    if (!running || !L.contains(running->getParent()) ||
        !DT.dominates(running->getParent(), latch))
      continue;
    Intrinsic::ID extreme = running->getIntrinsicID();
    if (extreme != Intrinsic::umin && extreme != Intrinsic::umax && extreme != Intrinsic::smin &&
        extreme != Intrinsic::smax)
      continue;
    Value *other = running->getArgOperand(0) == &phi   ? running->getArgOperand(1)
                   : running->getArgOperand(1) == &phi ? running->getArgOperand(0)
                                                       : nullptr;
    bool hoisted = false;
    if (!other || !L.makeLoopInvariant(other, hoisted, preheader->getTerminator()))
      continue;
    changed |= hoisted;
    Value *after = nullptr;
    for (PHINode &out : exit->phis()) {
      if (out.getIncomingValueForBlock(latch) != running)
        continue;
      if (!after) {
        IRBuilder<> b(preheader->getTerminator());
        after = b.CreateBinaryIntrinsic(extreme, phi.getIncomingValueForBlock(preheader), other);
      }
      out.setIncomingValueForBlock(latch, after);
      changed = true;
    }
  }
  return changed;
}

// After versioning, every innermost loop with its invariant extremes folded
// (`foldInvariantExtremes`) and, where the rest of an iteration past a guard does nothing,
// ended at the guard as unchecked objects' loops are: what it changes is the copies, whose
// hooks are gone (a loop that calls one past its guard stays). Returns whether it changed `L`.
bool tidyAfterVersioning(Loop &L, LoopInfo &, DominatorTree &DT, ScalarEvolution &SE,
                         AAResults &) {
  bool folded = foldInvariantExtremes(L, DT);
  if (folded)
    SE.forgetLoop(&L);
  return gpu_host::exitAtGuard(L, DT, SE) || folded;
}

// The checked objects' markers (check_markers.h): innermost loops versioned on them
// (`versionCheckedLoop`), then every marker lowered to the code it stands for, before the
// vectorizers.
struct VersionCheckedLoops : PassInfoMixin<VersionCheckedLoops> {
  PreservedAnalyses run(Function &F, FunctionAnalysisManager &FAM) {
    if (none_of(instructions(F), [](Instruction &I) {
          return isCheckMarker(I) || callsMarker(I, gpu_check::BARRIER) ||
                 callsMarker(I, gpu_check::WORKGROUP);
        }))
      return PreservedAnalyses::all();
    // Each loop once: the markers a copy keeps are the ones its original could not be
    // versioned on.
    bool versioned = changeLoops(F, FAM, true, versionCheckedLoop);
    bool changed = gpu_check::lowerCheckMarkers(F) || versioned;
    if (versioned) {
      FAM.invalidate(F, PreservedAnalyses::none());
      // In the copies, what LLVM's loop passes did to unchecked loops before: the thread's ids
      // kept in registers (their stores to the ids variable leave the loop), the values that
      // leave it computed after it, short kernel loops unrolled (the vectorizer takes a thread
      // loop with none inside). Then the copies' bookkeeping folds and they end at their
      // guards.
      FunctionPassManager late;
      late.addPass(createFunctionToLoopPassAdaptor(LICMPass(LICMOptions()), true));
      LoopPassManager loopPasses;
      loopPasses.addPass(IndVarSimplifyPass());
      loopPasses.addPass(LoopFullUnrollPass(3));
      late.addPass(createFunctionToLoopPassAdaptor(std::move(loopPasses)));
      late.run(F, FAM);
      FAM.invalidate(F, PreservedAnalyses::none());
      changeLoops(F, FAM, false, tidyAfterVersioning);
    }
    return changed ? PreservedAnalyses::none() : PreservedAnalyses::all();
  }
};

} // namespace

void gpu_check::addCheckedLoopVersioning(FunctionPassManager &FPM) {
  FPM.addPass(VersionCheckedLoops());
}
