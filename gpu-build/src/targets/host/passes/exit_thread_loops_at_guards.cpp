// The host target's pass for the thread loops of the blocks entries (ExitThreadLoopsAtGuards),
// which LLVM's C API cannot add; pipeline.cpp adds it before the vectorizers.
//
// The pass: a thread loop whose body starts with `if (id < bound) { work }`, with `bound` the same
// for the whole loop, does nothing from the first thread that fails the test on (the test stays
// false for every later thread, and what is left of an iteration has no effect). GPU kernels
// guard work this way everywhere (`if (tid < stride)` in tree reductions, `if (i < n)` bounds
// checks). Two changes follow from it, and a third from `id == value`:
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
// - Match: a test `id == value` lets one thread through at most; the loop starts at that thread
//   (or is skipped) and leaves after it (`if (thread == 0)` after a block's reduction).
//
// LLVM's loop-bound-split would split such loops but accepts neither a one-sided `if` nor an id
// wider than the loop counter, and IRCE finds the check but not the iteration space of a thread
// id computed from the block's.

#include "loops.h"
#include "pipeline.h"

#include "llvm/Analysis/LoopInfo.h"
#include "llvm/Analysis/ScalarEvolution.h"
#include "llvm/Analysis/ScalarEvolutionExpressions.h"
#include "llvm/Analysis/ValueTracking.h"
#include "llvm/IR/Dominators.h"
#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/Instructions.h"
#include "llvm/IR/PassManager.h"
#include "llvm/Transforms/Utils/BasicBlockUtils.h"
#include "llvm/Transforms/Utils/Local.h"
#include "llvm/Transforms/Utils/LoopUtils.h"
#include "llvm/Transforms/Utils/ScalarEvolutionExpander.h"
#include "llvm/Transforms/Utils/ValueMapper.h"

#include <functional>
#include <string>

using namespace llvm;

namespace {

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

// The comparisons a branch condition is built from with and, or, not and freeze (as `a || b`
// reaches LLVM: `or`, or `select a, true, b`). False when the condition uses anything else that
// the loop computes.
bool conditionLeaves(Value *condition, const Loop &L, SmallVectorImpl<ICmpInst *> &leaves,
                     unsigned depth = 0) {
  auto *I = dyn_cast<Instruction>(condition);
  if (!I || !L.contains(I->getParent()))
    return true; // the same in every iteration
  if (depth > 8 || !condition->getType()->isIntegerTy(1))
    return false;
  if (auto *compare = dyn_cast<ICmpInst>(I)) {
    leaves.push_back(compare);
    return true;
  }
  if (isa<FreezeInst>(I))
    return conditionLeaves(I->getOperand(0), L, leaves, depth + 1);
  if (I->getOpcode() == Instruction::And || I->getOpcode() == Instruction::Or ||
      I->getOpcode() == Instruction::Xor || isa<SelectInst>(I)) {
    for (Value *operand : I->operands())
      if (!conditionLeaves(operand, L, leaves, depth + 1))
        return false;
    return true;
  }
  return false;
}

// A comparison of the guard's condition over the loop: its operands at the first and at the last
// iteration, and the tests whose values at both ends decide whether it keeps one value for the
// whole loop (each test is monotone over the loop: it changes at most once).
struct Leaf {
  ICmpInst *compare;
  const SCEV *first[2], *last[2];
  SmallVector<ICmpInst::Predicate, 2> tests;
};

// `compare`'s operands must be loop-invariant or an increasing affine AddRec of `L` that does not
// wrap in the sense the tests need.
bool describeLeaf(ICmpInst *compare, const Loop &L, ScalarEvolution &SE, const SCEV *lastIteration,
                  Leaf &leaf) {
  if (!SE.isSCEVable(compare->getOperand(0)->getType()))
    return false;
  leaf.compare = compare;
  const SCEVAddRecExpr *rec = nullptr;
  gpu_host::NoWrap noWrap;
  for (unsigned i = 0; i < 2; ++i) {
    const SCEV *operand = SE.getSCEV(compare->getOperand(i));
    leaf.first[i] = leaf.last[i] = operand;
    if (SE.isLoopInvariant(operand, &L))
      continue;
    if (rec || !(rec = gpu_host::increasing(operand, L, SE, noWrap)))
      return false;
    leaf.first[i] = rec->getStart();
    leaf.last[i] = rec->evaluateAtIteration(
        SE.getTruncateOrZeroExtend(lastIteration, rec->getType()), SE);
  }
  ICmpInst::Predicate predicate = compare->getPredicate();
  if (!rec) {
    leaf.tests.push_back(predicate); // loop-invariant: one value anyway
    return true;
  }
  if (ICmpInst::isEquality(predicate)) {
    // x == c is x <= c and x >= c: one value for the loop when x < c and x > c each keep theirs.
    if (noWrap.asUnsigned)
      leaf.tests = {ICmpInst::ICMP_ULT, ICmpInst::ICMP_UGT};
    else if (noWrap.asSigned)
      leaf.tests = {ICmpInst::ICMP_SLT, ICmpInst::ICMP_SGT};
    else
      return false;
    return true;
  }
  if (!gpu_host::orderKept(predicate, noWrap))
    return false;
  leaf.tests.push_back(predicate);
  return true;
}

// The instructions a block runs that are its own (it is reached from the header only), as a
// measure of which side of the guard does the loop's work.
unsigned ownWork(BasicBlock *B, BasicBlock *header) {
  return B->getSinglePredecessor() == header ? B->size() : 0;
}

// When the header's branch condition keeps one value for the whole loop and that value sends
// every thread to the side that does the work, runs a copy of `L` without the branch (which
// the vectorizer can take: a load behind a test cannot be vectorized without masked loads). The
// condition may combine comparisons of thread ids with and, or and not: a 2-D stencil's
// `x == 0 || x >= cols - 1` is false for all threads of every block but the grid's first and
// last column, and a bounds check `i < n` holds in every block but the last. Each comparison is
// monotone over the loop (or, for ==, two monotone tests), so its values at the first and the
// last thread tell whether it changes. Returns whether it versioned.
bool versionAtGuard(Loop &L, LoopInfo &LI, DominatorTree &DT, ScalarEvolution &SE) {
  BranchInst *guard;
  if (gpu_host::versionedAtGuard(L) || !L.isInnermost() || !guardedLoop(L, guard))
    return false;
  BasicBlock *header = L.getHeader();
  unsigned workSide = ownWork(guard->getSuccessor(1), header) > ownWork(guard->getSuccessor(0), header);
  BasicBlock *work = guard->getSuccessor(workSide);
  BasicBlock *idle = guard->getSuccessor(1 - workSide);
  if (!L.contains(work) || !L.contains(idle) || work == idle || ownWork(work, header) == 0)
    return false;
  const SCEV *lastIteration = SE.getBackedgeTakenCount(&L);
  if (isa<SCEVCouldNotCompute>(lastIteration))
    return false;
  SmallVector<ICmpInst *, 4> compares;
  if (!conditionLeaves(guard->getCondition(), L, compares) || compares.empty())
    return false;

  SmallVector<Leaf, 4> leaves(compares.size());
  SCEVExpander expander(SE, "guard");
  for (unsigned i = 0; i < compares.size(); ++i) {
    if (!describeLeaf(compares[i], L, SE, lastIteration, leaves[i]))
      return false;
    for (unsigned j = 0; j < 2; ++j)
      for (const SCEV *end : {leaves[i].first[j], leaves[i].last[j]})
        if (!SE.isLoopInvariant(end, &L) || !expander.isSafeToExpand(end))
          return false;
  }
  // In the preheader: whether every comparison keeps its value over the loop, and the
  // condition's value at the first thread, with each comparison's at its first thread.
  // A preheader of the loop's own (the one LoopSimplify gives may be an outer loop's header,
  // whose phis a copy must not duplicate).
  BasicBlock *preheader = SplitEdge(L.getLoopPreheader(), header, &DT, &LI, nullptr, "version");
  Instruction *at = preheader->getTerminator();
  IRBuilder<> builder(at);
  Value *uniform = builder.getTrue();
  ValueToValueMapTy firstThread;
  for (Leaf &leaf : leaves) {
    Value *first[2], *last[2];
    for (unsigned j = 0; j < 2; ++j) {
      Type *type = leaf.compare->getOperand(j)->getType();
      first[j] = expander.expandCodeFor(leaf.first[j], type, at);
      last[j] = expander.expandCodeFor(leaf.last[j], type, at);
    }
    for (ICmpInst::Predicate test : leaf.tests) {
      Value *same = builder.CreateICmpEQ(builder.CreateICmp(test, first[0], first[1]),
                                         builder.CreateICmp(test, last[0], last[1]));
      uniform = builder.CreateAnd(uniform, same, "uniform");
    }
    firstThread[leaf.compare] = builder.CreateICmp(leaf.compare->getPredicate(), first[0], first[1]);
  }
  std::function<Value *(Value *)> atFirstThread = [&](Value *value) -> Value * {
    if (auto mapped = firstThread.find(value); mapped != firstThread.end())
      return mapped->second;
    auto *I = dyn_cast<Instruction>(value);
    if (!I || !L.contains(I->getParent()))
      return value;
    Instruction *copy = I->clone();
    for (Use &operand : copy->operands())
      operand.set(atFirstThread(operand.get()));
    builder.Insert(copy);
    firstThread[I] = copy;
    return copy;
  };
  Value *condition = atFirstThread(guard->getCondition());
  if (workSide == 1)
    condition = builder.CreateNot(condition);
  Value *always = builder.CreateAnd(uniform, condition, "always");
  // The copy, in a preheader of its own that the original preheader branches to when every
  // thread takes the work side.
  BasicBlock *exit = L.getUniqueExitBlock();
  BasicBlock *latch = L.getLoopLatch();
  ValueToValueMapTy map;
  BasicBlock *copyPreheader = gpu_host::copyLoop(L, preheader, ".unguarded", LI, DT, map);
  for (PHINode &phi : exit->phis())
    phi.addIncoming(phi.getIncomingValueForBlock(latch), cast<BasicBlock>(map[latch]));
  auto *copyGuard = cast<BranchInst>(map[guard]);
  auto *copyIdle = cast<BasicBlock>(map[idle]);
  copyIdle->removePredecessor(copyGuard->getParent());
  BranchInst::Create(cast<BasicBlock>(map[work]), copyGuard->getIterator());
  copyGuard->eraseFromParent();
  BranchInst::Create(copyPreheader, header, always, at->getIterator());
  at->eraseFromParent();
  // The original keeps a preheader of its own, which the exit change needs.
  SplitEdge(preheader, header, nullptr, nullptr);
  gpu_host::markVersioned(latch);
  auto *copyLatch = cast<BasicBlock>(map[latch]);
  gpu_host::markVersioned(copyLatch);
  gpu_host::interleaveOnce(copyLatch);
  SE.forgetLoop(&L);
  return true;
}

// A thread loop whose body is `if (id == value) { work }`, with `value` the same for the whole
// loop (gpu.all_reduce's and a reduction's `if (thread == 0)`: one thread of the block does the
// work), runs that one thread: the loop starts at the iteration whose id is `value`, or is
// skipped when no thread of the row has it, and leaves after it. Before, it walked every thread
// of the row to find it (the block sum with 256-thread blocks: 7.9 ms before, 2.7 ms after, at
// x86-64-v4). `id - value` must step by one over the loop (then it differs at every iteration,
// and is zero at iteration `-(its first value)`, if that is at most the last one), every phi of
// the header be an affine function of the iteration (its value at that iteration is computed
// before the loop) or one the iterations without the work hand on unchanged, and those
// iterations have no effect. Returns whether it changed `L`.
bool enterAtMatch(Loop &L, LoopInfo &LI, DominatorTree &DT, ScalarEvolution &SE) {
  BasicBlock *exit;
  BranchInst *guard = gpu_host::headerGuard(L, exit);
  if (!guard)
    return false;
  auto *compare = dyn_cast<ICmpInst>(guard->getCondition());
  if (!compare || !compare->isEquality() || !SE.isSCEVable(compare->getOperand(0)->getType()))
    return false;
  // `a == b` is `a - b == 0` in the ids' modular arithmetic; LLVM writes `base + x == 0` as
  // `base == -x`, whose difference steps by one again.
  const auto *id = dyn_cast<SCEVAddRecExpr>(
      SE.getMinusSCEV(SE.getSCEV(compare->getOperand(0)), SE.getSCEV(compare->getOperand(1))));
  if (id && id->isAffine() && id->getStepRecurrence(SE)->isAllOnesValue())
    id = dyn_cast<SCEVAddRecExpr>(SE.getNegativeSCEV(id));
  if (!id || id->getLoop() != &L || !id->isAffine() || !id->getStepRecurrence(SE)->isOne())
    return false;
  unsigned matchSide = compare->getPredicate() == ICmpInst::ICMP_EQ ? 0 : 1;
  BasicBlock *work = guard->getSuccessor(matchSide);
  BasicBlock *idle = guard->getSuccessor(1 - matchSide);
  const SCEV *lastIteration = SE.getBackedgeTakenCount(&L);
  Type *idType = id->getType();
  if (!L.contains(idle) || work == idle || isa<SCEVCouldNotCompute>(lastIteration) ||
      SE.getTypeSizeInBits(lastIteration->getType()) > SE.getTypeSizeInBits(idType) ||
      !L.hasDedicatedExits() || !gpu_host::idleIterationsHaveNoEffect(L, work, DT))
    return false;
  // The header phis that an iteration without the work hands on unchanged (the all_reduce's
  // total, kept in a register from the thread that computed it): their value from the latch is
  // a phi that takes the header phi itself from every block the work does not dominate. The
  // loop's first iteration, the match, gets them as the loop got them; keyed by the latch value.
  BasicBlock *latch = L.getLoopLatch();
  DenseMap<Value *, PHINode *> handedOn;
  for (PHINode &phi : L.getHeader()->phis()) {
    auto *passed = dyn_cast<PHINode>(phi.getIncomingValueForBlock(latch));
    if (passed && L.contains(passed->getParent()) &&
        all_of(seq(passed->getNumIncomingValues()), [&](unsigned i) {
          return DT.dominates(work, passed->getIncomingBlock(i)) ||
                 passed->getIncomingValue(i) == &phi;
        }))
      handedOn[passed] = &phi;
  }
  // What leaves the loop must be such a value: after the match it keeps the match's value, and
  // without one it is what the loop was entered with.
  for (Instruction *leaving : gpu_host::valuesLeaving(L))
    if (!handedOn.count(leaving))
      return false;
  // The iteration where the difference is zero (past the last one, after wrapping, when the
  // first is already above zero), and each other header phi's value there.
  const SCEV *match = SE.getNegativeSCEV(id->getStart());
  const SCEV *matchIteration = SE.getTruncateOrNoop(match, lastIteration->getType());
  const SCEV *last = SE.getNoopOrZeroExtend(lastIteration, idType);
  SmallVector<std::pair<PHINode *, const SCEV *>, 8> starts;
  SCEVExpander expander(SE, "match");
  for (PHINode &phi : L.getHeader()->phis()) {
    if (is_contained(make_second_range(handedOn), &phi))
      continue;
    if (!SE.isSCEVable(phi.getType()))
      return false;
    const auto *rec = dyn_cast<SCEVAddRecExpr>(SE.getSCEV(&phi));
    if (!rec || rec->getLoop() != &L || !rec->isAffine())
      return false;
    const SCEV *there = rec->evaluateAtIteration(
        SE.getTruncateOrZeroExtend(matchIteration, rec->getType()), SE);
    if (!expander.isSafeToExpand(there))
      return false;
    starts.push_back({&phi, there});
  }
  if (!expander.isSafeToExpand(match) || !expander.isSafeToExpand(last))
    return false;

  // Every value leaving goes through a phi of the exit block, which the new edges feed.
  formLCSSA(L, DT, &LI, &SE);
  BasicBlock *entry = SplitEdge(L.getLoopPreheader(), L.getHeader(), &DT, &LI, nullptr, "match");
  Instruction *at = entry->getTerminator();
  Value *inRow = new ICmpInst(at->getIterator(), ICmpInst::ICMP_ULE,
                              expander.expandCodeFor(match, idType, at),
                              expander.expandCodeFor(last, idType, at), "in_row");
  for (auto &[phi, there] : starts)
    phi->setIncomingValueForBlock(entry, expander.expandCodeFor(there, phi->getType(), at));
  for (PHINode &phi : exit->phis()) {
    Value *value = phi.getIncomingValueForBlock(latch);
    auto handed = handedOn.find(value);
    if (handed != handedOn.end())
      value = handed->second->getIncomingValueForBlock(entry);
    phi.addIncoming(value, entry);
  }
  BranchInst::Create(L.getHeader(), exit, inRow, at->getIterator());
  at->eraseFromParent();
  gpu_host::leaveWhenIdle(L, guard, idle, exit, [&](Value *value) -> Value * {
    auto handed = handedOn.find(value);
    return handed == handedOn.end() ? value : handed->second;
  });
  SE.forgetLoop(&L);
  return true;
}

// The most instructions a thread loop may have for `unswitchUniformBranch` to copy it: each
// branch it takes out doubles the loop, so this bounds the copies of a loop with many.
constexpr unsigned UnswitchBudget = 600;
// The most branches taken out of one entry's loops (each a copy of a loop).
constexpr unsigned UnswitchLimit = 8;

// A conditional branch inside `L` (both sides in the loop) on a condition that is the same in
// every iteration, or null.
BranchInst *uniformBranch(const Loop &L) {
  for (BasicBlock *B : L.blocks()) {
    auto *branch = dyn_cast<BranchInst>(B->getTerminator());
    if (branch && branch->isConditional() && !isa<Constant>(branch->getCondition()) &&
        L.isLoopInvariant(branch->getCondition()) && L.contains(branch->getSuccessor(0)) &&
        L.contains(branch->getSuccessor(1)))
      return branch;
  }
  return nullptr;
}

// When a thread loop's body branches on a condition that is the same for every thread (a value
// from outside the loop: the tiled matmul's `t + 1 < tiles` before it loads the next tiles, in
// the region after its second barrier), runs one copy of the loop per side, chosen before the
// loop. The vectorizer would otherwise turn each side's loads and stores into masked ones run
// by every thread (on AMD's Zen a masked store is microcoded: the matmul spent most of its time
// in them), and LLVM's own unswitching gives up on loops the size of a region. Returns whether
// it changed `L`.
bool unswitchUniformBranch(Loop &L, LoopInfo &LI, DominatorTree &DT, ScalarEvolution &SE) {
  if (!L.isInnermost() || !L.getLoopPreheader() || !L.hasDedicatedExits())
    return false;
  BranchInst *branch = uniformBranch(L);
  if (!branch)
    return false;
  unsigned size = 0;
  for (BasicBlock *B : L.blocks())
    size += B->size();
  if (size > UnswitchBudget)
    return false;
  // Values of the loop used after it go through phis in its exit blocks, which take the copy's
  // values too.
  formLCSSA(L, DT, &LI, &SE);
  BasicBlock *header = L.getHeader();
  BasicBlock *preheader = SplitEdge(L.getLoopPreheader(), header, &DT, &LI, nullptr, "unswitch");
  ValueToValueMapTy map;
  BasicBlock *copyPreheader =
      gpu_host::copyLoopJoiningExits(L, preheader, ".uniform", LI, DT, map);
  // The original takes the true side, the copy the false one; what only the other side reached
  // goes.
  auto *copyBranch = cast<BranchInst>(map[branch]);
  Value *condition = branch->getCondition();
  LLVMContext &context = header->getContext();
  branch->setCondition(ConstantInt::getTrue(context));
  copyBranch->setCondition(ConstantInt::getFalse(context));
  ConstantFoldTerminator(branch->getParent());
  ConstantFoldTerminator(copyBranch->getParent());
  // The choice, once, before the loop. A branch on poison is undefined, and the loop may never
  // have reached this one: the value chosen on is frozen.
  Instruction *at = preheader->getTerminator();
  if (!isGuaranteedNotToBeUndefOrPoison(condition, nullptr, at, &DT))
    condition = new FreezeInst(condition, "uniform", at->getIterator());
  BranchInst::Create(header, copyPreheader, condition, at->getIterator());
  at->eraseFromParent();
  // The original keeps a preheader of its own.
  SplitEdge(preheader, header, nullptr, nullptr);
  removeUnreachableBlocks(*header->getParent());
  return true;
}

struct ExitThreadLoopsAtGuards : PassInfoMixin<ExitThreadLoopsAtGuards> {
  // What the names of the functions whose loops are thread loops end with (the blocks entries).
  std::string entrySuffix;

  PreservedAnalyses run(Function &F, FunctionAnalysisManager &FAM) {
    if (!F.getName().ends_with(entrySuffix))
      return PreservedAnalyses::all();
    bool changed = false;
    unsigned unswitched = 0;
    // One change at a time, with fresh analyses: a change alters the dominator tree.
    for (unsigned round = 0; round < 64; ++round) {
      auto &LI = FAM.getResult<LoopAnalysis>(F);
      auto &DT = FAM.getResult<DominatorTreeAnalysis>(F);
      auto &SE = FAM.getResult<ScalarEvolutionAnalysis>(F);
      bool once = false;
      for (Loop *L : LI.getLoopsInPreorder()) {
        if (unswitched < UnswitchLimit && unswitchUniformBranch(*L, LI, DT, SE)) {
          ++unswitched;
          once = true;
          break;
        }
        // The match first: `id == value` is also a guard versionAtGuard takes, whose copy
        // without the test would run only where every thread of a row has the id.
        if (enterAtMatch(*L, LI, DT, SE) || versionAtGuard(*L, LI, DT, SE) ||
            gpu_host::exitAtGuard(*L, DT, SE)) {
          once = true;
          break;
        }
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

void gpu_host::addExitThreadLoopsAtGuards(FunctionPassManager &FPM,
                                          const std::string &entrySuffix) {
  FPM.addPass(ExitThreadLoopsAtGuards{{}, entrySuffix});
}
