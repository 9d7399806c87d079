// A checked object's thread loop's accesses of global memory as rows (see global_rows.h).

#include "global_rows.h"
#include "check_markers.h"

#include "llvm/Analysis/LoopIterator.h"
#include "llvm/Analysis/ScalarEvolutionExpressions.h"
#include "llvm/IR/IRBuilder.h"
#include "llvm/Transforms/Utils/BasicBlockUtils.h"

#include <string>

using namespace llvm;
using namespace gpu_check;

namespace {

// `S` as start + step * (`L`'s counter), start and step the same in every iteration: an affine
// recurrence of `L`, with terms `L` does not change (recurringTerm), the same in every
// iteration (`globalRowCalls` computes it before `L`).
bool affineIn(const SCEV *S, const Loop &L, ScalarEvolution &SE, AAResults &AA,
              SCEVExpander &expander, const SCEV *&start, const SCEV *&step) {
  auto [recurring, others] = recurringTerm(S, L, SE);
  const auto *rec = dyn_cast<SCEVAddRecExpr>(recurring);
  if (!rec || rec->getLoop() != &L || !rec->isAffine())
    return false;
  step = rec->getStepRecurrence(SE);
  start = SE.getAddExpr(others, rec->getStart());
  return SE.isLoopInvariant(step, &L) && sameEveryIteration(start, L, SE, AA, expander);
}

} // namespace

// (global_rows.h)
bool gpu_check::describeGlobalRows(Loop &L, LoopInfo &LI, DominatorTree &DT, ScalarEvolution &SE,
                                   AAResults &AA, SCEVExpander &expander,
                                   const DenseMap<Value *, bool> &answers,
                                   SmallVectorImpl<GlobalRow> &rows) {
  // Where the copy goes with the switch on: the markers' blocks, once the checks hold.
  DenseMap<Value *, bool> on = answers;
  for (auto &[value, answer] : on)
    if (auto *call = dyn_cast<CallInst>(value); call && callsMarker(*call, CHOSEN))
      answer = true;
  LoopBlocksRPO order(&L);
  order.perform(&LI);
  SmallVector<GlobalRow, 4> found;
  for (BasicBlock *B : order)
    for (Instruction &I : *B) {
      if (!callsMarker(I, GLOBAL))
        continue;
      auto *call = cast<CallInst>(&I);
      if (LI.getLoopFor(B) != &L || !isThreadCounter(call->getArgOperand(GLOBAL_THREAD), &L, SE))
        return false;
      for (unsigned i : {unsigned(GLOBAL_HOOK), unsigned(GLOBAL_ROW), unsigned(GLOBAL_ON),
                         unsigned(GLOBAL_CONTEXT), unsigned(GLOBAL_SITE), GLOBAL_THREAD + 1u,
                         GLOBAL_THREAD + 2u, unsigned(GLOBAL_BLOCK), GLOBAL_BLOCK + 1u,
                         GLOBAL_BLOCK + 2u})
        if (!sameEveryIteration(call->getArgOperand(i), L, AA))
          return false;
      const SCEV *start, *stepSCEV;
      if (!affineIn(SE.getSCEV(call->getArgOperand(GLOBAL_POINTER)), L, SE, AA, expander, start,
                    stepSCEV))
        return false;
      const auto *step = dyn_cast<SCEVConstant>(stepSCEV);
      const auto *bytes = dyn_cast<SCEVConstant>(SE.getSCEV(call->getArgOperand(GLOBAL_BYTES)));
      // No two threads of the row touch a byte: a row is the accesses of distinct threads.
      if (!step || !bytes || bytes->getAPInt().isZero() ||
          step->getAPInt().abs().ult(bytes->getAPInt()))
        return false;
      GlobalRow row = {call, start, step, bytes,
                       guardOf(B, L, &L, DT, SE, expander, /*ranges=*/&AA)};
      // Every thread the guard lets through: its branches go their way for those.
      DenseMap<Value *, bool> through = on;
      for (auto [condition, value] : row.guard.conditions)
        through[condition] = value;
      if (!alwaysReaches(L.getHeader(), B, L, through))
        return false;
      found.push_back(row);
    }
  if (found.empty())
    return false;
  rows.append(found.begin(), found.end());
  return true;
}

// (global_rows.h)
SmallVector<GlobalRowCall, 4> gpu_check::globalRowCalls(ArrayRef<GlobalRow> rows, const Loop &L,
                                                        ScalarEvolution &SE, AAResults &AA,
                                                        SCEVExpander &expander,
                                                        Value *iterations, Instruction *at,
                                                        Value *&valid) {
  IRBuilder<> b(at);
  Type *I64 = b.getInt64Ty();
  SmallVector<GlobalRowCall, 4> calls;
  for (const GlobalRow &given : rows) {
    // Its guard's bounds with the values they take from the loop computed before it.
    GlobalRow row = given;
    for (const SCEV **S : {&row.guard.limit, &row.guard.excluded})
      if (*S)
        *S = outsideOf(*S, L, SE, AA, at);
    auto entry = [&](unsigned i) { return computeOutside(row.call->getArgOperand(i), L, AA, at); };
    Value *pointer = row.call->getArgOperand(GLOBAL_POINTER);
    const SCEV *first = outsideOf(row.start, L, SE, AA, at);
    Value *start = b.CreatePtrToInt(expander.expandCodeFor(first, pointer->getType(), at), I64);
    Value *step = expander.expandCodeFor(row.step, I64, at);
    PassingRange range = passingRange(row.guard, iterations, expander, at);
    Value *count = range.count;
    Value *firstThread = range.first;
    start = b.CreateAdd(start, b.CreateMul(step, b.CreateTrunc(firstThread, I64)));
    Value *off = b.CreateICmpEQ(b.CreateLoad(b.getInt32Ty(), entry(GLOBAL_ON)), b.getInt32(0));
    // A row is every thread of the range: one the guard turns away further on leaves none (the
    // copy is not run then, while the switch is on).
    valid = b.CreateAnd(valid, b.CreateOr(off, b.CreateNot(range.turnedAwayLater)));
    if (!row.guard.mustBeFalse.empty()) {
      // The row is the guard's only while those are false.
      Value *holds = b.getTrue();
      for (Value *value : row.guard.mustBeFalse)
        holds = b.CreateAnd(holds, b.CreateNot(computeOutside(value, L, AA, at)));
      valid = b.CreateAnd(valid, b.CreateOr(off, holds));
    }
    GlobalRowCall call;
    call.hook = entry(GLOBAL_ROW);
    call.on = entry(GLOBAL_ON);
    call.arguments = {entry(GLOBAL_CONTEXT),
                      entry(GLOBAL_SITE),
                      start,
                      step,
                      expander.expandCodeFor(row.bytes, I64, at),
                      b.CreateTrunc(firstThread, b.getInt32Ty()),
                      b.CreateTrunc(count, b.getInt32Ty())};
    for (unsigned i = GLOBAL_THREAD + 1; i < GLOBAL_BLOCK + 3; ++i)
      call.arguments.push_back(entry(i));
    calls.push_back(std::move(call));
  }
  return calls;
}

// (global_rows.h)
void gpu_check::callGlobalRows(ArrayRef<GlobalRowCall> calls, Instruction *at) {
  if (calls.empty())
    return;
  IRBuilder<> test(at);
  Value *on = test.CreateICmpNE(test.CreateLoad(test.getInt32Ty(), calls.front().on),
                                test.getInt32(0));
  std::string name = at->getParent()->getName().str();
  Instruction *then = SplitBlockAndInsertIfThen(on, at, false);
  // The copy's blocks keep its name.
  then->getParent()->setName(name + ".rows");
  at->getParent()->setName(name + ".told");
  IRBuilder<> b(then);
  for (const GlobalRowCall &row : calls) {
    SmallVector<Type *, 12> types;
    for (Value *argument : row.arguments)
      types.push_back(argument->getType());
    CallInst *call =
        b.CreateCall(FunctionType::get(b.getVoidTy(), types, false), row.hook, row.arguments);
    // The row hook reads the context and the site, and writes its own shadow.
    call->setMemoryEffects(runtimeEffects(ModRefInfo::Ref, ModRefInfo::ModRef));
    markHookCall(call);
    call->setDoesNotThrow();
    call->addFnAttr(Attribute::WillReturn);
  }
}
