// What the host optimization pipeline's passes for checked objects' loops share (see
// checked_loops.h).

#include "checked_loops.h"
#include "check_markers.h"

#include "llvm/Analysis/AliasAnalysis.h"
#include "llvm/Analysis/LoopInfo.h"
#include "llvm/Analysis/ScalarEvolution.h"
#include "llvm/Analysis/ScalarEvolutionExpressions.h"
#include "llvm/Analysis/ValueTracking.h"
#include "llvm/IR/Dominators.h"
#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/Instructions.h"
#include "llvm/IR/PatternMatch.h"
#include "llvm/Transforms/Utils/ScalarEvolutionExpander.h"

#include <utility>

using namespace llvm;

// (checked_loops.h)
Value *gpu_check::wide(const SCEV *S, bool isSigned, SCEVExpander &expander, Instruction *at) {
  IRBuilder<> b(at);
  Value *value = expander.expandCodeFor(S, S->getType(), at);
  return isSigned ? b.CreateSExt(value, b.getInt128Ty()) : b.CreateZExt(value, b.getInt128Ty());
}

// (checked_loops.h)
Value *gpu_check::passing(const Guard &guard, Value *count, SCEVExpander &expander,
                          Instruction *at) {
  if (!guard.limit)
    return count;
  IRBuilder<> b(at);
  Value *limit = wide(guard.limit, guard.isSigned, expander, at);
  if (guard.inclusive)
    limit = b.CreateAdd(limit, ConstantInt::get(limit->getType(), 1));
  Value *zero = ConstantInt::get(limit->getType(), 0);
  Value *above = b.CreateSelect(b.CreateICmpSLT(limit, zero), zero, limit);
  return b.CreateSelect(b.CreateICmpSLT(above, count), above, count);
}

// (checked_loops.h)
gpu_check::PassingRange gpu_check::passingRange(const Guard &guard, Value *count,
                                                SCEVExpander &expander, Instruction *at) {
  IRBuilder<> b(at);
  Value *zero = b.getIntN(128, 0);
  Value *passed = passing(guard, count, expander, at);
  if (!guard.excluded)
    return {zero, passed, b.getFalse()};
  Value *excluded = wide(guard.excluded, false, expander, at);
  Value *first = b.CreateZExt(
      b.CreateAnd(b.CreateICmpEQ(excluded, zero), b.CreateICmpSGT(passed, zero)),
      passed->getType());
  Value *later = b.CreateAnd(b.CreateICmpSGT(excluded, zero), b.CreateICmpULT(excluded, passed));
  return {first, b.CreateSub(passed, first), later};
}

// (checked_loops.h)
bool gpu_check::callsMarker(const Instruction &I, const char *name) {
  auto *call = dyn_cast<CallInst>(&I);
  Function *callee = call ? call->getCalledFunction() : nullptr;
  return callee && callee->getName() == name;
}

// (checked_loops.h)
const SCEV *gpu_check::sameOnEveryPath(Value *value, ScalarEvolution &SE) {
  const SCEV *S = SE.getSCEV(value);
  auto *phi = dyn_cast<PHINode>(value);
  if (!phi || !isa<SCEVUnknown>(S) || phi->getNumIncomingValues() == 0)
    return S;
  const SCEV *first = SE.getSCEV(phi->getIncomingValue(0));
  for (Value *incoming : phi->incoming_values())
    if (SE.getSCEV(incoming) != first)
      return S;
  return first;
}

namespace {

Value *locationOf(PHINode *phi, const Loop &L, AAResults &AA, unsigned depth = 0);

// Whether nothing in `L` may write what `load` reads. A runtime's check function writes no
// variable of the module (check_markers.h's HOOK_CALL), which alias analysis cannot tell: the
// context pointer it is given comes from memory.
bool unwrittenIn(LoadInst *load, const Loop &L, AAResults &AA) {
  MemoryLocation location = MemoryLocation::get(load);
  bool moduleVariable = isa<GlobalVariable>(getUnderlyingObject(load->getPointerOperand()));
  for (BasicBlock *B : L.blocks())
    for (Instruction &I : *B) {
      if (moduleVariable && I.hasMetadata(gpu_check::HOOK_CALL))
        continue;
      if (I.mayWriteToMemory() && isModSet(AA.getModRefInfo(&I, location)))
        return false;
    }
  return true;
}


// The location whose loads are all that phi `phi` of `L` merges (through other phis of `L`;
// of a header phi, the values from the loop), each a load `L` leaves alone; null where it
// merges anything else. Such a phi holds the location's value in every iteration: a header
// phi's value from before the loop is the location's too (a block's ids, which LLVM loads again
// after each hook call, and forwards from their stores before the loop).
Value *locationOf(PHINode *phi, const Loop &L, AAResults &AA, unsigned depth) {
  Value *location = nullptr;
  SmallVector<Value *, 8> work = {phi};
  SmallPtrSet<Value *, 8> seen;
  while (!work.empty()) {
    Value *incoming = work.pop_back_val();
    if (!seen.insert(incoming).second)
      continue;
    auto *merge = dyn_cast<PHINode>(incoming);
    if (merge && L.contains(merge->getParent()) && seen.size() < 16) {
      for (unsigned i = 0; i < merge->getNumIncomingValues(); ++i)
        if (merge->getParent() != L.getHeader() || L.contains(merge->getIncomingBlock(i)))
          work.push_back(merge->getIncomingValue(i));
      continue;
    }
    auto *load = dyn_cast<LoadInst>(incoming);
    if (!load || !L.contains(load->getParent()) ||
        (location && load->getPointerOperand() != location) ||
        !gpu_check::sameEveryIteration(load, L, AA, depth + 1))
      return nullptr;
    location = load->getPointerOperand();
  }
  return location;
}

} // namespace

// (checked_loops.h)
bool gpu_check::sameEveryIteration(Value *value, const Loop &L, AAResults &AA, unsigned depth) {
  auto *I = dyn_cast<Instruction>(value);
  if (!I || !L.contains(I->getParent()))
    return true;
  if (depth > 8)
    return false;
  if (auto *phi = dyn_cast<PHINode>(I)) {
    Value *location = L.getLoopPreheader() ? locationOf(phi, L, AA, depth) : nullptr;
    return location && sameEveryIteration(location, L, AA, depth + 1);
  }
  if (auto *load = dyn_cast<LoadInst>(I))
    return load->isSimple() && sameEveryIteration(load->getPointerOperand(), L, AA, depth + 1) &&
           (load->hasMetadata(LLVMContext::MD_invariant_load) || unwrittenIn(load, L, AA));
  if (!isSafeToSpeculativelyExecute(I))
    return false;
  return all_of(I->operands(),
                [&](Value *operand) { return sameEveryIteration(operand, L, AA, depth + 1); });
}

// (checked_loops.h)
Value *gpu_check::computeOutside(Value *value, const Loop &L, AAResults &AA, Instruction *at) {
  auto *I = dyn_cast<Instruction>(value);
  if (!I || !L.contains(I->getParent()))
    return value;
  if (auto *phi = dyn_cast<PHINode>(I))
    return new LoadInst(phi->getType(), computeOutside(locationOf(phi, L, AA), L, AA, at),
                        "outside", at->getIterator());
  Instruction *copy = I->clone();
  for (Use &operand : copy->operands())
    operand.set(computeOutside(operand.get(), L, AA, at));
  copy->insertBefore(at->getIterator());
  return copy;
}

// (checked_loops.h)
bool gpu_check::isThreadCounter(Value *id, const Loop *loop, ScalarEvolution &SE) {
  const auto *rec = dyn_cast<SCEVAddRecExpr>(sameOnEveryPath(id, SE));
  return loop && rec && rec->getLoop() == loop && rec->isAffine() && rec->getStart()->isZero() &&
         rec->getStepRecurrence(SE)->isOne();
}

// (checked_loops.h)
const SCEV *gpu_check::iterationsOf(const Loop &L, ScalarEvolution &SE) {
  const SCEV *backedges = SE.getBackedgeTakenCount(&L);
  if (isa<SCEVCouldNotCompute>(backedges))
    return nullptr;
  Type *I64 = Type::getInt64Ty(L.getHeader()->getContext());
  return SE.getAddExpr(SE.getTruncateOrZeroExtend(backedges, I64), SE.getOne(I64));
}

// (checked_loops.h)
gpu_check::Guard gpu_check::guardOf(BasicBlock *B, Loop &L, const Loop *outer,
                                    DominatorTree &DT, ScalarEvolution &SE,
                                    SCEVExpander &expander, AAResults *ranges) {
  // `counter <predicate> bound` with the counter first, the bound the same for `outer`; with
  // `ranges`, also `counter + offset <predicate> bound` (a global id), as `counter <predicate>
  // bound - offset`.
  auto compared = [&](ICmpInst *compare, CmpInst::Predicate &predicate, const SCEV *&bound) {
    auto offsetOf = [&](Value *value, const SCEV *&offset) {
      offset = nullptr;
      if (isThreadCounter(value, &L, SE))
        return true;
      const auto *rec = ranges && SE.isSCEVable(value->getType())
                            ? dyn_cast<SCEVAddRecExpr>(SE.getSCEV(value))
                            : nullptr;
      if (!rec || rec->getLoop() != &L || !rec->isAffine() ||
          !rec->getStepRecurrence(SE)->isOne() ||
          !sameEveryIteration(rec->getStart(), L, SE, *ranges, expander))
        return false;
      offset = rec->getStart();
      return true;
    };
    Value *counter = compare->getOperand(0), *other = compare->getOperand(1);
    const SCEV *offset;
    if (!offsetOf(counter, offset)) {
      std::swap(counter, other);
      predicate = CmpInst::getSwappedPredicate(predicate);
      if (!offsetOf(counter, offset))
        return false;
    }
    bound = SE.getSCEV(other);
    if (offset)
      bound = SE.getMinusSCEV(bound, SE.getTruncateOrZeroExtend(offset, bound->getType()));
    // With `ranges` (one loop), values the loop loads again in every iteration too: its user
    // computes them before it (outsideOf).
    return ranges ? sameEveryIteration(bound, L, SE, *ranges, expander)
                  : SE.isLoopInvariant(bound, outer) && expander.isSafeToExpand(bound);
  };
  // With `ranges`: every condition of the counter on the way, nearest first.
  Guard gathered;
  // Whether the comparison is one the guard now holds (a second exclusion or limit is not).
  auto gather = [&](CmpInst::Predicate predicate, const SCEV *S, BasicBlock *from,
                    BasicBlock *to) {
    if (predicate == ICmpInst::ICMP_NE) {
      if (gathered.excluded)
        return false;
      gathered.excluded = S;
      return true;
    }
    if (gathered.limit || (predicate != ICmpInst::ICMP_ULT && predicate != ICmpInst::ICMP_SLT &&
                           predicate != ICmpInst::ICMP_ULE && predicate != ICmpInst::ICMP_SLE))
      return false;
    gathered.limit = S;
    gathered.isSigned = ICmpInst::isSigned(predicate);
    gathered.inclusive = predicate == ICmpInst::ICMP_ULE || predicate == ICmpInst::ICMP_SLE;
    gathered.from = from;
    gathered.to = to;
    return true;
  };
  using namespace PatternMatch;
  for (DomTreeNode *node = DT.getNode(B); node && node->getIDom(); node = node->getIDom()) {
    BasicBlock *from = node->getIDom()->getBlock();
    if (!L.contains(from))
      break;
    auto *branch = dyn_cast<BranchInst>(from->getTerminator());
    if (!branch || !branch->isConditional() || branch->getSuccessor(0) == branch->getSuccessor(1))
      continue;
    bool taken;
    if (DT.dominates(BasicBlockEdge(from, branch->getSuccessor(0)), B))
      taken = true;
    else if (DT.dominates(BasicBlockEdge(from, branch->getSuccessor(1)), B))
      taken = false;
    else
      continue;
    BasicBlock *to = branch->getSuccessor(taken ? 0 : 1);
    Value *condition = branch->getCondition();
    if (auto *compare = dyn_cast<ICmpInst>(condition)) {
      CmpInst::Predicate predicate =
          taken ? compare->getPredicate() : compare->getInversePredicate();
      const SCEV *S;
      if (!compared(compare, predicate, S))
        continue;
      if (ranges) {
        if (gather(predicate, S, from, to))
          gathered.conditions.push_back({condition, taken});
        continue;
      }
      switch (predicate) {
      case ICmpInst::ICMP_ULT:
      case ICmpInst::ICMP_ULE:
      case ICmpInst::ICMP_SLT:
      case ICmpInst::ICMP_SLE:
      case ICmpInst::ICMP_EQ:
        return {S, ICmpInst::isSigned(predicate),
                predicate != ICmpInst::ICMP_ULT && predicate != ICmpInst::ICMP_SLT, from, to};
      default:
        continue;
      }
    }
    // `a || b || ...` the block is past when false: each term is false there. Terms of the
    // counter with a bound narrow the iterations (`counter == k`: not k; `counter >= n`: below
    // n); any other term only lets fewer through.
    if (!ranges || taken || !match(condition, m_LogicalOr(m_Value(), m_Value())))
      continue;
    // The iterations that reach the block see it false when every term is one the guard holds,
    // or the same for the whole loop and false (`mustBeFalse`, tested before the loop).
    bool whole = true;
    SmallVector<Value *, 2> invariant;
    SmallVector<Value *, 4> terms = {condition};
    while (!terms.empty()) {
      Value *term = terms.pop_back_val(), *a, *b;
      if (match(term, m_LogicalOr(m_Value(a), m_Value(b)))) {
        terms.append({a, b});
        continue;
      }
      auto *compare = dyn_cast<ICmpInst>(term);
      CmpInst::Predicate predicate =
          compare ? compare->getInversePredicate() : ICmpInst::BAD_ICMP_PREDICATE;
      const SCEV *S;
      if (compare && compared(compare, predicate, S) && gather(predicate, S, from, to))
        continue;
      if (sameEveryIteration(term, L, *ranges))
        invariant.push_back(term);
      else
        whole = false;
    }
    if (whole) {
      gathered.conditions.push_back({condition, false});
      gathered.mustBeFalse.append(invariant.begin(), invariant.end());
    }
  }
  return gathered;
}

// (checked_loops.h)
std::optional<bool> gpu_check::knownValue(Value *condition, const DenseMap<Value *, bool> &answers,
                                          unsigned depth) {
  using namespace PatternMatch;
  auto known = answers.find(condition);
  if (known != answers.end())
    return known->second;
  if (auto *constant = dyn_cast<ConstantInt>(condition))
    return !constant->isZero();
  Value *a, *b;
  if (depth > 16)
    return std::nullopt;
  if (match(condition, m_Not(m_Value(a)))) {
    std::optional<bool> value = knownValue(a, answers, depth + 1);
    return value ? std::optional<bool>(!*value) : std::nullopt;
  }
  bool isAnd = match(condition, m_LogicalAnd(m_Value(a), m_Value(b)));
  if (!isAnd && !match(condition, m_LogicalOr(m_Value(a), m_Value(b))))
    return std::nullopt;
  std::optional<bool> left = knownValue(a, answers, depth + 1);
  std::optional<bool> right = knownValue(b, answers, depth + 1);
  // false decides an `and`, true an `or`, whatever the other side is.
  if ((left && *left != isAnd) || (right && *right != isAnd))
    return !isAnd;
  if (left && right)
    return isAnd;
  return std::nullopt;
}

// (checked_loops.h)
bool gpu_check::alwaysReaches(BasicBlock *start, BasicBlock *target, const Loop &L,
                              const DenseMap<Value *, bool> &answers) {
  SmallVector<BasicBlock *, 16> work = {start};
  SmallPtrSet<BasicBlock *, 16> seen = {start};
  while (!work.empty()) {
    BasicBlock *B = work.pop_back_val();
    if (B == target)
      continue;
    auto *branch = dyn_cast<BranchInst>(B->getTerminator());
    SmallVector<BasicBlock *, 2> next(successors(B));
    if (branch && branch->isConditional()) {
      if (std::optional<bool> known = knownValue(branch->getCondition(), answers))
        next = {branch->getSuccessor(*known ? 0 : 1)};
    }
    if (next.empty())
      return false;
    for (BasicBlock *successor : next) {
      if (successor == L.getHeader() || !L.contains(successor))
        return false;
      if (seen.insert(successor).second)
        work.push_back(successor);
    }
  }
  return true;
}

namespace {

// The values in `S` defined in `L` (ScalarEvolution's unknowns).
SmallVector<Value *, 4> valuesDefinedIn(const SCEV *S, const Loop &L) {
  SmallVector<Value *, 4> values;
  SCEVExprContains(S, [&](const SCEV *X) {
    if (const auto *unknown = dyn_cast<SCEVUnknown>(X))
      if (auto *I = dyn_cast<Instruction>(unknown->getValue()); I && L.contains(I))
        values.push_back(I);
    return false;
  });
  return values;
}

} // namespace

// (checked_loops.h)
bool gpu_check::sameEveryIteration(const SCEV *S, const Loop &L, ScalarEvolution &SE,
                                   AAResults &AA, SCEVExpander &expander) {
  bool recurs = SCEVExprContains(S, [&](const SCEV *X) {
    const auto *rec = dyn_cast<SCEVAddRecExpr>(X);
    return rec && L.contains(rec->getLoop());
  });
  return !recurs && expander.isSafeToExpand(S) &&
         all_of(valuesDefinedIn(S, L), [&](Value *V) { return sameEveryIteration(V, L, AA); });
}

// (checked_loops.h)
const SCEV *gpu_check::outsideOf(const SCEV *S, const Loop &L, ScalarEvolution &SE,
                                 AAResults &AA, Instruction *at) {
  ValueToSCEVMapTy outside;
  for (Value *value : valuesDefinedIn(S, L))
    outside[value] = SE.getSCEV(computeOutside(value, L, AA, at));
  return outside.empty() ? S : SCEVParameterRewriter::rewrite(S, SE, outside);
}

// (checked_loops.h)
std::pair<const SCEV *, const SCEV *> gpu_check::recurringTerm(const SCEV *S, const Loop &L,
                                                               ScalarEvolution &SE) {
  const auto *sum = dyn_cast<SCEVAddExpr>(S);
  if (!sum)
    return {S, SE.getZero(S->getType())};
  const SCEV *recurring = nullptr;
  SmallVector<const SCEV *, 4> others;
  for (const SCEV *operand : sum->operands()) {
    const auto *rec = dyn_cast<SCEVAddRecExpr>(operand);
    if (rec && L.contains(rec->getLoop()) && !recurring)
      recurring = operand;
    else
      others.push_back(operand);
  }
  if (!recurring)
    return {S, SE.getZero(S->getType())};
  return {recurring, SE.getAddExpr(others)};
}
