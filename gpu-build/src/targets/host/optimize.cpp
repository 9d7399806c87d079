// The host target's optimization pipeline: LLVM's default<O> pipeline (as every target gets),
// plus one pass for the thread loops of the blocks entries, which LLVM's C API cannot add (it
// takes pipeline text only, with no extension points). See optimize.rs.
//
// The pass: a thread loop whose body starts with `if (id < bound) { work }`, with `bound` the same
// for the whole loop, does nothing from the first thread that fails the test on (the test stays
// false for every later thread, and what is left of an iteration has no effect). GPU kernels
// guard work this way everywhere (`if (tid < stride)` in tree reductions, `if (i < n)` bounds
// checks). Two changes follow from it:
//
// - Versioning: when the test holds for the loop's last thread, it holds for all of them, so a
//   copy of the loop without the test runs instead, which the vectorizer can take (a load or
//   store behind a test cannot be vectorized without masked ones). The tree reduction's
//   `tile[t] = i < n ? in[i] : 0` passes in every block but the last, so its first thread loop
//   runs vectorized there.
// - Exit: otherwise, when the side the test turns away does nothing, the loop leaves at the
//   first thread that fails the test: a halving reduction step no longer walks all 256 threads
//   of a block to run 1, 2, 4, ... of them, and saxpy's `if (i < n)` loop gets an exit LLVM can
//   count (with the ids' ranges, see ir.rs), so it vectorizes.
//
// LLVM's loop-bound-split would split such loops but accepts neither a one-sided `if` nor an id
// wider than the loop counter, and IRCE finds the check but not the iteration space of a thread
// id computed from the block's.

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
#include "llvm/IR/IRBuilder.h"
#include "llvm/Transforms/Utils/BasicBlockUtils.h"
#include "llvm/Transforms/Utils/Cloning.h"
#include "llvm/Transforms/Utils/LoopSimplify.h"
#include "llvm/Transforms/Utils/ScalarEvolutionExpander.h"
#include "llvm/Transforms/Utils/ValueMapper.h"

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

// The metadata marking a loop versioned already (the original keeps its test; both copies are
// left alone afterwards).
const char *const VersionedMark = "gpu_build.versioned_at_guard";

bool versioned(const Loop &L) {
  const BasicBlock *latch = L.getLoopLatch();
  return latch && latch->getTerminator()->getMetadata(VersionedMark);
}

void markVersioned(BasicBlock *latch) {
  LLVMContext &context = latch->getContext();
  latch->getTerminator()->setMetadata(VersionedMark, MDNode::get(context, {}));
}

// Whether the loop's shape is one both changes handle: a preheader, one latch that is its only
// exit, a header ending in the guard, no value used after the loop.
bool guardedLoop(Loop &L, BranchInst *&guard) {
  BasicBlock *header = L.getHeader();
  BasicBlock *latch = L.getLoopLatch();
  if (!latch || !L.getUniqueExitBlock() || !L.getLoopPreheader() || L.getExitingBlock() != latch)
    return false;
  guard = dyn_cast<BranchInst>(header->getTerminator());
  if (!guard || !guard->isConditional() || header == latch)
    return false;
  for (BasicBlock *B : L.blocks())
    for (Instruction &I : *B)
      for (User *user : I.users())
        if (!L.contains(cast<Instruction>(user)->getParent()))
          return false;
  return true;
}

// Runs a copy of `L` without its guard when the guard holds at the last iteration (and so at
// every one: it turns only once, from true to false). Returns whether it did.
bool versionAtGuard(Loop &L, LoopInfo &LI, DominatorTree &DT, ScalarEvolution &SE) {
  BranchInst *guard;
  if (versioned(L) || !L.isInnermost() || !guardedLoop(L, guard))
    return false;
  bool eventually;
  if (!monotoneGuard(guard, L, SE, eventually) || eventually)
    return false;
  BasicBlock *header = L.getHeader();
  BasicBlock *work = guard->getSuccessor(0);
  BasicBlock *idle = guard->getSuccessor(1);
  if (!L.contains(work) || !L.contains(idle) || work == idle || work->getSinglePredecessor() != header)
    return false;
  const SCEV *lastIteration = SE.getBackedgeTakenCount(&L);
  if (isa<SCEVCouldNotCompute>(lastIteration))
    return false;
  // The guard's operands at the last iteration, computed in the preheader.
  auto *compare = cast<ICmpInst>(guard->getCondition());
  BasicBlock *preheader = L.getLoopPreheader();
  SCEVExpander expander(SE, "guard");
  Value *operands[2];
  for (unsigned i = 0; i < 2; ++i) {
    const SCEV *operand = SE.getSCEV(compare->getOperand(i));
    if (const auto *rec = dyn_cast<SCEVAddRecExpr>(operand); rec && rec->getLoop() == &L) {
      const SCEV *iteration = SE.getTruncateOrZeroExtend(lastIteration, rec->getType());
      operand = rec->evaluateAtIteration(iteration, SE);
    }
    if (!SE.isLoopInvariant(operand, &L) || !expander.isSafeToExpand(operand))
      return false;
    operands[i] = expander.expandCodeFor(operand, compare->getOperand(i)->getType(),
                                         preheader->getTerminator());
  }
  IRBuilder<> builder(preheader->getTerminator());
  Value *always = builder.CreateICmp(compare->getPredicate(), operands[0], operands[1], "always");
  // The copy, in a preheader of its own that the original preheader branches to when the guard
  // always holds.
  BasicBlock *exit = L.getUniqueExitBlock();
  BasicBlock *latch = L.getLoopLatch();
  ValueToValueMapTy map;
  SmallVector<BasicBlock *, 16> blocks;
  cloneLoopWithPreheader(header, preheader, &L, map, ".unguarded", &LI, &DT, blocks);
  remapInstructionsInBlocks(blocks, map);
  auto *copyPreheader = cast<BasicBlock>(map[preheader]);
  // The clone's preheader branches to the original header: to its own.
  copyPreheader->getTerminator()->replaceUsesOfWith(header, cast<BasicBlock>(map[header]));
  for (PHINode &phi : exit->phis())
    phi.addIncoming(phi.getIncomingValueForBlock(latch), cast<BasicBlock>(map[latch]));
  auto *copyGuard = cast<BranchInst>(map[guard]);
  auto *copyIdle = cast<BasicBlock>(map[idle]);
  copyIdle->removePredecessor(copyGuard->getParent());
  BranchInst::Create(cast<BasicBlock>(map[work]), copyGuard->getIterator());
  copyGuard->eraseFromParent();
  Instruction *entry = preheader->getTerminator();
  BranchInst::Create(copyPreheader, header, always, entry->getIterator());
  entry->eraseFromParent();
  // The original keeps a preheader of its own, which the exit change needs.
  SplitEdge(preheader, header, nullptr, nullptr);
  markVersioned(latch);
  markVersioned(cast<BasicBlock>(map[latch]));
  SE.forgetLoop(&L);
  return true;
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
        if (versionAtGuard(*L, LI, DT, SE) || exitAtGuard(*L, DT, SE)) {
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
