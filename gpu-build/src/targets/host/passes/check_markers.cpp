// The checked host objects' markers (check_markers.h): a hook call's mark and its effects, and
// every call of a marker lowered to the code it stands for, by the checked loops' versioning
// (version_checked_loops.cpp) and at the end of the optimization pipeline (pipeline.cpp).

#include "check_markers.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/IR/Function.h"
#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/InstIterator.h"
#include "llvm/IR/Instructions.h"
#include "llvm/IR/Metadata.h"

using namespace llvm;

void gpu_check::markHookCall(CallInst *call) {
  call->setMetadata(HOOK_CALL, MDNode::get(call->getContext(), {}));
}

MemoryEffects gpu_check::runtimeEffects(ModRefInfo arguments, ModRefInfo own) {
  return MemoryEffects::argMemOnly(arguments) | MemoryEffects::inaccessibleMemOnly(own);
}

bool gpu_check::lowerCheckMarkers(Function &F) {
  SmallVector<CallInst *, 16> calls;
  for (Instruction &I : instructions(F))
    if (auto *call = dyn_cast<CallInst>(&I))
      if (Function *callee = call->getCalledFunction())
        if (callee->getName() == WITHIN || callee->getName() == INDEX_WITHIN ||
            callee->getName() == ALIGNED ||
            callee->getName() == CHOSEN || callee->getName() == UNREADY ||
            callee->getName() == GLOBAL ||
            callee->getName() == BARRIER || callee->getName() == WORKGROUP)
          calls.push_back(call);
  for (CallInst *call : calls) {
    IRBuilder<> b(call);
    Value *value = nullptr;
    StringRef name = call->getCalledFunction()->getName();
    if (name == BARRIER || name == WORKGROUP || name == GLOBAL) {
      // The hook, then (the barrier's row hook; the workgroup access's row hook, slot and
      // stamp; the global access's row hook and switch), then the hook's arguments.
      unsigned first = name == BARRIER      ? 2u
                       : name == WORKGROUP ? unsigned(WORKGROUP_CONTEXT)
                                           : unsigned(GLOBAL_CONTEXT);
      SmallVector<Value *, 14> arguments(drop_begin(call->args(), first));
      SmallVector<Type *, 8> types;
      for (Value *argument : arguments) types.push_back(argument->getType());
      CallInst *one = b.CreateCall(FunctionType::get(b.getVoidTy(), types, false),
                                   call->getArgOperand(0), arguments);
      one->setMemoryEffects(call->getMemoryEffects());
      markHookCall(one);
      one->setDoesNotThrow();
      one->addFnAttr(Attribute::WillReturn);
    } else if (name == WITHIN || name == INDEX_WITHIN) {
      Value *address = call->getArgOperand(0), *bytes = call->getArgOperand(1);
      Value *end = b.CreateAdd(address, bytes);
      value = b.CreateAnd(b.CreateICmpUGE(address, call->getArgOperand(2)),
                          b.CreateAnd(b.CreateICmpULE(end, call->getArgOperand(3)),
                                      b.CreateICmpUGE(end, address)));
    } else if (name == CHOSEN) {
      value = b.CreateICmpNE(b.CreateLoad(b.getInt32Ty(), call->getArgOperand(0)), b.getInt32(0));
    } else if (name == ALIGNED) {
      Value *alignment = call->getArgOperand(1);
      Value *low = b.CreateAnd(call->getArgOperand(0),
                               b.CreateSub(alignment, ConstantInt::get(alignment->getType(), 1)));
      value = b.CreateICmpEQ(low, ConstantInt::get(alignment->getType(), 0));
    } else {
      Value *stamp = call->getArgOperand(1);
      value = b.CreateICmpNE(b.CreateLoad(stamp->getType(), call->getArgOperand(0)), stamp);
    }
    if (value) call->replaceAllUsesWith(value);
    call->eraseFromParent();
  }
  return !calls.empty();
}

// Instruments every function defined in `module` (see the top of the file); `kernels` are the
// kernel functions, `memrefs` their memref arguments (`kernel` indexes `kernels`). `context` is
// the thread-local pointer to the launch's context; `source` names the kernel file where an op
