// The host optimization pipeline's pass for checked objects' thread loops (check_markers.h)
// that gathers a thread loop's barrier hooks into one call after the loop; pipeline.cpp adds it
// around its own thread-loop pass.

#include "check_markers.h"
#include "checked_loops.h"
#include "pipeline.h"

#include "llvm/Analysis/AliasAnalysis.h"
#include "llvm/Analysis/LoopInfo.h"
#include "llvm/Analysis/ScalarEvolution.h"
#include "llvm/Analysis/ScalarEvolutionExpressions.h"
#include "llvm/IR/Dominators.h"
#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/Instructions.h"
#include "llvm/IR/PassManager.h"
#include "llvm/Transforms/Utils/LoopSimplify.h"
#include "llvm/Transforms/Utils/LoopUtils.h"
#include "llvm/Transforms/Utils/ScalarEvolutionExpander.h"

using namespace llvm;
using namespace gpu_check;

namespace {

// In a checked object, when every thread of thread loop `L` tells the runtime it
// reached a barrier (a `gpu.check.barrier` call each iteration runs once, with the thread's x
// the loop's counter and everything else the same for the loop), one call of the row hook after
// the loop tells it for all of them: the runtime's per-thread work is a counter each, and the
// loop keeps no call outside its guarded work, so a tree reduction's step loop can end at its
// guard again. Every thread's accesses before the barrier come before the call still, and the
// next region's after it. Returns whether it changed `L`.
bool gatherBarrierHooks(Loop &L, LoopInfo &LI, DominatorTree &DT, ScalarEvolution &SE,
                        AAResults &AA) {
  // The barrier in the loop's own blocks: a loop inside it (the matmul's k loop before its
  // barrier) runs its blocks many times a thread.
  auto own = [&](BasicBlock *B) { return LI.getLoopFor(B) == &L; };
  if (none_of(L.blocks(), [&](BasicBlock *B) {
        return own(B) &&
               any_of(*B, [](Instruction &I) { return callsMarker(I, gpu_check::BARRIER); });
      }))
    return false;
  simplifyLoop(&L, &DT, &LI, &SE, nullptr, nullptr, false);
  BasicBlock *latch = L.getLoopLatch();
  BasicBlock *exit = L.getUniqueExitBlock();
  BasicBlock *preheader = L.getLoopPreheader();
  if (!latch || !exit || !preheader || L.getExitingBlock() != latch ||
      exit->getSinglePredecessor() != latch)
    return false;
  const SCEV *backedges = SE.getBackedgeTakenCount(&L);
  if (isa<SCEVCouldNotCompute>(backedges))
    return false;
  SCEVExpander expander(SE, "barriers");
  for (BasicBlock *B : L.blocks()) {
    if (!own(B) || !DT.dominates(B, latch))
      continue;
    for (Instruction &I : *B) {
      if (!callsMarker(I, gpu_check::BARRIER))
        continue;
      auto *call = cast<CallInst>(&I);
      // Arguments: one, row, context, site, thread x, y, z, block x, y, z.
      Value *x = call->getArgOperand(4);
      const auto *rec = dyn_cast<SCEVAddRecExpr>(sameOnEveryPath(x, SE));
      if (!rec || rec->getLoop() != &L || !rec->isAffine() || !rec->getStepRecurrence(SE)->isOne())
        continue;
      // Every other argument computed again after the loop, or, where it is a value the same
      // on every path (a thread's y, which GVN merges from both sides of a check), expanded
      // from its SCEV there.
      auto bySCEV = [&](unsigned i) {
        Value *value = call->getArgOperand(i);
        if (!SE.isSCEVable(value->getType()) || sameEveryIteration(value, L, AA))
          return (const SCEV *)nullptr;
        const SCEV *S = sameOnEveryPath(value, SE);
        return SE.isLoopInvariant(S, &L) && expander.isSafeToExpand(S) ? S : nullptr;
      };
      bool invariant = true;
      for (unsigned i = 0; i < call->arg_size(); ++i)
        invariant &= i == 4 || sameEveryIteration(call->getArgOperand(i), L, AA) || bySCEV(i);
      const SCEV *count = SE.getAddExpr(SE.getTruncateOrZeroExtend(backedges, x->getType()),
                                        SE.getOne(x->getType()));
      if (!invariant || !expander.isSafeToExpand(rec->getStart()) ||
          !expander.isSafeToExpand(count))
        continue;
      Instruction *at = preheader->getTerminator();
      Value *first = expander.expandCodeFor(rec->getStart(), x->getType(), at);
      Value *threads = expander.expandCodeFor(count, x->getType(), at);
      Instruction *after = &*exit->getFirstInsertionPt();
      auto again = [&](unsigned i) {
        if (const SCEV *S = bySCEV(i))
          return expander.expandCodeFor(S, call->getArgOperand(i)->getType(), after);
        return computeOutside(call->getArgOperand(i), L, AA, after);
      };
      SmallVector<Value *, 9> arguments = {again(2), again(3), first, threads};
      for (unsigned i = 5; i < call->arg_size(); ++i)
        arguments.push_back(again(i));
      SmallVector<Type *, 9> types;
      for (Value *argument : arguments)
        types.push_back(argument->getType());
      IRBuilder<> b(after);
      CallInst *row = b.CreateCall(FunctionType::get(b.getVoidTy(), types, false), again(1),
                                   arguments);
      row->setMemoryEffects(call->getMemoryEffects());
      gpu_check::markHookCall(row);
      row->setDoesNotThrow();
      row->addFnAttr(Attribute::WillReturn);
      call->eraseFromParent();
      SE.forgetLoop(&L);
      return true;
    }
  }
  return false;
}

// The barrier hooks of checked objects' thread loops gathered after the loops
// (`gatherBarrierHooks`), before ExitThreadLoopsAtGuards looks at the loops.
struct GatherBarrierHooks : PassInfoMixin<GatherBarrierHooks> {
  PreservedAnalyses run(Function &F, FunctionAnalysisManager &FAM) {
    return changeLoops(F, FAM, false, gatherBarrierHooks) ? PreservedAnalyses::none()
                                                            : PreservedAnalyses::all();
  }
};

} // namespace

void gpu_check::addBarrierGathering(FunctionPassManager &FPM) {
  FPM.addPass(GatherBarrierHooks());
}
