// Loop helpers the host target's passes share (see loops.h): copying a loop, the marks a pass
// leaves on a loop, and a thread loop's guard and its exit there (which the thread-loop pass
// and the checked loops' tidying both make).

#include "loops.h"

#include "llvm/Analysis/LoopInfo.h"
#include "llvm/Analysis/ScalarEvolution.h"
#include "llvm/Analysis/ScalarEvolutionExpressions.h"
#include "llvm/IR/CFG.h"
#include "llvm/IR/Dominators.h"
#include "llvm/IR/Instructions.h"
#include "llvm/IR/Metadata.h"
#include "llvm/Transforms/Utils/Cloning.h"
#include "llvm/Transforms/Utils/ValueMapper.h"

using namespace llvm;

// (loops.h)
BasicBlock *gpu_host::copyLoop(Loop &L, BasicBlock *preheader, const char *suffix,
                               LoopInfo &LI, DominatorTree &DT, ValueToValueMapTy &map) {
  BasicBlock *header = L.getHeader();
  SmallVector<BasicBlock *, 16> blocks;
  cloneLoopWithPreheader(header, preheader, &L, map, suffix, &LI, &DT, blocks);
  remapInstructionsInBlocks(blocks, map);
  auto *copyPreheader = cast<BasicBlock>(map[preheader]);
  // The clone's preheader branches to the original header: to its own.
  copyPreheader->getTerminator()->replaceUsesOfWith(header, cast<BasicBlock>(map[header]));
  return copyPreheader;
}

// The metadata marking a loop versioned at a guard already (the original keeps its test; both
// copies are left alone afterwards).
static const char *const VersionedMark = "gpu_build.versioned_at_guard";

// (loops.h)
bool gpu_host::versionedAtGuard(const Loop &L) {
  const BasicBlock *latch = L.getLoopLatch();
  return latch && latch->getTerminator()->getMetadata(VersionedMark);
}

// (loops.h)
BasicBlock *gpu_host::copyLoopJoiningExits(Loop &L, BasicBlock *preheader, const char *suffix,
                                           LoopInfo &LI, DominatorTree &DT,
                                           ValueToValueMapTy &map) {
  SmallVector<BasicBlock *, 4> exits, exiting;
  L.getUniqueExitBlocks(exits);
  L.getExitingBlocks(exiting);
  BasicBlock *copyPreheader = copyLoop(L, preheader, suffix, LI, DT, map);
  for (BasicBlock *exit : exits)
    for (PHINode &phi : exit->phis())
      for (BasicBlock *from : exiting)
        if (phi.getBasicBlockIndex(from) >= 0) {
          Value *value = phi.getIncomingValueForBlock(from);
          if (Value *copied = map.lookup(value))
            value = copied;
          phi.addIncoming(value, cast<BasicBlock>(map[from]));
        }
  return copyPreheader;
}

// (loops.h)
void gpu_host::markVersioned(BasicBlock *latch) {
  LLVMContext &context = latch->getContext();
  latch->getTerminator()->setMetadata(VersionedMark, MDNode::get(context, {}));
}

// (loops.h)
void gpu_host::addLoopProperty(Instruction *backEdge, MDNode *property) {
  LLVMContext &context = backEdge->getContext();
  auto placeholder = MDNode::getTemporary(context, {});
  SmallVector<Metadata *, 4> properties{placeholder.get()};
  if (MDNode *old = backEdge->getMetadata(LLVMContext::MD_loop))
    for (unsigned i = 1; i < old->getNumOperands(); ++i)
      properties.push_back(old->getOperand(i));
  properties.push_back(property);
  MDNode *id = MDNode::getDistinct(context, properties);
  id->replaceOperandWith(0, id);
  backEdge->setMetadata(LLVMContext::MD_loop, id);
}

// (loops.h)
void gpu_host::interleaveOnce(BasicBlock *latch) {
  LLVMContext &context = latch->getContext();
  Metadata *count[] = {MDString::get(context, "llvm.loop.interleave.count"),
                       ConstantAsMetadata::get(ConstantInt::get(Type::getInt32Ty(context), 1))};
  addLoopProperty(latch->getTerminator(), MDNode::get(context, count));
}

// (loops.h)
const SCEVAddRecExpr *gpu_host::increasing(const SCEV *S, const Loop &L, ScalarEvolution &SE,
                                           NoWrap &noWrap) {
  const auto *rec = dyn_cast<SCEVAddRecExpr>(S);
  if (!rec || rec->getLoop() != &L || !rec->isAffine())
    return nullptr;
  const auto *step = dyn_cast<SCEVConstant>(rec->getStepRecurrence(SE));
  if (!step || !step->getAPInt().isStrictlyPositive())
    return nullptr;
  noWrap.asSigned = rec->hasNoSignedWrap();
  noWrap.asUnsigned =
      rec->hasNoUnsignedWrap() || (noWrap.asSigned && SE.isKnownNonNegative(rec->getStart()));
  return rec;
}

// (loops.h)
bool gpu_host::orderKept(ICmpInst::Predicate predicate, const NoWrap &noWrap) {
  return ICmpInst::isUnsigned(predicate) ? noWrap.asUnsigned : noWrap.asSigned;
}

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
  gpu_host::NoWrap noWrap;
  if (!gpu_host::increasing(lhs, L, SE, noWrap) || !SE.isLoopInvariant(rhs, &L) ||
      !gpu_host::orderKept(predicate, noWrap))
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

} // namespace

// (loops.h)
BranchInst *gpu_host::headerGuard(const Loop &L, BasicBlock *&exit) {
  BasicBlock *header = L.getHeader();
  BasicBlock *latch = L.getLoopLatch();
  exit = L.getUniqueExitBlock();
  if (!latch || !exit || !L.getLoopPreheader() || L.getExitingBlock() != latch || header == latch)
    return nullptr;
  auto *guard = dyn_cast<BranchInst>(header->getTerminator());
  return guard && guard->isConditional() ? guard : nullptr;
}

// (loops.h)
bool gpu_host::idleIterationsHaveNoEffect(const Loop &L, BasicBlock *work,
                                          const DominatorTree &DT) {
  BasicBlock *header = L.getHeader();
  if (!L.contains(work) || work->getSinglePredecessor() != header)
    return false;
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
    if (DT.dominates(work, B))
      continue;
    if ((B != header && !reachable.count(B)) || inSubloop(L, B))
      return false;
    for (Instruction &I : *B)
      if (I.mayHaveSideEffects())
        return false;
  }
  return true;
}

// (loops.h)
SmallVector<Instruction *, 4> gpu_host::valuesLeaving(const Loop &L) {
  SmallVector<Instruction *, 4> leaving;
  for (BasicBlock *B : L.blocks())
    for (Instruction &I : *B)
      if (any_of(I.users(), [&](User *user) {
            return !L.contains(cast<Instruction>(user)->getParent());
          }))
        leaving.push_back(&I);
  return leaving;
}

// (loops.h)
void gpu_host::leaveWhenIdle(Loop &L, BranchInst *guard, BasicBlock *idle, BasicBlock *exit,
                             function_ref<Value *(Value *)> atHeader) {
  BasicBlock *header = L.getHeader();
  for (PHINode &phi : exit->phis())
    phi.addIncoming(atHeader(phi.getIncomingValueForBlock(L.getLoopLatch())), header);
  idle->removePredecessor(header);
  guard->setSuccessor(guard->getSuccessor(0) == idle ? 0 : 1, exit);
}

// (loops.h)
bool gpu_host::exitAtGuard(Loop &L, DominatorTree &DT, ScalarEvolution &SE) {
  BasicBlock *exit;
  BranchInst *guard = headerGuard(L, exit);
  bool eventually;
  if (!guard || !monotoneGuard(guard, L, SE, eventually))
    return false;
  BasicBlock *work = guard->getSuccessor(eventually ? 1 : 0);
  BasicBlock *idle = guard->getSuccessor(eventually ? 0 : 1);
  if (!L.contains(idle) || work == idle || !idleIterationsHaveNoEffect(L, work, DT) ||
      !valuesLeaving(L).empty())
    return false;
  leaveWhenIdle(L, guard, idle, exit, [](Value *value) { return value; });
  // The loop now runs as many threads as its guard lets through, often fewer than an
  // interleaved vector body takes (a tree reduction's steps run 128, 64, ..., 1 threads).
  interleaveOnce(L.getLoopLatch());
  SE.forgetLoop(&L);
  return true;
}
