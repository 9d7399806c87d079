// The host target's blocks entries compiled once per CPU level, before the optimization
// pipeline (pipeline.cpp).

#include "pipeline.h"

#include "llvm/ADT/SmallVector.h"
#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/Instructions.h"
#include "llvm/IR/Module.h"
#include "llvm/Transforms/Utils/Cloning.h"
#include "llvm/Transforms/Utils/ValueMapper.h"

#include <string>

using namespace llvm;

// One copy of every blocks entry per CPU in `cpus` (after the baseline), each compiled for its
// CPU, behind the entry's own name: a dispatcher that reads the runtime's CPU level (a u32 at
// `levelOffset` in the context, the entry's second argument; 0 the baseline, i the i-th CPU)
// and calls that copy. The bodies the entries call are always inlined, so each copy's thread
// loops are vectorized for its CPU. Copies are named `<kernel>.<cpu>.blocks` (still ending with
// the suffix, for ExitThreadLoopsAtGuards), the baseline's `<kernel>.<baseline>.blocks`.
void gpu_host::multiversionEntries(Module &M, const std::string &suffix, const char *const *cpus,
                                   unsigned count, const char *baseline, unsigned levelOffset) {
  SmallVector<Function *, 8> entries;
  for (Function &F : M)
    if (!F.isDeclaration() && F.getName().ends_with(suffix))
      entries.push_back(&F);
  for (Function *F : entries) {
    std::string name = F->getName().str();
    std::string stem = name.substr(0, name.size() - suffix.size());
    SmallVector<Function *, 4> copies{F};
    for (unsigned i = 0; i < count; ++i) {
      ValueToValueMapTy map;
      Function *copy = CloneFunction(F, map);
      copy->setName(stem + "." + cpus[i] + suffix);
      copy->setLinkage(GlobalValue::InternalLinkage);
      copy->addFnAttr("target-cpu", cpus[i]);
      // The last CPU is the AVX-512 one: its thread loops use all 512 bits (LLVM prefers 256
      // there, for the clock Skylake servers lose on wide vectors). A 16-thread row is then one
      // vector: the stencil went from 1.10-1.56x PoCL's time to 0.78-1.06x here, no kernel of
      // host_vs_peers got slower.
      if (i + 1 == count)
        copy->addFnAttr("prefer-vector-width", "512");
      copy->removeFnAttr("target-features");
      copies.push_back(copy);
    }
    Function *dispatch =
        Function::Create(F->getFunctionType(), F->getLinkage(), F->getAddressSpace(), "", &M);
    dispatch->copyAttributesFrom(F);
    F->setName(stem + "." + baseline + suffix);
    F->setLinkage(GlobalValue::InternalLinkage);
    dispatch->setName(name);

    LLVMContext &C = M.getContext();
    IRBuilder<> b(BasicBlock::Create(C, "entry", dispatch));
    Value *slot = b.CreateConstInBoundsGEP1_64(b.getInt8Ty(), dispatch->getArg(1), levelOffset);
    Value *cpu = b.CreateLoad(b.getInt32Ty(), slot, "cpu_level");
    SmallVector<Value *, 4> arguments;
    for (Argument &argument : dispatch->args())
      arguments.push_back(&argument);
    SmallVector<BasicBlock *, 4> calls;
    for (Function *copy : copies) {
      BasicBlock *call = BasicBlock::Create(C, copy->getName(), dispatch);
      IRBuilder<> c(call);
      CallInst *result = c.CreateCall(copy, arguments);
      result->setTailCall();
      c.CreateRet(result);
      calls.push_back(call);
    }
    SwitchInst *choice = b.CreateSwitch(cpu, calls[0], copies.size() - 1);
    for (unsigned i = 1; i < calls.size(); ++i)
      choice->addCase(b.getInt32(i), calls[i]);
  }
}
