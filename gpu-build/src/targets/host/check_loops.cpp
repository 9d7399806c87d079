// The host optimization pipeline's passes for checked objects' loops (check_markers.h): a
// thread loop's barrier hooks gathered into one call after the loop, and loops versioned on
// the checks a test before the loop decides for every iteration, a thread loop also on a test
// that no two of its nest's threads touch a byte of workgroup memory one of them writes (then
// its copy tells the runtime's shadow nothing but the bytes it writes, a row at a time).
// optimize.cpp adds them to the pipeline around its own thread-loop pass.

#include "check_loops.h"
#include "check_markers.h"
#include "loops.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/Sequence.h"
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
#include "llvm/IR/PatternMatch.h"
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

namespace {

// The most instructions a loop of a checked object may have for `versionCheckedLoop` to copy it.
constexpr unsigned CheckedCopyBudget = 4000;

// A comparison of a loop's counter (from 0 by 1) with a bound the loop does not change, that
// lets only the iterations below the bound reach a block: `counter < limit` (`<=` where
// `inclusive`), signed or not, in the branch ending `from`, whose edge to `to` the block's
// every path takes. No limit: no such guard.
struct Guard {
  const SCEV *limit = nullptr;
  bool isSigned = false, inclusive = false;
  BasicBlock *from = nullptr, *to = nullptr;
};

// `S` computed before `at`, extended to 128 bits (signed or not), where nothing wraps.
Value *wide(const SCEV *S, bool isSigned, SCEVExpander &expander, Instruction *at) {
  IRBuilder<> b(at);
  Value *value = expander.expandCodeFor(S, S->getType(), at);
  return isSigned ? b.CreateSExt(value, b.getInt128Ty()) : b.CreateZExt(value, b.getInt128Ty());
}

// How many of the first `count` iterations (i128, at least 0) `guard` lets through (all of
// them without a guard), computed before `at`.
Value *passing(const Guard &guard, Value *count, SCEVExpander &expander, Instruction *at) {
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

// Whether `I` calls the marker function `name` (check_markers.h).
bool callsMarker(const Instruction &I, const char *name) {
  auto *call = dyn_cast<CallInst>(&I);
  Function *callee = call ? call->getCalledFunction() : nullptr;
  return callee && callee->getName() == name;
}

// Whether `I` is a check a loop can be versioned on.
bool isCheckMarker(const Instruction &I) {
  return callsMarker(I, gpu_check::WITHIN) || callsMarker(I, gpu_check::UNREADY);
}

bool sameEveryIteration(Value *value, const Loop &L, AAResults &AA, unsigned depth = 0);
Value *computeOutside(Value *value, const Loop &L, AAResults &AA, Instruction *at);
Value *locationOf(PHINode *phi, const Loop &L, AAResults &AA, unsigned depth = 0);

// `call` as a KnownCheck of `L`, if it is one (nothing changes).
bool describeCheck(CallInst *call, const Loop &L, ScalarEvolution &SE, AAResults &AA,
                   SCEVExpander &expander, KnownCheck &check) {
  auto invariant = [&](Value *value, const SCEV *&S) {
    if (!SE.isSCEVable(value->getType()))
      return false;
    S = SE.getSCEV(value);
    return SE.isLoopInvariant(S, &L) && expander.isSafeToExpand(S);
  };
  check = {call, nullptr, nullptr, nullptr, nullptr, nullptr, false, Guard(), {}};
  if (call->getCalledFunction()->getName() == gpu_check::UNREADY) {
    // The stamp is the block's: a loop it is the same in runs within one block.
    check.answer = false;
    return sameEveryIteration(call->getArgOperand(0), L, AA) &&
           sameEveryIteration(call->getArgOperand(1), L, AA);
  }
  check.answer = true;
  if (!invariant(call->getArgOperand(1), check.bytes) ||
      !invariant(call->getArgOperand(2), check.low) ||
      !invariant(call->getArgOperand(3), check.high))
    return false;
  // The address as start + step * (L's counter) + the steps of the loops inside L (each
  // run the same number of times in every iteration of L) times their counters.
  const SCEV *address = SE.getSCEV(call->getArgOperand(0));
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
          !expander.isSafeToExpand(backedges) || !SE.isLoopInvariant(step, &L) ||
          !expander.isSafeToExpand(step) || !loop->getLoopPreheader())
        return false;
      check.inner.push_back({step, backedges});
    }
    address = rec->getStart();
  }
  check.start = address;
  for (const SCEV *S : {check.start, check.step})
    if (!SE.isLoopInvariant(S, &L) || !expander.isSafeToExpand(S))
      return false;
  return true;
}

// The test of `check` before loop `L` (at `at`, in its preheader), whose iterations after the
// first are `backedges`.
Value *testBefore(const KnownCheck &check, const Loop &L, AAResults &AA,
                  const SCEV *backedges, SCEVExpander &expander, Instruction *at) {
  IRBuilder<> b(at);
  if (check.call->getCalledFunction()->getName() == gpu_check::UNREADY) {
    Value *slot = computeOutside(check.call->getArgOperand(0), L, AA, at);
    Value *stamp = computeOutside(check.call->getArgOperand(1), L, AA, at);
    return b.CreateICmpEQ(b.CreateLoad(stamp->getType(), slot), stamp, "stamped");
  }
  // In 128 bits nothing wraps: the addresses the iterations the guard lets through give (none:
  // nothing to test), with those of the loops inside.
  Value *iterations = b.CreateAdd(wide(backedges, false, expander, at), b.getIntN(128, 1));
  Value *count = passing(check.guard, iterations, expander, at);
  Value *none = b.CreateICmpEQ(count, b.getIntN(128, 0));
  Value *first = wide(check.start, false, expander, at);
  Value *zero = b.getIntN(128, 0);
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

// `value`'s SCEV, also where it is a phi whose every incoming value is the same (GVN merges the
// thread id each side of a check computes into one).
const SCEV *sameOnEveryPath(Value *value, ScalarEvolution &SE) {
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
        !sameEveryIteration(load, L, AA, depth + 1))
      return nullptr;
    location = load->getPointerOperand();
  }
  return location;
}

// Whether `value` is the same in every iteration of `L` and can be computed outside it, before
// or after (`computeOutside`): defined outside it, a load of what the loop does not write (a
// hook's function pointer, the block's ids), a phi of such loads of one location (`locationOf`:
// the ids LLVM loads again after each hook call), or an operation without effects (the site a
// barrier's region selects) of such values.
bool sameEveryIteration(Value *value, const Loop &L, AAResults &AA, unsigned depth) {
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

// `value` (sameEveryIteration) computed before `at`, outside `L` (in its preheader or after it):
// a phi of loads as a load of their location, which the loop leaves alone.
Value *computeOutside(Value *value, const Loop &L, AAResults &AA, Instruction *at) {
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

// Whether `id` (a thread id a marker passes) is the counter of `loop`, from 0 by 1: `loop` is
// the thread loop of that dimension.
bool isThreadCounter(Value *id, const Loop *loop, ScalarEvolution &SE) {
  const auto *rec = dyn_cast<SCEVAddRecExpr>(sameOnEveryPath(id, SE));
  return loop && rec && rec->getLoop() == loop && rec->isAffine() && rec->getStart()->isZero() &&
         rec->getStepRecurrence(SE)->isOne();
}

// The iterations of `L` (i64), or null where ScalarEvolution cannot tell.
const SCEV *iterationsOf(const Loop &L, ScalarEvolution &SE) {
  const SCEV *backedges = SE.getBackedgeTakenCount(&L);
  if (isa<SCEVCouldNotCompute>(backedges))
    return nullptr;
  Type *I64 = Type::getInt64Ty(L.getHeader()->getContext());
  return SE.getAddExpr(SE.getTruncateOrZeroExtend(backedges, I64), SE.getOne(I64));
}

// A workgroup access in a thread loop's body (a `gpu.check.workgroup` marker), as an affine
// function of its thread's ids over the whole nest of thread loops: its byte offset in the
// variable is base + stride[0] x + stride[1] y + stride[2] z, every term the same for the nest.
struct WorkgroupAccess {
  CallInst *call;
  Value *variable;
  bool writes;
  const SCEV *base;
  const SCEV *stride[3];
  const SCEV *bytes;
  // The offset for thread x = 0 of the running row (the same for the loop).
  const SCEV *row;
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
  SmallVector<WorkgroupAccess, 8> accesses;
  // The nest's threads per dimension, x y z (i64).
  const SCEV *threads[3];
  // Some access's base is known for the running row only, or the loop is one of a pair
  // versioned at a guard, either of which a row may run: the test also asks for one row.
  bool rowOnly = false;
  // Per variable the nest reads, its ready slot and the block's stamp (sameEveryIteration: the
  // same for all the loop's iterations, as the block is): the variable must be written in full.
  SmallVector<std::pair<Value *, Value *>, 4> ready;
  // The stores of the variables the nest only writes, every one made by every thread its guard
  // lets through (indices into `accesses`): the copy tells the runtime of them before it runs
  // (`rowWrites`), a row at a time, instead of the variable being written in full.
  SmallVector<unsigned, 4> recorded;
};

// `S` as start + step * (the counter of `loop`): `S` itself where the loop does not change it.
bool splitOn(const SCEV *S, const Loop *loop, ScalarEvolution &SE, const SCEV *&start,
             const SCEV *&step) {
  if (SE.isLoopInvariant(S, loop)) {
    start = S;
    step = SE.getZero(S->getType());
    return true;
  }
  const auto *rec = dyn_cast<SCEVAddRecExpr>(S);
  if (!rec || rec->getLoop() != loop || !rec->isAffine())
    return false;
  start = rec->getStart();
  step = rec->getStepRecurrence(SE);
  return true;
}

// The guard in `L` that lets only the iterations below a bound (the same for all of `outer`'s)
// reach block `B`, if one does: the nearest such comparison of `L`'s counter among the branches
// whose one edge every path to `B` takes.
Guard guardOf(BasicBlock *B, Loop &L, const Loop *outer, DominatorTree &DT, ScalarEvolution &SE,
              SCEVExpander &expander) {
  for (DomTreeNode *node = DT.getNode(B); node && node->getIDom(); node = node->getIDom()) {
    BasicBlock *from = node->getIDom()->getBlock();
    if (!L.contains(from))
      break;
    auto *branch = dyn_cast<BranchInst>(from->getTerminator());
    auto *compare = branch && branch->isConditional()
                        ? dyn_cast<ICmpInst>(branch->getCondition())
                        : nullptr;
    if (!compare || branch->getSuccessor(0) == branch->getSuccessor(1))
      continue;
    CmpInst::Predicate predicate;
    BasicBlock *to;
    if (DT.dominates(BasicBlockEdge(from, branch->getSuccessor(0)), B)) {
      predicate = compare->getPredicate();
      to = branch->getSuccessor(0);
    } else if (DT.dominates(BasicBlockEdge(from, branch->getSuccessor(1)), B)) {
      predicate = compare->getInversePredicate();
      to = branch->getSuccessor(1);
    } else {
      continue;
    }
    Value *counter = compare->getOperand(0), *bound = compare->getOperand(1);
    if (!isThreadCounter(counter, &L, SE)) {
      std::swap(counter, bound);
      predicate = CmpInst::getSwappedPredicate(predicate);
    }
    if (!isThreadCounter(counter, &L, SE))
      continue;
    const SCEV *S = SE.getSCEV(bound);
    if (!SE.isLoopInvariant(S, outer) || !expander.isSafeToExpand(S))
      continue;
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
  return Guard();
}

// Whether every path of an iteration of innermost loop `L` from `start` reaches `target`
// before the loop's next iteration or exit, where a branch on a check the copy knows the
// answer of (`answers`) goes that way only.
bool alwaysReaches(BasicBlock *start, BasicBlock *target, const Loop &L,
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
      Value *condition = branch->getCondition();
      bool negated = PatternMatch::match(condition, PatternMatch::m_Not(PatternMatch::m_Value(condition)));
      auto known = answers.find(condition);
      if (known != answers.end())
        next = {branch->getSuccessor(known->second != negated ? 0 : 1)};
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

// The workgroup accesses of innermost loop `L` as a WorkgroupNest, when `L` is the x loop of a
// nest of thread loops (every marker's thread ids its and its parents' counters) and every
// access is affine in the thread's x, when the checks `answers` has hold. False where one is
// not (nothing changes).
bool describeWorkgroupNest(Loop &L, DominatorTree &DT, ScalarEvolution &SE, AAResults &AA,
                           SCEVExpander &expander, const DenseMap<Value *, bool> &answers,
                           WorkgroupNest &nest) {
  const Loop *Y = L.getParentLoop();
  const Loop *Z = Y ? Y->getParentLoop() : nullptr;
  if (!Z)
    return false;
  nest.rowOnly = gpu_host::versionedAtGuard(L);
  const Loop *loops[3] = {&L, Y, Z};
  for (unsigned d = 0; d < 3; ++d) {
    nest.threads[d] = iterationsOf(*loops[d], SE);
    if (!nest.threads[d] || !SE.isLoopInvariant(nest.threads[d], Z) ||
        !expander.isSafeToExpand(nest.threads[d]))
      return false;
  }
  auto nestInvariant = [&](const SCEV *S) {
    return SE.isLoopInvariant(S, Z) && expander.isSafeToExpand(S);
  };
  using namespace gpu_check;
  for (BasicBlock *B : L.blocks())
    for (Instruction &I : *B) {
      if (!callsMarker(I, WORKGROUP))
        continue;
      auto *call = cast<CallInst>(&I);
      for (unsigned d = 0; d < 3; ++d)
        if (!isThreadCounter(call->getArgOperand(WORKGROUP_THREAD + d), loops[d], SE))
          return false;
      auto *site = dyn_cast<GlobalVariable>(call->getArgOperand(WORKGROUP_SITE));
      auto *fields = site && site->hasInitializer()
                         ? dyn_cast<ConstantStruct>(site->getInitializer())
                         : nullptr;
      auto *kind = fields ? dyn_cast<ConstantInt>(fields->getOperand(1)) : nullptr;
      if (!kind || kind->getZExtValue() == ACCESS_ATOMIC)
        return false;
      WorkgroupAccess access;
      access.call = call;
      access.variable = call->getArgOperand(WORKGROUP_VARIABLE);
      access.writes = kind->getZExtValue() == ACCESS_STORE ||
                      kind->getZExtValue() == ACCESS_COPY_WRITE;
      access.bytes = SE.getSCEV(call->getArgOperand(WORKGROUP_BYTES));
      if (!nestInvariant(access.bytes))
        return false;
      const SCEV *rest;
      if (!splitOn(SE.getSCEV(call->getArgOperand(WORKGROUP_OFFSET)), &L, SE, access.row,
                   access.stride[0]) ||
          !nestInvariant(access.stride[0]) || !SE.isLoopInvariant(access.row, &L) ||
          !expander.isSafeToExpand(access.row))
        return false;
      if (!splitOn(access.row, Y, SE, rest, access.stride[1]) ||
          !splitOn(rest, Z, SE, access.base, access.stride[2]) || !nestInvariant(access.base) ||
          !nestInvariant(access.stride[1]) || !nestInvariant(access.stride[2])) {
        // The row's own offset: right for the nest's only row.
        nest.rowOnly = true;
        access.base = access.row;
        access.stride[1] = access.stride[2] = SE.getZero(access.row->getType());
      }
      access.guard = guardOf(B, L, Z, DT, SE, expander);
      BasicBlock *header = L.getHeader();
      access.everyThread = access.guard.limit
                               ? alwaysReaches(header, access.guard.from, L, answers) &&
                                     alwaysReaches(access.guard.to, B, L, answers)
                               : alwaysReaches(header, B, L, answers);
      nest.accesses.push_back(access);
    }
  if (nest.accesses.empty())
    return false;
  // Per variable: read, or only written by stores the copy can tell the runtime of.
  SmallVector<Value *, 4> variables;
  for (const WorkgroupAccess &access : nest.accesses)
    if (!is_contained(variables, access.variable))
      variables.push_back(access.variable);
  for (Value *variable : variables) {
    auto ofVariable = make_filter_range(nest.accesses, [&](const WorkgroupAccess &access) {
      return access.variable == variable;
    });
    bool recordable = all_of(ofVariable, [&](const WorkgroupAccess &access) {
      return access.writes && access.everyThread &&
             all_of(seq<unsigned>(WORKGROUP_THREAD + 1, WORKGROUP_BLOCK + 3), [&](unsigned i) {
               return sameEveryIteration(access.call->getArgOperand(i), L, AA);
             }) &&
             all_of(seq<unsigned>(WORKGROUP_ROW, WORKGROUP_OFFSET), [&](unsigned i) {
               return sameEveryIteration(access.call->getArgOperand(i), L, AA);
             });
    });
    if (recordable) {
      for (unsigned i = 0; i < nest.accesses.size(); ++i)
        if (nest.accesses[i].variable == variable)
          nest.recorded.push_back(i);
      continue;
    }
    const CallInst *call = (*ofVariable.begin()).call;
    Value *slot = call->getArgOperand(WORKGROUP_SLOT);
    Value *stamp = call->getArgOperand(WORKGROUP_STAMP);
    if (isa<ConstantPointerNull>(slot) || !sameEveryIteration(slot, L, AA) ||
        !sameEveryIteration(stamp, L, AA))
      return false;
    nest.ready.push_back({slot, stamp});
  }
  return true;
}

// The test before the loop (at `at`) that no thread of `nest` accesses a byte of a variable
// another thread writes, and that the block has written every variable the nest reads in full
// (its ready stamp): then the accesses need no shadow. In 128 bits nothing wraps. Two accesses
// with the same offsets and size (a thread reading the element it writes) overlap only within
// a thread when one thread's bytes never reach another's (the strides in x, y, z each step
// past what the dimensions below span); any other two, when the bytes the whole nest's threads
// reach with them do not meet.
Value *raceFreeTest(const WorkgroupNest &nest, const Loop &L, AAResults &AA,
                    SCEVExpander &expander, Instruction *at) {
  IRBuilder<> b(at);
  Value *zero = b.getIntN(128, 0), *one = b.getIntN(128, 1);
  auto smax = [&](Value *l, Value *r) { return b.CreateSelect(b.CreateICmpSGT(l, r), l, r); };
  auto abs = [&](Value *v) { return b.CreateSelect(b.CreateICmpSLT(v, zero), b.CreateNeg(v), v); };
  Value *threads[3];
  for (unsigned d = 0; d < 3; ++d)
    threads[d] = wide(nest.threads[d], false, expander, at);
  Value *all = b.getTrue();
  if (nest.rowOnly)
    all = b.CreateAnd(all, b.CreateAnd(b.CreateICmpEQ(threads[1], one),
                                       b.CreateICmpEQ(threads[2], one)));
  for (auto [slot, stamp] : nest.ready) {
    Value *stampValue = computeOutside(stamp, L, AA, at);
    all = b.CreateAnd(all, b.CreateICmpEQ(b.CreateLoad(stampValue->getType(),
                                                       computeOutside(slot, L, AA, at)),
                                          stampValue));
  }
  struct Extent {
    Value *low, *high, *stride[3], *bytes;
  };
  SmallVector<Extent, 8> extents;
  for (const WorkgroupAccess &access : nest.accesses) {
    Extent extent;
    // At least one thread, for the extent's sake: an access no thread makes reaches nothing.
    Value *counts[3] = {smax(passing(access.guard, threads[0], expander, at), one), threads[1],
                        threads[2]};
    Value *base = wide(access.base, true, expander, at);
    extent.low = extent.high = base;
    for (unsigned d = 0; d < 3; ++d) {
      extent.stride[d] = wide(access.stride[d], true, expander, at);
      Value *reach = b.CreateMul(extent.stride[d], b.CreateSub(counts[d], one));
      Value *down = b.CreateICmpSLT(reach, zero);
      extent.low = b.CreateAdd(extent.low, b.CreateSelect(down, reach, zero));
      extent.high = b.CreateAdd(extent.high, b.CreateSelect(down, zero, reach));
    }
    extent.bytes = wide(access.bytes, false, expander, at);
    extent.high = b.CreateAdd(extent.high, extent.bytes);
    extents.push_back(extent);
  }
  for (unsigned i = 0; i < nest.accesses.size(); ++i) {
    const WorkgroupAccess &write = nest.accesses[i];
    if (!write.writes)
      continue;
    // No two threads' bytes of this access meet.
    Value *below = zero;
    for (unsigned d = 0; d < 3; ++d) {
      Value *step = abs(extents[i].stride[d]);
      Value *single = b.CreateICmpSLE(threads[d], one);
      Value *apart = b.CreateICmpSGE(step, b.CreateAdd(below, extents[i].bytes));
      all = b.CreateAnd(all, b.CreateOr(single, apart));
      below = b.CreateAdd(below, b.CreateMul(step, b.CreateSub(threads[d], one)));
    }
    for (unsigned j = 0; j < nest.accesses.size(); ++j) {
      const WorkgroupAccess &other = nest.accesses[j];
      if (j == i || other.variable != write.variable)
        continue;
      bool same = other.base == write.base && other.bytes == write.bytes &&
                  all_of(seq(3u), [&](unsigned d) { return other.stride[d] == write.stride[d]; });
      if (same)
        continue;
      all = b.CreateAnd(all, b.CreateOr(b.CreateICmpSLE(extents[i].high, extents[j].low),
                                        b.CreateICmpSLE(extents[j].high, extents[i].low)));
    }
  }
  return all;
}

// A call of the workgroup row hook (CHECK_WRITES_OFFSET's): its function and arguments, and
// the slot and stamp that tell whether the variable is written in full already (null: no slot).
struct RowWrites {
  Value *hook, *slot, *stamp;
  SmallVector<Value *, 12> arguments;
};

// The calls of the row hook that tell the runtime of the stores `nest.recorded` the threads
// of the running row make: what their markers would tell it, thread by thread. Computed before
// `L` (at `at`, in its preheader).
SmallVector<RowWrites, 4> rowWrites(const WorkgroupNest &nest, const Loop &L, AAResults &AA,
                                    SCEVExpander &expander, Instruction *at) {
  using namespace gpu_check;
  SmallVector<RowWrites, 4> calls;
  IRBuilder<> b(at);
  Type *I64 = b.getInt64Ty();
  for (unsigned index : nest.recorded) {
    const WorkgroupAccess *access = &nest.accesses[index];
    CallInst *call = access->call;
    auto entry = [&](unsigned i) { return computeOutside(call->getArgOperand(i), L, AA, at); };
    Value *threads = wide(nest.threads[0], false, expander, at);
    RowWrites row;
    row.hook = entry(WORKGROUP_ROW);
    row.slot = isa<ConstantPointerNull>(call->getArgOperand(WORKGROUP_SLOT))
                   ? nullptr
                   : entry(WORKGROUP_SLOT);
    row.stamp = row.slot ? entry(WORKGROUP_STAMP) : nullptr;
    row.arguments = {entry(WORKGROUP_CONTEXT),
                     entry(WORKGROUP_VARIABLE),
                     expander.expandCodeFor(access->row, I64, at),
                     expander.expandCodeFor(access->stride[0], I64, at),
                     expander.expandCodeFor(access->bytes, I64, at),
                     b.CreateTrunc(passing(access->guard, threads, expander, at), b.getInt32Ty())};
    for (unsigned i = WORKGROUP_THREAD + 1; i < WORKGROUP_BLOCK + 3; ++i)
      row.arguments.push_back(entry(i));
    calls.push_back(std::move(row));
  }
  return calls;
}

// Makes `calls` before `at` (the copy's preheader), each where its variable is not written in
// full yet: once it is, nothing the nest does can race with or read what the call would record.
void callRowWrites(ArrayRef<RowWrites> calls, const WorkgroupNest &nest, Instruction *at) {
  for (const RowWrites &row : calls) {
    Instruction *here = at;
    if (row.slot) {
      IRBuilder<> test(at);
      Value *unready =
          test.CreateICmpNE(test.CreateLoad(row.stamp->getType(), row.slot), row.stamp);
      here = SplitBlockAndInsertIfThen(unready, at, false);
    }
    IRBuilder<> b(here);
    SmallVector<Type *, 12> types;
    for (Value *argument : row.arguments)
      types.push_back(argument->getType());
    CallInst *call =
        b.CreateCall(FunctionType::get(b.getVoidTy(), types, false), row.hook, row.arguments);
    call->setMemoryEffects(nest.accesses[nest.recorded.front()].call->getMemoryEffects());
    gpu_check::markHookCall(call);
    call->setDoesNotThrow();
    call->addFnAttr(Attribute::WillReturn);
  }
}

// Whether `L` looks like a thread loop: its counter (from 0 by 1) is the thread id something in
// it is given, a check's report or hook (as their thread x, y or z) or the ids variable (one of
// `L`'s own blocks stores it there for the kernel's body). Only a heuristic, of which loops are
// worth a copy: a copy is right for any loop.
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
        if (call->hasMetadata(gpu_check::HOOK_CALL) && any_of(call->args(), isCounter))
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
      if (!isCheckMarker(I) || !describeCheck(cast<CallInst>(&I), L, SE, AA, expander, check))
        continue;
      check.guard = guardOf(B, L, &L, DT, SE, expander);
      known.push_back(check);
    }
  DenseMap<Value *, bool> answers;
  for (const KnownCheck &check : known)
    answers[check.call] = check.answer;
  WorkgroupNest nest;
  bool raceFree = describeWorkgroupNest(L, DT, SE, AA, expander, answers, nest);
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
    all = b.CreateAnd(all, testBefore(check, L, AA, backedges, expander, at));
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
  for (const KnownCheck &check : known)
    replaceAndRecursivelySimplify(cast<Instruction>(map[check.call]),
                                  ConstantInt::getBool(C, check.answer));
  for (BasicBlock *copy : copies)
    ConstantFoldTerminator(copy);
  removeUnreachableBlocks(*header->getParent());
  // Last: the blocks it adds are in no loop LoopInfo knows of (the caller computes it again).
  callRowWrites(writes, nest, copyPreheader->getTerminator());
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

// Runs `change` on the loops of `F` one change at a time, with fresh analyses after each, until
// none changes (each loop at most once where `eachLoopOnce`). Returns whether any changed.
template <typename Change>
bool changeLoops(Function &F, FunctionAnalysisManager &FAM, bool eachLoopOnce, Change change) {
  bool changed = false;
  SmallPtrSet<BasicBlock *, 16> done;
  for (unsigned round = 0; round < 256; ++round) {
    auto &LI = FAM.getResult<LoopAnalysis>(F);
    auto &DT = FAM.getResult<DominatorTreeAnalysis>(F);
    auto &SE = FAM.getResult<ScalarEvolutionAnalysis>(F);
    auto &AA = FAM.getResult<AAManager>(F);
    bool once = false;
    for (Loop *L : LI.getLoopsInPreorder()) {
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
    FAM.invalidate(F, PreservedAnalyses::none());
  }
  return changed;
}

// The barrier hooks of checked objects' thread loops gathered after the loops
// (`gatherBarrierHooks`), before ExitThreadLoopsAtGuards looks at the loops.
struct GatherBarrierHooks : PassInfoMixin<GatherBarrierHooks> {
  PreservedAnalyses run(Function &F, FunctionAnalysisManager &FAM) {
    return changeLoops(F, FAM, false, gatherBarrierHooks) ? PreservedAnalyses::none()
                                                            : PreservedAnalyses::all();
  }
};

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

void gpu_check::addBarrierGathering(FunctionPassManager &FPM) {
  FPM.addPass(GatherBarrierHooks());
}

void gpu_check::addCheckedLoopVersioning(FunctionPassManager &FPM) {
  FPM.addPass(VersionCheckedLoops());
}
