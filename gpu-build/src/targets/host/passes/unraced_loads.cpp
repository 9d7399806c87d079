// What the checked objects' instrumentation (check_accesses.cpp) asks of a kernel before it
// instruments it: what a pointer was computed from, which workgroup variable it reaches, and
// which workgroup loads no write of their variable can race with.

#include "unraced_loads.h"
#include "check_markers.h"

#include "llvm/ADT/BitVector.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/Analysis/ValueTracking.h"
#include "llvm/IR/CFG.h"
#include "llvm/IR/GlobalVariable.h"
#include "llvm/IR/InstIterator.h"
#include "llvm/IR/Instructions.h"
#include "llvm/IR/IntrinsicInst.h"

#include <vector>

using namespace llvm;
using gpu_check::WORKGROUP_ADDRESS_SPACE;

// (unraced_loads.h)
const Value *gpu_check::underlyingObject(const Value *pointer) {
  const Value *object = getUnderlyingObject(pointer, 0);
  while (auto *extract = dyn_cast<ExtractValueInst>(object)) {
    Value *inserted = FindInsertedValue(const_cast<Value *>(extract->getAggregateOperand()),
                                        extract->getIndices());
    if (!inserted || inserted == extract) break;
    object = getUnderlyingObject(inserted, 0);
  }
  return object;
}

// (unraced_loads.h)
bool gpu_check::isBlockBarrier(StringRef name) {
  return name == "llvm.nvvm.barrier0" || name == "llvm.nvvm.barrier.cta.sync.aligned.all" ||
         name == "llvm.nvvm.barrier.cta.sync.all";
}

// (unraced_loads.h)
GlobalVariable *gpu_check::workgroupVariable(Value *pointer) {
  auto *variable = dyn_cast<GlobalVariable>(const_cast<Value *>(underlyingObject(pointer)));
  if (!variable || variable->getAddressSpace() != WORKGROUP_ADDRESS_SPACE) return nullptr;
  return variable;
}

// (unraced_loads.h)
DenseSet<Instruction *> gpu_check::unracedLoads(Function &F) {
  DenseSet<Instruction *> none;
  std::vector<Instruction *> barrierList;
  std::vector<Instruction *> loads, writes;
  for (Instruction &I : instructions(F)) {
    if (auto *cast = dyn_cast<AddrSpaceCastInst>(&I))
      if (cast->getSrcAddressSpace() == WORKGROUP_ADDRESS_SPACE) return none;
    if (auto *call = dyn_cast<CallBase>(&I)) {
      Function *callee = call->getCalledFunction();
      if (!callee) return none;
      if (gpu_check::isBlockBarrier(callee->getName())) {
        barrierList.push_back(&I);
        continue;
      }
      // The index markers, which become checks and touch nothing.
      if (callee->getName() == gpu_check::INDEX) continue;
      if (!isa<MemIntrinsic>(call) && !call->isLifetimeStartOrEnd() && !call->onlyReadsMemory())
        return none;
    }
    auto workgroupWrite = [&](Value *pointer) {
      if (pointer->getType()->getPointerAddressSpace() != WORKGROUP_ADDRESS_SPACE) return true;
      if (!gpu_check::workgroupVariable(pointer)) return false;
      writes.push_back(&I);
      return true;
    };
    bool known = true;
    if (auto *load = dyn_cast<LoadInst>(&I)) {
      if (load->getPointerAddressSpace() == WORKGROUP_ADDRESS_SPACE &&
          gpu_check::workgroupVariable(load->getPointerOperand()))
        loads.push_back(&I);
    } else if (auto *store = dyn_cast<StoreInst>(&I)) {
      known = workgroupWrite(store->getPointerOperand());
    } else if (auto *rmw = dyn_cast<AtomicRMWInst>(&I)) {
      known = workgroupWrite(rmw->getPointerOperand());
    } else if (auto *cmpxchg = dyn_cast<AtomicCmpXchgInst>(&I)) {
      known = workgroupWrite(cmpxchg->getPointerOperand());
    } else if (auto *intrinsic = dyn_cast<MemIntrinsic>(&I)) {
      known = workgroupWrite(intrinsic->getDest());
    }
    if (!known) return none;
  }
  if (loads.empty()) return none;
  // Interval starts: 0 is the kernel's start, 1 + i the barrier barrierList[i]. For each
  // instruction of interest, the starts it follows with no barrier between (a forward data
  // flow over the blocks, to its fixed point).
  DenseMap<Instruction *, unsigned> barrierIndex;
  for (unsigned i = 0; i < barrierList.size(); ++i) barrierIndex[barrierList[i]] = i + 1;
  unsigned starts = barrierList.size() + 1;
  DenseMap<BasicBlock *, BitVector> out;
  DenseMap<Instruction *, BitVector> follows;
  for (BasicBlock &block : F) out[&block] = BitVector(starts);
  for (bool changed = true; changed;) {
    changed = false;
    for (BasicBlock &block : F) {
      BitVector current(starts);
      if (&block == &F.getEntryBlock()) current.set(0);
      for (BasicBlock *predecessor : predecessors(&block)) current |= out[predecessor];
      for (Instruction &I : block) {
        auto found = barrierIndex.find(&I);
        if (found != barrierIndex.end()) {
          current.reset();
          current.set(found->second);
        }
        follows[&I] = current;
      }
      if (current != out[&block]) {
        out[&block] = current;
        changed = true;
      }
    }
  }
  DenseMap<GlobalVariable *, BitVector> written;
  for (Instruction *write : writes) {
    Value *pointer = getLoadStorePointerOperand(write);
    if (!pointer) {
      if (auto *rmw = dyn_cast<AtomicRMWInst>(write)) pointer = rmw->getPointerOperand();
      else if (auto *cmpxchg = dyn_cast<AtomicCmpXchgInst>(write)) pointer = cmpxchg->getPointerOperand();
      else pointer = cast<MemIntrinsic>(write)->getDest();
    }
    GlobalVariable *variable = gpu_check::workgroupVariable(pointer);
    auto inserted = written.try_emplace(variable, BitVector(starts));
    inserted.first->second |= follows[write];
  }
  DenseSet<Instruction *> unraced;
  for (Instruction *load : loads) {
    GlobalVariable *variable = gpu_check::workgroupVariable(cast<LoadInst>(load)->getPointerOperand());
    auto found = written.find(variable);
    if (found == written.end() || !found->second.anyCommon(follows[load])) unraced.insert(load);
  }
  return unraced;
}
