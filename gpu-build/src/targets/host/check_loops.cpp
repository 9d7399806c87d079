// The host optimization pipeline's passes for checked objects' loops (check_markers.h): a
// thread loop's barrier hooks gathered into one call after the loop, and loops versioned on
// the checks a test before the loop decides for every iteration. optimize.cpp adds them to the
// pipeline around its own thread-loop pass.

#include "check_loops.h"
#include "check_markers.h"
#include "loops.h"

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
#include "llvm/IR/PassManager.h"
#include "llvm/Transforms/Utils/BasicBlockUtils.h"
#include "llvm/Transforms/Utils/Local.h"
#include "llvm/Transforms/Utils/LoopSimplify.h"
#include "llvm/Transforms/Utils/LoopUtils.h"
#include "llvm/Transforms/Utils/ScalarEvolutionExpander.h"
#include "llvm/Transforms/Utils/ValueMapper.h"

using namespace llvm;

namespace {

// The most instructions a loop of a checked object may have for `versionCheckedLoop` to copy it.
constexpr unsigned CheckedCopyBudget = 4000;

// A check of a checked object's loop (a marker of check_markers.h) that gives the same answer
// in every iteration when a test before the loop passes: for `within`, an address the same in
// every iteration or stepping by the same amount, with bounds the loop does not compute (the
// test: every address the iterations give lies within them); for `unready`, a slot and a stamp
// the loop does not compute (the test: the block has stamped the slot already).
struct KnownCheck {
  CallInst *call;
  // within: the address at the first iteration and its step; unready: the slot and the stamp.
  const SCEV *start, *step;
  const SCEV *bytes, *low, *high;
  // The call's value when the test passes.
  bool answer;
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

// `call` as a KnownCheck of `L`, if it is one (nothing changes).
bool describeCheck(CallInst *call, const Loop &L, ScalarEvolution &SE, SCEVExpander &expander,
                   KnownCheck &check) {
  auto invariant = [&](Value *value, const SCEV *&S) {
    if (!SE.isSCEVable(value->getType()))
      return false;
    S = SE.getSCEV(value);
    return SE.isLoopInvariant(S, &L) && expander.isSafeToExpand(S);
  };
  check = {call, nullptr, nullptr, nullptr, nullptr, nullptr, false};
  if (call->getCalledFunction()->getName() == gpu_check::UNREADY) {
    // The stamp is the block's: a loop it is the same in runs within one block.
    check.answer = false;
    return invariant(call->getArgOperand(0), check.start) &&
           invariant(call->getArgOperand(1), check.step);
  }
  check.answer = true;
  if (!invariant(call->getArgOperand(1), check.bytes) ||
      !invariant(call->getArgOperand(2), check.low) ||
      !invariant(call->getArgOperand(3), check.high))
    return false;
  const SCEV *address = SE.getSCEV(call->getArgOperand(0));
  check.start = address;
  check.step = SE.getZero(address->getType());
  if (!SE.isLoopInvariant(address, &L)) {
    const auto *rec = dyn_cast<SCEVAddRecExpr>(address);
    if (!rec || rec->getLoop() != &L || !rec->isAffine())
      return false;
    check.start = rec->getStart();
    check.step = rec->getStepRecurrence(SE);
  }
  for (const SCEV *S : {check.start, check.step})
    if (!SE.isLoopInvariant(S, &L) || !expander.isSafeToExpand(S))
      return false;
  return true;
}

// The test of `check` before loop `L` (at `at`), whose iterations after the first are
// `backedges`.
Value *testBefore(const KnownCheck &check, const SCEV *backedges, SCEVExpander &expander,
                  Instruction *at) {
  IRBuilder<> b(at);
  if (check.call->getCalledFunction()->getName() == gpu_check::UNREADY) {
    Value *slot = expander.expandCodeFor(check.start, check.call->getArgOperand(0)->getType(), at);
    Value *stamp = expander.expandCodeFor(check.step, check.call->getArgOperand(1)->getType(), at);
    return b.CreateICmpEQ(b.CreateLoad(stamp->getType(), slot), stamp, "stamped");
  }
  // In 128 bits nothing wraps: the first and the last address, the lower and the higher of them,
  // and every address between, as the step is the same.
  Type *I64 = b.getInt64Ty(), *I128 = b.getInt128Ty();
  auto wide = [&](const SCEV *S, bool isSigned) {
    Value *value = expander.expandCodeFor(S, I64, at);
    return isSigned ? b.CreateSExt(value, I128) : b.CreateZExt(value, I128);
  };
  Value *first = wide(check.start, false);
  Value *last = b.CreateAdd(first, b.CreateMul(wide(check.step, true), wide(backedges, false)));
  Value *ascending = b.CreateICmpSLT(first, last);
  Value *lowest = b.CreateSelect(ascending, first, last);
  Value *highest = b.CreateSelect(ascending, last, first);
  return b.CreateAnd(
      b.CreateICmpSGE(lowest, wide(check.low, false)),
      b.CreateICmpSLE(b.CreateAdd(highest, wide(check.bytes, false)), wide(check.high, false)),
      "within");
}

// In a checked object, runs a copy of innermost loop `L` without the checks that give the same
// answer in every iteration, when the tests before the loop say they do (an access whose address
// steps by the same amount per thread, within its buffer for the first and the last thread, is
// within it for all; a variable's ready stamp, once set, stays for the block): the copy keeps
// no report branches, so the vectorizer takes it as it takes the unchecked loop. Returns whether
// it changed `L`.
bool versionCheckedLoop(Loop &L, LoopInfo &LI, DominatorTree &DT, ScalarEvolution &SE) {
  if (!L.isInnermost() || none_of(L.blocks(), [](BasicBlock *B) {
        return any_of(*B, isCheckMarker);
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
      if (isCheckMarker(I) && describeCheck(cast<CallInst>(&I), L, SE, expander, check))
        known.push_back(check);
    }
  if (known.empty() || !expander.isSafeToExpand(backedges))
    return false;
  formLCSSA(L, DT, &LI, &SE);
  BasicBlock *header = L.getHeader();
  BasicBlock *preheader = SplitEdge(L.getLoopPreheader(), header, &DT, &LI, nullptr, "checked");
  Instruction *at = preheader->getTerminator();
  IRBuilder<> b(at);
  Value *all = b.getTrue();
  for (const KnownCheck &check : known)
    all = b.CreateAnd(all, testBefore(check, backedges, expander, at));
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
  for (const KnownCheck &check : known)
    replaceAndRecursivelySimplify(cast<Instruction>(map[check.call]),
                                  ConstantInt::getBool(C, check.answer));
  for (BasicBlock *copy : copies)
    ConstantFoldTerminator(copy);
  removeUnreachableBlocks(*header->getParent());
  return true;
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

// Whether `value` is the same in every iteration of `L` and can be computed again after it:
// defined outside it, a load of what the loop does not write (a hook's function pointer, the
// block's ids) or an operation without effects (the site a barrier's region selects) of such
// values.
bool computableAfter(Value *value, const Loop &L, AAResults &AA, unsigned depth = 0) {
  auto *I = dyn_cast<Instruction>(value);
  if (!I || !L.contains(I->getParent()))
    return true;
  if (depth > 4 || isa<PHINode>(I))
    return false;
  if (auto *load = dyn_cast<LoadInst>(I))
    return load->isSimple() && computableAfter(load->getPointerOperand(), L, AA, depth + 1) &&
           (load->hasMetadata(LLVMContext::MD_invariant_load) || unwrittenIn(load, L, AA));
  if (!isSafeToSpeculativelyExecute(I))
    return false;
  return all_of(I->operands(),
                [&](Value *operand) { return computableAfter(operand, L, AA, depth + 1); });
}

// `value` (computableAfter) computed again before `at`, outside `L`.
Value *computeAfter(Value *value, const Loop &L, Instruction *at) {
  auto *I = dyn_cast<Instruction>(value);
  if (!I || !L.contains(I->getParent()))
    return value;
  Instruction *copy = I->clone();
  for (Use &operand : copy->operands())
    operand.set(computeAfter(operand.get(), L, at));
  copy->insertBefore(at->getIterator());
  return copy;
}

// In a checked object, when every thread of innermost thread loop `L` tells the runtime it
// reached a barrier (a `gpu.check.barrier` call each iteration runs once, with the thread's x
// the loop's counter and everything else the same for the loop), one call of the row hook after
// the loop tells it for all of them: the runtime's per-thread work is a counter each, and the
// loop keeps no call outside its guarded work, so a tree reduction's step loop can end at its
// guard again. Every thread's accesses before the barrier come before the call still, and the
// next region's after it. Returns whether it changed `L`.
bool gatherBarrierHooks(Loop &L, LoopInfo &LI, DominatorTree &DT, ScalarEvolution &SE,
                        AAResults &AA) {
  if (!L.isInnermost() ||
      none_of(L.blocks(), [](BasicBlock *B) {
        return any_of(*B, [](Instruction &I) { return callsMarker(I, gpu_check::BARRIER); });
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
    if (!DT.dominates(B, latch))
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
      bool invariant = true;
      for (unsigned i = 0; i < call->arg_size(); ++i)
        invariant &= i == 4 || computableAfter(call->getArgOperand(i), L, AA);
      const SCEV *count = SE.getAddExpr(SE.getTruncateOrZeroExtend(backedges, x->getType()),
                                        SE.getOne(x->getType()));
      if (!invariant || !expander.isSafeToExpand(rec->getStart()) ||
          !expander.isSafeToExpand(count))
        continue;
      Instruction *at = preheader->getTerminator();
      Value *first = expander.expandCodeFor(rec->getStart(), x->getType(), at);
      Value *threads = expander.expandCodeFor(count, x->getType(), at);
      Instruction *after = &*exit->getFirstInsertionPt();
      auto again = [&](unsigned i) { return computeAfter(call->getArgOperand(i), L, after); };
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
          return isCheckMarker(I) || callsMarker(I, gpu_check::BARRIER);
        }))
      return PreservedAnalyses::all();
    // Each loop once: the markers a copy keeps are the ones its original could not be
    // versioned on.
    bool changed = changeLoops(F, FAM, true,
                               [](Loop &L, LoopInfo &LI, DominatorTree &DT, ScalarEvolution &SE,
                                  AAResults &) { return versionCheckedLoop(L, LI, DT, SE); });
    changed |= gpu_check::lowerCheckMarkers(F);
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
