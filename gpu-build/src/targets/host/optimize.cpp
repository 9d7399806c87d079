// The host target's optimization pipeline: LLVM's default<O> pipeline (as every target gets),
// plus one pass for the thread loops of the blocks entries, which LLVM's C API cannot add (it
// takes pipeline text only, with no extension points). See optimize.rs.
//
// The pass: a thread loop whose body starts with `if (id < bound) { work }`, with `bound` the same
// for the whole loop, does nothing from the first thread that fails the test on (the test stays
// false for every later thread, and what is left of an iteration has no effect), so it leaves the
// loop there. GPU kernels guard work this way everywhere (`if (tid < stride)` in tree
// reductions, `if (i < n)` bounds checks); without this, a halving reduction step walks all 256
// threads of a block to run 1, 2, 4, ... of them. LLVM's loop-bound-split would split such loops
// but accepts neither a one-sided `if` nor an id wider than the loop counter.

#include "llvm-c/Core.h"
#include "llvm-c/TargetMachine.h"
#include "llvm/Analysis/LoopInfo.h"
#include "llvm/Analysis/ScalarEvolution.h"
#include "llvm/Analysis/ScalarEvolutionExpressions.h"
#include "llvm/IR/Dominators.h"
#include "llvm/IR/Instructions.h"
#include "llvm/IR/Module.h"
#include "llvm/IR/PassManager.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/Transforms/Utils/LoopSimplify.h"

#include <cstring>
#include <string>

using namespace llvm;

namespace {

// Whether the branch `guard` (in `L`'s header) is `AddRec < bound` or `AddRec >= bound` for an
// increasing AddRec of `L` that does not wrap: then once the condition takes the returned
// direction, it keeps it for the rest of the loop. `eventually` is that direction.
bool monotoneGuard(BranchInst *guard, const Loop &L, ScalarEvolution &SE, bool &eventually) {
  auto *compare = dyn_cast<ICmpInst>(guard->getCondition());
  if (!compare || !SE.isSCEVable(compare->getOperand(0)->getType()))
    return false;
  const SCEV *lhs = SE.getSCEV(compare->getOperand(0));
  const SCEV *rhs = SE.getSCEV(compare->getOperand(1));
  CmpPredicate predicate = compare->getCmpPredicate();
  if (!isa<SCEVAddRecExpr>(lhs)) {
    std::swap(lhs, rhs);
    predicate = CmpPredicate::getSwapped(predicate);
  }
  const auto *rec = dyn_cast<SCEVAddRecExpr>(lhs);
  if (!rec || rec->getLoop() != &L || !rec->isAffine() || !SE.isLoopInvariant(rhs, &L))
    return false;
  const auto *step = dyn_cast<SCEVConstant>(rec->getStepRecurrence(SE));
  if (!step || !step->getAPInt().isStrictlyPositive())
    return false;
  // Does not wrap in the compare's sense (no signed wrap from a non-negative start is no
  // unsigned wrap either, which is what sign-extended thread ids give).
  bool noWrap = ICmpInst::isUnsigned(predicate)
                    ? rec->hasNoUnsignedWrap() ||
                          (rec->hasNoSignedWrap() && SE.isKnownNonNegative(rec->getStart()))
                    : rec->hasNoSignedWrap();
  if (!noWrap)
    return false;
  switch (ICmpInst::getUnsignedPredicate(predicate)) {
  case ICmpInst::ICMP_ULT:
  case ICmpInst::ICMP_ULE:
    eventually = false; // true, then false for good
    return true;
  case ICmpInst::ICMP_UGT:
  case ICmpInst::ICMP_UGE:
    eventually = true; // false, then true for good
    return true;
  default:
    return false;
  }
}

bool inSubloop(const Loop &L, const BasicBlock *B) {
  for (const Loop *sub : L.getSubLoops())
    if (sub->contains(B))
      return true;
  return false;
}

// Makes `L` leave at its header's guard once the guard has turned for good, when everything
// outside the guarded work is free of effects. Returns whether it did.
bool exitAtGuard(Loop &L, DominatorTree &DT, ScalarEvolution &SE) {
  BasicBlock *header = L.getHeader();
  BasicBlock *latch = L.getLoopLatch();
  BasicBlock *exit = L.getUniqueExitBlock();
  if (!latch || !exit || !L.getLoopPreheader() || L.getExitingBlock() != latch)
    return false;
  auto *guard = dyn_cast<BranchInst>(header->getTerminator());
  if (!guard || !guard->isConditional() || header == latch)
    return false;
  bool eventually;
  if (!monotoneGuard(guard, L, SE, eventually))
    return false;
  BasicBlock *work = guard->getSuccessor(eventually ? 1 : 0);
  BasicBlock *idle = guard->getSuccessor(eventually ? 0 : 1);
  if (!L.contains(work) || !L.contains(idle) || work == idle || work->getSinglePredecessor() != header)
    return false;
  // What runs outside the guarded work must have no effect, and must stay reachable once the
  // idle edge is gone (so the loop keeps its blocks), and no value may leave the loop.
  SmallPtrSet<BasicBlock *, 16> reachable;
  SmallVector<BasicBlock *, 16> stack{work};
  while (!stack.empty()) {
    BasicBlock *B = stack.pop_back_val();
    if (B == header || !L.contains(B) || !reachable.insert(B).second)
      continue;
    for (BasicBlock *S : successors(B))
      stack.push_back(S);
  }
  for (BasicBlock *B : L.blocks()) {
    bool guarded = DT.dominates(work, B);
    if (!guarded && (B != header && !reachable.count(B)))
      return false;
    if (!guarded && inSubloop(L, B))
      return false;
    for (Instruction &I : *B) {
      if (!guarded && I.mayHaveSideEffects())
        return false;
      for (User *user : I.users())
        if (!L.contains(cast<Instruction>(user)->getParent()))
          return false;
    }
  }
  for (PHINode &phi : exit->phis()) {
    Value *value = phi.getIncomingValueForBlock(latch);
    auto *defined = dyn_cast<Instruction>(value);
    if (defined && L.contains(defined->getParent()))
      return false;
    phi.addIncoming(value, header);
  }
  idle->removePredecessor(header);
  guard->setSuccessor(eventually ? 0 : 1, exit);
  SE.forgetLoop(&L);
  return true;
}

struct ExitThreadLoopsAtGuards : PassInfoMixin<ExitThreadLoopsAtGuards> {
  // What the names of the functions whose loops are thread loops end with (the blocks entries).
  std::string entrySuffix;

  PreservedAnalyses run(Function &F, FunctionAnalysisManager &FAM) {
    if (!F.getName().ends_with(entrySuffix))
      return PreservedAnalyses::all();
    bool changed = false;
    // One change at a time, with fresh analyses: a change alters the dominator tree.
    for (unsigned round = 0; round < 64; ++round) {
      auto &LI = FAM.getResult<LoopAnalysis>(F);
      auto &DT = FAM.getResult<DominatorTreeAnalysis>(F);
      auto &SE = FAM.getResult<ScalarEvolutionAnalysis>(F);
      bool once = false;
      for (Loop *L : LI.getLoopsInPreorder())
        if (exitAtGuard(*L, DT, SE)) {
          once = true;
          break;
        }
      if (!once)
        break;
      changed = true;
      FAM.invalidate(F, PreservedAnalyses::none());
    }
    return changed ? PreservedAnalyses::none() : PreservedAnalyses::all();
  }
};

} // namespace

extern "C" {

// LLVM's default pipeline at `level` (0 to 3) with loop unrolling, interleaving and both
// vectorizers on (as upstream's makeOptimizingTransformer), plus ExitThreadLoopsAtGuards before
// the vectorizers, on the functions whose names end with `entrySuffix`. Returns false with
// `*error` set (free it with LLVMDisposeMessage) on failure.
LLVMBool gpu_build_optimize_host(LLVMModuleRef module, LLVMTargetMachineRef machine,
                                 unsigned level, const char *entrySuffix, char **error) {
  Module &M = *unwrap(module);
  auto *TM = reinterpret_cast<TargetMachine *>(machine);
  PipelineTuningOptions tuning;
  tuning.LoopUnrolling = true;
  tuning.LoopInterleaving = true;
  tuning.LoopVectorization = true;
  tuning.SLPVectorization = true;
  PassBuilder builder(TM, tuning);
  LoopAnalysisManager LAM;
  FunctionAnalysisManager FAM;
  CGSCCAnalysisManager CGAM;
  ModuleAnalysisManager MAM;
  builder.registerModuleAnalyses(MAM);
  builder.registerCGSCCAnalyses(CGAM);
  builder.registerFunctionAnalyses(FAM);
  builder.registerLoopAnalyses(LAM);
  builder.crossRegisterProxies(LAM, FAM, CGAM, MAM);
  builder.registerVectorizerStartEPCallback(
      [suffix = std::string(entrySuffix)](FunctionPassManager &FPM, OptimizationLevel) {
        // Loops with preheaders, as the pass expects.
        FPM.addPass(LoopSimplifyPass());
        FPM.addPass(ExitThreadLoopsAtGuards{{}, suffix});
      });
  OptimizationLevel levels[] = {OptimizationLevel::O0, OptimizationLevel::O1,
                                OptimizationLevel::O2, OptimizationLevel::O3};
  if (level > 3) {
    *error = strdup("optimization level above 3");
    return 0;
  }
  ModulePassManager pipeline = level == 0 ? builder.buildO0DefaultPipeline(OptimizationLevel::O0)
                                          : builder.buildPerModuleDefaultPipeline(levels[level]);
  pipeline.run(M, MAM);
  return 1;
}

} // extern "C"
