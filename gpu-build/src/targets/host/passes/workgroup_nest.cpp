// A nest of thread loops' workgroup accesses, for the checked loops' versioning (see
// workgroup_nest.h): a thread loop's copy also runs without telling the runtime's shadow of
// each access when no two of its nest's threads touch a byte of workgroup memory one of them
// writes (then it tells the shadow nothing but the bytes it writes, a row at a time).

#include "workgroup_nest.h"
#include "check_markers.h"
#include "checked_loops.h"
#include "loops.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/Sequence.h"
#include "llvm/Analysis/AliasAnalysis.h"
#include "llvm/Analysis/LoopInfo.h"
#include "llvm/Analysis/ScalarEvolution.h"
#include "llvm/Analysis/ScalarEvolutionExpressions.h"
#include "llvm/IR/Dominators.h"
#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/Instructions.h"
#include "llvm/IR/PatternMatch.h"
#include "llvm/Transforms/Utils/BasicBlockUtils.h"
#include "llvm/Transforms/Utils/ScalarEvolutionExpander.h"

#include <utility>

using namespace llvm;

namespace {

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

} // namespace

// (workgroup_nest.h)
bool gpu_check::describeWorkgroupNest(Loop &L, DominatorTree &DT, ScalarEvolution &SE,
                                      AAResults &AA, SCEVExpander &expander,
                                      const DenseMap<Value *, bool> &answers,
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

// (workgroup_nest.h)
Value *gpu_check::raceFreeTest(const WorkgroupNest &nest, const Loop &L, AAResults &AA,
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

// (workgroup_nest.h)
SmallVector<gpu_check::RowWrites, 4> gpu_check::rowWrites(const WorkgroupNest &nest,
                                                          const Loop &L, AAResults &AA,
                                                          SCEVExpander &expander,
                                                          Instruction *at) {
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

// (workgroup_nest.h)
void gpu_check::callRowWrites(ArrayRef<RowWrites> calls, const WorkgroupNest &nest,
                              Instruction *at) {
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
