// Barrier fission for the host target (see fission.rs for the design and why it is done on
// LLVM IR). This is the IR surgery LLVM's C API cannot express: cloning and inlining functions,
// splitting blocks, dominator and post-dominator trees, and SSA reconstruction.
//
// In: `<kernel>.ids(i32 x, i32 y, i32 z, params...) -> void`, whose barriers are calls of the
// given functions. Out: a new internal function
//
//   i32 region(i32 state, i32 x, i32 y, i32 z, i32 ltid, i64 nthreads,
//              ptr uniform_in, ptr uniform_out, ptr threads, params...)
//
// that runs one thread from the point `state` names (0: the start, s: just after barrier s) to
// its next barrier (returns that barrier's s) or its end (returns `done`, a value the caller
// chooses, fission.rs). Values live across a
// barrier are saved where they are defined and reloaded where a region resumes: values that are
// the same in every thread of a block (uniform) in one slot per block (written to
// `uniform_out`, read from `uniform_in`: the caller copies out to in between regions), others in
// per-thread arrays in `threads` (array k at threads + offset_k * nthreads, element ltid).
// Private allocations (allocas that cannot be promoted to registers) move there too. A kernel
// whose subgroup barriers (not block barriers) sit in control flow that depends on the thread
// is split too, its subgroups then run by their own state (fission.rs): every value is saved per
// thread, and a table says which states follow a subgroup barrier.

#include "passes.h"

#include "llvm-c/Core.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/Analysis/PostDominators.h"
#include "llvm/Analysis/ValueTracking.h"
#include "llvm/IR/CFG.h"
#include "llvm/IR/Dominators.h"
#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/InstIterator.h"
#include "llvm/IR/Instructions.h"
#include "llvm/IR/IntrinsicInst.h"
#include "llvm/IR/Module.h"
#include "llvm/IR/Verifier.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Transforms/Utils/BasicBlockUtils.h"
#include "llvm/Transforms/Utils/Cloning.h"
#include "llvm/Transforms/Utils/PromoteMemToReg.h"
#include "llvm/Transforms/Utils/SSAUpdater.h"

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

using namespace llvm;

namespace {

constexpr uint64_t SLOT_ALIGN = 16;
// Parameters of the body: x, y, z, then the kernel's.
constexpr unsigned BODY_IDS = 3;
// Parameters of the region function before the kernel's.
enum RegionParam : unsigned {
  STATE,
  X,
  Y,
  Z,
  LTID,
  NTHREADS,
  UNIFORM_IN,
  UNIFORM_OUT,
  THREADS,
  REGION_PARAMS
};

uint64_t alignTo16(uint64_t n) { return (n + SLOT_ALIGN - 1) / SLOT_ALIGN * SLOT_ALIGN; }

// Why a kernel's barriers cannot be split; empty while they can.
using Failure = std::string;

bool isBarrierCall(const Instruction &I, const SmallPtrSetImpl<Function *> &barriers) {
  auto *call = dyn_cast<CallBase>(&I);
  return call && call->getCalledFunction() && barriers.count(call->getCalledFunction());
}

// Functions that reach a barrier, directly or through calls.
SmallPtrSet<Function *, 16> functionsReachingBarriers(Module &M,
                                                      const SmallPtrSetImpl<Function *> &barriers) {
  SmallPtrSet<Function *, 16> reaching;
  bool changed = true;
  while (changed) {
    changed = false;
    for (Function &F : M) {
      if (F.isDeclaration() || reaching.count(&F))
        continue;
      for (Instruction &I : instructions(F)) {
        auto *call = dyn_cast<CallBase>(&I);
        Function *callee = call ? call->getCalledFunction() : nullptr;
        if (callee && (barriers.count(callee) || reaching.count(callee))) {
          reaching.insert(&F);
          changed = true;
          break;
        }
      }
    }
  }
  return reaching;
}

// Inlines every call of a function that reaches a barrier, so that all barriers are in `F`.
Failure inlineBarrierCalls(Function &F, const SmallPtrSetImpl<Function *> &reaching) {
  for (Function *callee : reaching)
    if (callee->hasAddressTaken())
      return "`" + callee->getName().str() + "` waits at a barrier and is called through a pointer";
  for (unsigned round = 0;; ++round) {
    CallBase *site = nullptr;
    for (Instruction &I : instructions(F)) {
      auto *call = dyn_cast<CallBase>(&I);
      if (call && call->getCalledFunction() && reaching.count(call->getCalledFunction())) {
        site = call;
        break;
      }
    }
    if (!site)
      return {};
    if (round > 256)
      return "a barrier is reached through recursive calls";
    std::string callee = site->getCalledFunction()->getName().str();
    InlineFunctionInfo info;
    InlineResult result = InlineFunction(*site, info);
    if (!result.isSuccess())
      return "`" + callee + "` waits at a barrier and cannot be inlined (" +
             std::string(result.getFailureReason()) + ")";
  }
}

// Which values may differ between the threads of a block (GPU "divergence"), and which blocks
// only some threads of a block may run.
struct Uniformity {
  // Functions that return the same in every thread of a block (block ids and sizes).
  SmallPtrSet<const Function *, 16> uniformFunctions;
  DenseSet<const Value *> divergent;
  // Blocks between a branch on a divergent condition and the point its paths meet again.
  SmallPtrSet<const BasicBlock *, 16> inDivergentRegion;
  SmallPtrSet<const BasicBlock *, 16> divergentJoins;

  bool isDivergent(const Value *V) const { return divergent.count(V); }
};

// The blocks reachable from `branch`'s successors before its immediate post-dominator `join`.
void markRegion(BasicBlock *branch, BasicBlock *join, Uniformity &u) {
  SmallVector<BasicBlock *, 16> work(successors(branch).begin(), successors(branch).end());
  SmallPtrSet<BasicBlock *, 16> seen;
  while (!work.empty()) {
    BasicBlock *B = work.pop_back_val();
    if (B == join || !seen.insert(B).second)
      continue;
    u.inDivergentRegion.insert(B);
    for (BasicBlock *S : successors(B))
      work.push_back(S);
  }
  if (join)
    u.divergentJoins.insert(join);
}

bool computeDivergent(const Instruction &I, const Uniformity &u) {
  if (const auto *phi = dyn_cast<PHINode>(&I)) {
    for (const Value *in : phi->incoming_values())
      if (u.isDivergent(in))
        return true;
    const BasicBlock *B = phi->getParent();
    // Threads that took different paths meet here with different values.
    if (!u.inDivergentRegion.count(B) && !u.divergentJoins.count(B))
      return false;
    const Value *first = nullptr;
    for (const Value *in : phi->incoming_values()) {
      if (isa<UndefValue>(in))
        continue;
      if (first && in != first)
        return true;
      first = in;
    }
    return false;
  }
  // Defined where only some threads of the block go, or in a loop they leave at different
  // iterations: conservatively different per thread.
  if (u.inDivergentRegion.count(I.getParent()))
    return true;
  if (isa<AtomicRMWInst>(I) || isa<AtomicCmpXchgInst>(I) || isa<AllocaInst>(I))
    return true;
  if (const auto *load = dyn_cast<LoadInst>(&I))
    if (isa<AllocaInst>(getUnderlyingObject(load->getPointerOperand())))
      return true; // private memory
  if (const auto *call = dyn_cast<CallBase>(&I)) {
    const Function *callee = call->getCalledFunction();
    if (!callee)
      return true;
    if (u.uniformFunctions.count(callee))
      return false;
    if (!(callee->isIntrinsic() || callee->isDeclaration()))
      return true;
  }
  for (const Value *operand : I.operands())
    if (u.isDivergent(operand))
      return true;
  return false;
}

Uniformity analyzeUniformity(Function &F, PostDominatorTree &PDT,
                              const SmallPtrSetImpl<Function *> &uniformFunctions) {
  Uniformity u;
  u.uniformFunctions.insert(uniformFunctions.begin(), uniformFunctions.end());
  for (unsigned i = 0; i < BODY_IDS; ++i)
    u.divergent.insert(F.getArg(i));
  bool changed = true;
  while (changed) {
    changed = false;
    for (BasicBlock &B : F) {
      Instruction *T = B.getTerminator();
      Value *condition = nullptr;
      if (auto *br = dyn_cast<BranchInst>(T); br && br->isConditional())
        condition = br->getCondition();
      else if (auto *sw = dyn_cast<SwitchInst>(T))
        condition = sw->getCondition();
      if (!condition || !u.isDivergent(condition))
        continue;
      DomTreeNode *node = PDT.getNode(&B);
      DomTreeNode *idom = node ? node->getIDom() : nullptr;
      markRegion(&B, idom ? idom->getBlock() : nullptr, u);
    }
    for (Instruction &I : instructions(F))
      if (!u.isDivergent(&I) && computeDivergent(I, u)) {
        u.divergent.insert(&I);
        changed = true;
      }
  }
  return u;
}

// The barrier blocks (of `barrierBlocks`) at whose start `V` is live.
SmallVector<unsigned, 4> liveAtBarriers(Instruction &V,
                                        const DenseMap<BasicBlock *, unsigned> &barrierBlocks) {
  BasicBlock *D = V.getParent();
  SmallVector<BasicBlock *, 16> work;
  for (Use &use : V.uses()) {
    auto *user = cast<Instruction>(use.getUser());
    BasicBlock *B = user->getParent();
    if (auto *phi = dyn_cast<PHINode>(user))
      B = phi->getIncomingBlock(use);
    if (B != D)
      work.push_back(B);
  }
  SmallPtrSet<BasicBlock *, 16> liveIn;
  while (!work.empty()) {
    BasicBlock *B = work.pop_back_val();
    if (!liveIn.insert(B).second)
      continue;
    for (BasicBlock *P : predecessors(B))
      if (P != D)
        work.push_back(P);
  }
  SmallVector<unsigned, 4> at;
  for (BasicBlock *B : liveIn) {
    auto found = barrierBlocks.find(B);
    if (found != barrierBlocks.end())
      at.push_back(found->second);
  }
  return at;
}

// Whether `V` can be computed again from the function's arguments and constants alone (no
// memory, no phis), in at most `budget` instructions: then it is recomputed where a region
// resumes instead of saved, which keeps thread ids the loops' induction variables.
bool recomputable(const Value *V, const SmallPtrSetImpl<Function *> &uniformFunctions,
                  unsigned &budget) {
  const auto *I = dyn_cast<Instruction>(V);
  if (!I)
    return isa<Argument>(V) || isa<Constant>(V);
  if (budget == 0 || isa<PHINode>(I) || isa<AllocaInst>(I) || I->isTerminator())
    return false;
  const auto *call = dyn_cast<CallBase>(I);
  bool reads = call && call->getCalledFunction() &&
               uniformFunctions.count(call->getCalledFunction()) && call->arg_empty();
  if (!reads && (I->mayReadOrWriteMemory() || I->mayHaveSideEffects()))
    return false;
  --budget;
  for (const Value *operand : I->operands())
    if (!recomputable(operand, uniformFunctions, budget))
      return false;
  return true;
}

// A copy of `V`'s computation before `before` (`recomputable(V)` holds).
Value *recompute(Value *V, Instruction *before, DenseMap<Value *, Value *> &copies) {
  auto *I = dyn_cast<Instruction>(V);
  if (!I)
    return V;
  if (auto found = copies.find(I); found != copies.end())
    return found->second;
  Instruction *copy = I->clone();
  for (unsigned i = 0; i < I->getNumOperands(); ++i)
    copy->setOperand(i, recompute(I->getOperand(i), before, copies));
  copy->insertBefore(before->getIterator());
  copy->setName(I->getName() + ".again");
  copies[I] = copy;
  return copy;
}

struct Fissioned {
  Function *region;
  uint64_t uniformBytes;
  uint64_t threadBytes;
  unsigned barriers;
  // When a subgroup barrier sits in control flow that depends on the thread (a shuffle inside
  // `if (warp == 0)`): a constant i8 array, by state, 1 where the state resumes after a
  // subgroup barrier. The caller then schedules subgroups by their own state (see fission.rs);
  // null otherwise.
  GlobalVariable *subgroupStates;
};

Failure fission(Function &body, const SmallPtrSetImpl<Function *> &barrierFunctions,
                const Function *subgroupBarrier,
                const SmallPtrSetImpl<Function *> &uniformFunctions,
                ArrayRef<Function *> threadIdFunctions, StringRef name, uint32_t done,
                Fissioned &out) {
  Module &M = *body.getParent();
  LLVMContext &C = M.getContext();
  const DataLayout &DL = M.getDataLayout();

  SmallPtrSet<Function *, 16> reaching = functionsReachingBarriers(M, barrierFunctions);
  if (!reaching.count(&body)) {
    out = {nullptr, 0, 0, 0, nullptr};
    return {};
  }
  ValueToValueMapTy cloned;
  Function *work = CloneFunction(&body, cloned);
  struct Cleanup {
    Function *f;
    ~Cleanup() {
      if (f)
        f->eraseFromParent();
    }
  } cleanup{work};
  if (Failure why = inlineBarrierCalls(*work, reaching); !why.empty())
    return why;
  // The functions just inlined may read thread ids (a block reduction's helper computes the
  // linear id): they become the body's id parameters, as the body's own reads did
  // (entry/body.rs). A value made from them is then recomputed where a region resumes instead
  // of saved per thread, and a test of it is a test of the thread loops' induction variables.
  for (unsigned slot = 0; slot < threadIdFunctions.size(); ++slot) {
    Function *reader = threadIdFunctions[slot];
    if (!reader)
      continue;
    SmallVector<CallInst *, 8> reads;
    for (User *user : reader->users())
      if (auto *call = dyn_cast<CallInst>(user);
          call && call->getCalledFunction() == reader && call->getFunction() == work)
        reads.push_back(call);
    for (CallInst *call : reads) {
      call->replaceAllUsesWith(work->getArg(slot));
      call->eraseFromParent();
    }
  }

  {
    DominatorTree DT(*work);
    SmallVector<AllocaInst *, 8> promotable;
    for (Instruction &I : work->getEntryBlock())
      if (auto *alloca = dyn_cast<AllocaInst>(&I); alloca && isAllocaPromotable(alloca))
        promotable.push_back(alloca);
    if (!promotable.empty())
      PromoteMemToReg(promotable, DT);
  }
  SmallVector<AllocaInst *, 8> privateAllocas;
  for (Instruction &I : instructions(*work))
    if (auto *alloca = dyn_cast<AllocaInst>(&I)) {
      if (!alloca->isStaticAlloca() || alloca->getParent() != &work->getEntryBlock())
        return "a private allocation of run-time size";
      privateAllocas.push_back(alloca);
    }

  // Each barrier alone in its block: [before] -> [barrier] -> [after].
  SmallVector<CallBase *, 8> barrierCalls;
  for (Instruction &I : instructions(*work))
    if (isBarrierCall(I, barrierFunctions))
      barrierCalls.push_back(cast<CallBase>(&I));
  if (barrierCalls.empty())
    return "no barrier left after inlining";
  DenseMap<BasicBlock *, unsigned> barrierBlocks; // barrier block -> state (1-based)
  SmallVector<BasicBlock *, 8> barrierBlock, resumeAt;
  SmallVector<bool, 8> subgroupOnly; // by barrier: a subgroup barrier
  for (CallBase *call : barrierCalls) {
    if (isa<InvokeInst>(call))
      return "a barrier called with unwinding";
    subgroupOnly.push_back(call->getCalledFunction() == subgroupBarrier);
    BasicBlock *B = SplitBlock(call->getParent(), call->getIterator());
    BasicBlock *after = SplitBlock(B, std::next(call->getIterator()));
    barrierBlocks[B] = barrierBlock.size() + 1;
    barrierBlock.push_back(B);
    resumeAt.push_back(after);
  }

  PostDominatorTree PDT(*work);
  Uniformity uniformity = analyzeUniformity(*work, PDT, uniformFunctions);
  // A block barrier in control flow that depends on the thread cannot be split: threads of a
  // block may reach it a different number of times. A subgroup barrier there can, when every
  // thread of a subgroup reaches it together (a shuffle inside `if (warp == 0)`): the caller
  // then runs each subgroup from its own state, and checks that at run time.
  bool bySubgroup = false;
  for (unsigned i = 0; i < barrierBlock.size(); ++i)
    if (uniformity.inDivergentRegion.count(barrierBlock[i])) {
      if (!subgroupOnly[i])
        return "a barrier in control flow that depends on the thread (threads of a block may "
               "reach it a different number of times)";
      bySubgroup = true;
    }

  // What crosses a barrier, and where each is saved.
  struct Saved {
    Instruction *value;
    SmallVector<unsigned, 4> at;
    // Recomputed where a region resumes, not saved.
    bool recompute;
    bool uniform;
    uint64_t offset;
  };
  std::vector<Saved> saved;
  uint64_t uniformBytes = 0, threadBytes = 0;
  for (Instruction &I : instructions(*work)) {
    if (isa<AllocaInst>(I) || I.getType()->isVoidTy() || I.use_empty())
      continue;
    SmallVector<unsigned, 4> at = liveAtBarriers(I, barrierBlocks);
    if (at.empty())
      continue;
    if (!I.getType()->isSized())
      return "a value without a size lives across a barrier";
    unsigned budget = 32;
    if (recomputable(&I, uniformFunctions, budget)) {
      saved.push_back({&I, at, true, false, 0});
      continue;
    }
    // Subgroups run by their own state may be at the same barrier in different iterations of a
    // loop the analysis calls uniform: each keeps its own copy of everything.
    bool uniform = !bySubgroup && !uniformity.isDivergent(&I);
    uint64_t &bytes = uniform ? uniformBytes : threadBytes;
    saved.push_back({&I, at, false, uniform, bytes});
    // Arrays (and slots) start 16-byte aligned; elements are packed.
    bytes += alignTo16(DL.getTypeAllocSize(I.getType()).getFixedValue());
  }
  struct PrivateCopy {
    AllocaInst *alloca;
    uint64_t offset, size;
  };
  std::vector<PrivateCopy> privateCopies;
  for (AllocaInst *alloca : privateAllocas) {
    uint64_t size = alignTo16(alloca->getAllocationSize(DL)->getFixedValue());
    privateCopies.push_back({alloca, threadBytes, size});
    threadBytes += size;
  }

  // The region function: the kernel body moved in, with the new parameters in front.
  SmallVector<Type *, 16> params;
  Type *i32 = Type::getInt32Ty(C), *i64 = Type::getInt64Ty(C), *ptr = PointerType::get(C, 0);
  params.append({i32, i32, i32, i32, i32, i64, ptr, ptr, ptr});
  for (unsigned i = BODY_IDS; i < work->arg_size(); ++i)
    params.push_back(work->getArg(i)->getType());
  Function *region = Function::Create(FunctionType::get(i32, params, false),
                                      GlobalValue::InternalLinkage, name, M);
  region->addFnAttrs(AttrBuilder(C, work->getAttributes().getFnAttrs()));
  region->splice(region->end(), work);
  for (unsigned i = 0; i < BODY_IDS; ++i)
    work->getArg(i)->replaceAllUsesWith(region->getArg(X + i));
  for (unsigned i = BODY_IDS; i < work->arg_size(); ++i)
    work->getArg(i)->replaceAllUsesWith(region->getArg(REGION_PARAMS + i - BODY_IDS));
  BasicBlock *start = &region->getEntryBlock();

  // The dispatch block: where each thread's saved state is, then a jump to where `state` says.
  BasicBlock *dispatch = BasicBlock::Create(C, "dispatch", region, start);
  IRBuilder<> b(dispatch);
  Value *ltid = b.CreateZExt(region->getArg(LTID), i64, "ltid");
  Value *nthreads = region->getArg(NTHREADS);
  auto threadSlot = [&](uint64_t offset, uint64_t size) {
    Value *array = b.CreateGEP(b.getInt8Ty(), region->getArg(THREADS),
                               b.CreateMul(nthreads, b.getInt64(offset)), "array");
    return b.CreateGEP(b.getInt8Ty(), array, b.CreateMul(ltid, b.getInt64(size)), "slot");
  };
  for (const PrivateCopy &copy : privateCopies) {
    Value *slot = threadSlot(copy.offset, copy.size);
    // An alloca in another address space (a workgroup `memref.alloca`) keeps its pointer type.
    slot = b.CreatePointerBitCastOrAddrSpaceCast(slot, copy.alloca->getType(), "private");
    copy.alloca->replaceAllUsesWith(slot);
    copy.alloca->eraseFromParent();
  }
  struct Location {
    Value *read, *write;
  };
  std::vector<Location> locations;
  for (const Saved &s : saved) {
    if (s.recompute)
      locations.push_back({nullptr, nullptr});
    else if (s.uniform)
      locations.push_back(
          {b.CreateGEP(b.getInt8Ty(), region->getArg(UNIFORM_IN), b.getInt64(s.offset), "in"),
           b.CreateGEP(b.getInt8Ty(), region->getArg(UNIFORM_OUT), b.getInt64(s.offset), "out")});
    else {
      Value *slot = threadSlot(s.offset, DL.getTypeAllocSize(s.value->getType()).getFixedValue());
      locations.push_back({slot, slot});
    }
  }
  BasicBlock *invalid = BasicBlock::Create(C, "invalid_state", region);
  ReturnInst::Create(C, ConstantInt::get(i32, done), invalid);
  SwitchInst *jump = b.CreateSwitch(region->getArg(STATE), invalid, barrierBlock.size() + 1);
  jump->addCase(b.getInt32(0), start);
  SmallVector<BasicBlock *, 8> resume;
  for (unsigned i = 0; i < barrierBlock.size(); ++i) {
    BasicBlock *R = BasicBlock::Create(C, "resume", region, resumeAt[i]);
    BranchInst::Create(resumeAt[i], R);
    jump->addCase(b.getInt32(i + 1), R);
    resume.push_back(R);
    // The barrier: this thread is done with the region.
    BasicBlock *B = barrierBlock[i];
    B->getTerminator()->eraseFromParent();
    barrierCalls[i]->eraseFromParent();
    ReturnInst::Create(C, ConstantInt::get(i32, i + 1), B);
  }
  for (BasicBlock &B : *region)
    if (auto *ret = dyn_cast<ReturnInst>(B.getTerminator()); ret && !ret->getReturnValue()) {
      ReturnInst::Create(C, ConstantInt::get(i32, done), ret->getIterator());
      ret->eraseFromParent();
    }

  // Saved where defined and reloaded where a region resumes (or recomputed there); SSA rebuilt
  // between the two. Every recomputation is made first, from the computations as they were:
  // rebuilding SSA for one value may put a phi where a later one's computation read it.
  std::vector<DenseMap<Value *, Value *>> recomputed(resume.size());
  std::vector<SmallVector<Value *, 4>> again(saved.size());
  for (size_t k = 0; k < saved.size(); ++k)
    if (saved[k].recompute)
      for (unsigned state : saved[k].at)
        again[k].push_back(recompute(saved[k].value, resume[state - 1]->getTerminator(),
                                     recomputed[state - 1]));
  for (size_t k = 0; k < saved.size(); ++k) {
    Instruction *V = saved[k].value;
    BasicBlock *D = V->getParent();
    SmallVector<Use *, 8> uses;
    for (Use &use : V->uses()) {
      auto *user = cast<Instruction>(use.getUser());
      BasicBlock *B = user->getParent();
      if (auto *phi = dyn_cast<PHINode>(user))
        B = phi->getIncomingBlock(use);
      if (B != D)
        uses.push_back(&use);
    }
    BasicBlock::iterator after =
        isa<PHINode>(V) ? D->getFirstInsertionPt() : std::next(V->getIterator());
    if (!saved[k].recompute)
      new StoreInst(V, locations[k].write, after);
    SSAUpdater updater;
    updater.Initialize(V->getType(), V->getName());
    updater.AddAvailableValue(D, V);
    for (unsigned j = 0; j < saved[k].at.size(); ++j) {
      BasicBlock *R = resume[saved[k].at[j] - 1];
      if (saved[k].recompute) {
        updater.AddAvailableValue(R, again[k][j]);
        continue;
      }
      auto *reload = new LoadInst(V->getType(), locations[k].read, V->getName() + ".reload",
                                  R->getTerminator()->getIterator());
      updater.AddAvailableValue(R, reload);
    }
    for (Use *use : uses)
      updater.RewriteUse(*use);
  }

  std::string problems;
  raw_string_ostream stream(problems);
  if (verifyFunction(*region, &stream)) {
    region->eraseFromParent();
    return "internal error, the split kernel is invalid: " + problems;
  }
  GlobalVariable *subgroupStates = nullptr;
  if (bySubgroup) {
    SmallVector<uint8_t, 16> byState{0};
    for (bool subgroup : subgroupOnly)
      byState.push_back(subgroup ? 1 : 0);
    Constant *table = ConstantDataArray::get(C, byState);
    subgroupStates = new GlobalVariable(M, table->getType(), true, GlobalValue::InternalLinkage,
                                        table, name + ".subgroup_states");
  }
  out = {region, uniformBytes, threadBytes, static_cast<unsigned>(barrierBlock.size()),
         subgroupStates};
  return {};
}

} // namespace

extern "C" {

// (passes.h)
LLVMValueRef gpu_build_fission(LLVMValueRef body, LLVMValueRef *barriers, unsigned barrierCount,
                               LLVMValueRef subgroupBarrier, LLVMValueRef *uniform,
                               unsigned uniformCount, LLVMValueRef *threadIds,
                               const char *name, uint32_t done,
                               uint64_t *uniformBytes, uint64_t *threadBytes,
                               unsigned *barrierTotal, LLVMValueRef *subgroupStates,
                               char **reason) {
  SmallPtrSet<Function *, 4> barrierFunctions, uniformFunctions;
  for (unsigned i = 0; i < barrierCount; ++i)
    barrierFunctions.insert(unwrap<Function>(barriers[i]));
  for (unsigned i = 0; i < uniformCount; ++i)
    uniformFunctions.insert(unwrap<Function>(uniform[i]));
  Fissioned result;
  const Function *subgroup = subgroupBarrier ? unwrap<Function>(subgroupBarrier) : nullptr;
  Function *threadIdFunctions[3];
  for (unsigned slot = 0; slot < 3; ++slot)
    threadIdFunctions[slot] = threadIds[slot] ? unwrap<Function>(threadIds[slot]) : nullptr;
  Failure why = fission(*unwrap<Function>(body), barrierFunctions, subgroup, uniformFunctions,
                        threadIdFunctions, name, done, result);
  if (!why.empty()) {
    *reason = strdup(why.c_str());
    return nullptr;
  }
  *uniformBytes = result.uniformBytes;
  *threadBytes = result.threadBytes;
  *barrierTotal = result.barriers;
  *subgroupStates = wrap(result.subgroupStates);
  return wrap(result.region);
}

} // extern "C"
