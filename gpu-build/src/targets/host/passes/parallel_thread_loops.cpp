// The host target's thread loops as LLVM's parallel loops, before the optimization pipeline
// (pipeline.cpp): what the host target's entries marked on them made metadata LLVM reads.

#include "loops.h"
#include "pipeline.h"

#include "llvm/ADT/SmallVector.h"
#include "llvm/IR/InstIterator.h"
#include "llvm/IR/Instructions.h"
#include "llvm/IR/Metadata.h"
#include "llvm/IR/Module.h"

using namespace llvm;

// The thread loops the host target marked (`loopMark` on the back edge, `bodyMark` on the call
// of the kernel's body in it) as LLVM's parallel loops: an access group per function on the
// calls (the inliner hands it on to every memory access of the inlined body) and
// `llvm.loop.parallel_accesses` naming it in the loops' ids. LLVM takes a loop as parallel only
// when every memory access in it has a group the loop names, so anything else the loop touches
// in memory keeps it an ordinary loop (one group for several loops of a function says no more).
// `threadsMark` on a back edge becomes a loop property of that name (every thread loop whose ids
// are not kept in memory, see thread_rows.cpp).
void gpu_host::markParallelThreadLoops(Module &M, const char *loopMark, const char *bodyMark,
                                       const char *threadsMark) {
  LLVMContext &C = M.getContext();
  unsigned loopKind = C.getMDKindID(loopMark), bodyKind = C.getMDKindID(bodyMark);
  unsigned threadsKind = C.getMDKindID(threadsMark);
  for (Function &F : M) {
    SmallVector<Instruction *, 4> backEdges, bodies, threadLoops;
    for (Instruction &I : instructions(F)) {
      if (I.getMetadata(loopKind))
        backEdges.push_back(&I);
      if (I.getMetadata(bodyKind))
        bodies.push_back(&I);
      if (I.getMetadata(threadsKind))
        threadLoops.push_back(&I);
    }
    for (Instruction *backEdge : threadLoops) {
      backEdge->setMetadata(threadsKind, nullptr);
      addLoopProperty(backEdge, MDNode::get(C, {MDString::get(C, threadsMark)}));
    }
    if (backEdges.empty())
      continue;
    MDNode *group = MDNode::getDistinct(C, {});
    for (Instruction *body : bodies) {
      body->setMetadata(bodyKind, nullptr);
      body->setMetadata(LLVMContext::MD_access_group, group);
    }
    Metadata *parallel[] = {MDString::get(C, "llvm.loop.parallel_accesses"), group};
    for (Instruction *backEdge : backEdges) {
      backEdge->setMetadata(loopKind, nullptr);
      addLoopProperty(backEdge, MDNode::get(C, parallel));
    }
  }
}
