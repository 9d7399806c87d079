// The checked host objects' instrumentation (see check.rs for the design): every load, store,
// atomic and memory intrinsic through global memory gets a bounds check against the memory its
// pointer may reach, and a report to the runtime, with the op's `file:line:col`, when it falls
// outside. Done here because it needs what LLVM's C API lacks: an access's underlying object,
// splitting blocks, debug locations.
//
// Runs on the NVVM-lowered module before the host retargeting: thread and block ids are still
// the NVVM intrinsics (the retargeting replaces them, in the thread loops by their induction
// variables, so every report keeps its thread), and workgroup memory is still address space 3
// (not checked here).

#include "check_markers.h"
#include "passes.h"
#include "unraced_loads.h"

#include "llvm-c/Core.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/Analysis/ValueTracking.h"
#include "llvm/IR/Constants.h"
#include "llvm/IR/DebugInfo.h"
#include "llvm/IR/DebugInfoMetadata.h"
#include "llvm/IR/GlobalVariable.h"
#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/InstIterator.h"
#include "llvm/IR/Instructions.h"
#include "llvm/IR/IntrinsicInst.h"
#include "llvm/IR/MDBuilder.h"
#include "llvm/IR/Module.h"
#include "llvm/Transforms/Utils/BasicBlockUtils.h"

#include <cstdint>
#include <string>
#include <vector>

using namespace llvm;

namespace {

using gpu_check::underlyingObject;
using gpu_check::unracedLoads;
using gpu_check::workgroupVariable;
using gpu_check::WORKGROUP_ADDRESS_SPACE;

using Kind = gpu_check::AccessKind;

struct Bounds {
  Value *low;
  Value *high;
  int parameter;  // the kernel parameter they come from, -1: none
  // A memref parameter's element size: an access declaring no more alignment than that needs
  // no alignment check (0: not a memref).
  uint64_t elementBytes = 0;
};

// Whether `load` is the first read of a compare-and-swap loop on its address (how
// `memref.generic_atomic_rmw` is lowered): its value is only the loop's first guess, which the
// compare-and-swap checks against memory, so it is part of the atomic access (another thread's
// atomic update between the two is what the loop is for, not a race).
bool startsCompareAndSwap(LoadInst *load) {
  auto guesses = [&](Value *value) {
    for (User *user : value->users())
      if (auto *swap = dyn_cast<AtomicCmpXchgInst>(user))
        if (swap->getCompareOperand() == value &&
            swap->getPointerOperand() == load->getPointerOperand())
          return true;
    return false;
  };
  if (guesses(load)) return true;
  for (User *user : load->users())
    if (auto *merged = dyn_cast<PHINode>(user))
      if (guesses(merged)) return true;
  return false;
}

class Instrumenter {
 public:
  Instrumenter(Module &module, GlobalVariable *context, const std::string &source,
               const GpuCheckLayout &layout)
      : M(module), C(module.getContext()), Context(context), Source(source), Layout(layout),
        I64(Type::getInt64Ty(C)), I32(Type::getInt32Ty(C)), Ptr(PointerType::get(C, 0)) {
    SiteType = StructType::get(C, {Ptr, I32, I32, I32, I32});
  }

  void instrument(Function &F, bool kernel, const std::vector<GpuCheckMemref> &memrefs) {
    std::vector<Instruction *> accesses;
    std::vector<CallInst *> barriers, indexMarkers;
    // The index markers (gpu_check::INDEX) the MLIR lowering wrote just before a memref
    // access: the access is the next one in their block.
    Indices.clear();
    for (BasicBlock &B : F) {
      SmallVector<CallInst *, 4> pending;
      for (Instruction &I : B) {
        if (isa<LoadInst, StoreInst, AtomicRMWInst, AtomicCmpXchgInst, MemIntrinsic>(I)) {
          accesses.push_back(&I);
          if (!pending.empty()) Indices[&I] = std::move(pending);
          pending.clear();
        }
        if (auto *call = dyn_cast<CallInst>(&I))
          if (Function *callee = call->getCalledFunction()) {
            if (gpu_check::isBlockBarrier(callee->getName())) barriers.push_back(call);
            if (callee->getName() == gpu_check::INDEX) {
              pending.push_back(call);
              indexMarkers.push_back(call);
            }
          }
      }
    }
    // Each marker stands for its access's check (made below); none is left.
    auto eraseIndexMarkers = [&] {
      for (CallInst *marker : indexMarkers) marker->eraseFromParent();
    };
    if (accesses.empty() && barriers.empty()) return eraseIndexMarkers();
    Unraced = kernel ? unracedLoads(F) : DenseSet<Instruction *>();
    IRBuilder<> entry(&*F.getEntryBlock().getFirstInsertionPt());
    LoadInst *context = entry.CreateLoad(Ptr, Context, "check.context");
    // The launch's context, whole, for as long as the kernel runs: loads of its function
    // pointers may leave the thread loops.
    context->setMetadata(LLVMContext::MD_nonnull, MDNode::get(C, {}));
    context->setMetadata(
        LLVMContext::MD_dereferenceable,
        MDNode::get(C, {ConstantAsMetadata::get(ConstantInt::get(I64, Layout.context_bytes))}));
    // The switch of the global-memory hook: the same for the whole launch (gpu_check::CHOSEN
    // lets the loops run without its calls while it is off).
    GlobalOn = entry.CreateConstGEP1_64(entry.getInt8Ty(), context, Layout.global_on_offset,
                                        "check.global.on");
    DenseMap<unsigned, Bounds> parameters;
    if (kernel) {
      for (const GpuCheckMemref &memref : memrefs)
        parameters[memref.aligned] = memrefBounds(entry, F, memref);
      for (Argument &argument : F.args()) {
        if (!argument.getType()->isPointerTy() || parameters.count(argument.getArgNo())) continue;
        parameters[argument.getArgNo()] = argumentBounds(entry, context, argument.getArgNo());
      }
    }
    for (CallInst *barrier : barriers) {
      IRBuilder<> b(barrier);
      SmallVector<Value *, 10> arguments = {hook(b, context, Layout.barrier_offset),
                                            hook(b, context, Layout.barriers_offset), context,
                                            site(barrier, gpu_check::ACCESS_LOAD, -1)};
      appendIds(b, arguments);
      SmallVector<Type *, 10> types;
      for (Value *argument : arguments) types.push_back(argument->getType());
      FunctionCallee callee = M.getOrInsertFunction(
          gpu_check::BARRIER, FunctionType::get(Type::getVoidTy(C), types, false));
      auto *function = cast<Function>(callee.getCallee());
      // The barrier hooks read the context (the block's size), and write only their own.
      function->setMemoryEffects(gpu_check::runtimeEffects(ModRefInfo::Ref, ModRefInfo::ModRef));
      function->addFnAttr(Attribute::NoUnwind);
      function->addFnAttr(Attribute::WillReturn);
      b.CreateCall(callee, arguments);
    }
    for (Instruction *I : accesses) {
      if (auto *load = dyn_cast<LoadInst>(I)) {
        Kind kind = startsCompareAndSwap(load) ? gpu_check::ACCESS_ATOMIC : gpu_check::ACCESS_LOAD;
        checkOne(I, load->getPointerOperandIndex(), size(load->getType()), kind, context, parameters);
      } else if (auto *store = dyn_cast<StoreInst>(I)) {
        checkOne(I, store->getPointerOperandIndex(), size(store->getValueOperand()->getType()),
                 gpu_check::ACCESS_STORE, context, parameters);
      } else if (auto *rmw = dyn_cast<AtomicRMWInst>(I)) {
        checkOne(I, rmw->getPointerOperandIndex(), size(rmw->getValOperand()->getType()), gpu_check::ACCESS_ATOMIC,
                 context, parameters);
      } else if (auto *cmpxchg = dyn_cast<AtomicCmpXchgInst>(I)) {
        checkOne(I, cmpxchg->getPointerOperandIndex(),
                 size(cmpxchg->getNewValOperand()->getType()), gpu_check::ACCESS_ATOMIC, context, parameters);
      } else if (auto *intrinsic = dyn_cast<MemIntrinsic>(I)) {
        checkOne(I, 0, nullptr, gpu_check::ACCESS_COPY_WRITE, context, parameters);
        if (isa<MemTransferInst>(intrinsic)) checkOne(I, 1, nullptr, gpu_check::ACCESS_COPY_READ, context, parameters);
      }
    }
    eraseIndexMarkers();
  }

 private:
  Module &M;
  LLVMContext &C;
  GlobalVariable *Context;
  std::string Source;
  GpuCheckLayout Layout;
  Type *I64, *I32;
  PointerType *Ptr;
  StructType *SiteType;
  GlobalVariable *Scratch = nullptr;
  uint64_t ScratchBytes = 64;
  // The function's workgroup loads no write of their variable can race with (`unracedLoads`).
  DenseSet<Instruction *> Unraced;
  uint64_t NextSlot = 0;
  // The switch of the global-memory hook in the launch's context (`instrument`).
  Value *GlobalOn = nullptr;
  // The function's index markers, by the access they precede.
  DenseMap<Instruction *, SmallVector<CallInst *, 4>> Indices;

  Constant *size(Type *type) {
    uint64_t bytes = M.getDataLayout().getTypeStoreSize(type).getFixedValue();
    if (bytes > ScratchBytes) ScratchBytes = bytes;
    return ConstantInt::get(I64, bytes);
  }

  // A memref's extent: from its lowest to past its highest element the sizes and strides reach
  // (strides may be negative); empty when a size is 0.
  Bounds memrefBounds(IRBuilder<> &b, Function &F, const GpuCheckMemref &memref) {
    Value *aligned = b.CreatePtrToInt(F.getArg(memref.aligned), I64);
    Value *offset = F.getArg(memref.aligned + 1);
    Value *low = offset, *high = offset;
    Value *empty = b.getFalse();
    for (uint32_t d = 0; d < memref.rank; ++d) {
      Value *dimSize = F.getArg(memref.aligned + 2 + d);
      Value *stride = F.getArg(memref.aligned + 2 + memref.rank + d);
      empty = b.CreateOr(empty, b.CreateICmpSLE(dimSize, ConstantInt::get(I64, 0)));
      Value *span = b.CreateMul(b.CreateSub(dimSize, ConstantInt::get(I64, 1)), stride);
      Value *negative = b.CreateICmpSLT(stride, ConstantInt::get(I64, 0));
      low = b.CreateAdd(low, b.CreateSelect(negative, span, ConstantInt::get(I64, 0)));
      high = b.CreateAdd(high, b.CreateSelect(negative, ConstantInt::get(I64, 0), span));
    }
    Constant *element = ConstantInt::get(I64, memref.element_bytes);
    Value *lowAddress = b.CreateAdd(aligned, b.CreateMul(low, element), "check.low");
    Value *highAddress = b.CreateAdd(
        aligned, b.CreateMul(b.CreateAdd(high, ConstantInt::get(I64, 1)), element));
    highAddress = b.CreateSelect(empty, lowAddress, highAddress, "check.high");
    return {lowAddress, highAddress, static_cast<int>(memref.aligned), memref.element_bytes};
  }

  // A pointer parameter: the live allocation the runtime found it in at launch.
  Bounds argumentBounds(IRBuilder<> &b, Value *context, unsigned index) {
    Value *table = b.CreateLoad(Ptr, b.CreateConstGEP1_64(b.getInt8Ty(), context, Layout.bounds_offset));
    cast<LoadInst>(table)->setMetadata(LLVMContext::MD_invariant_load, MDNode::get(C, {}));
    auto bound = [&](unsigned which) {
      LoadInst *load = b.CreateLoad(I64, b.CreateConstGEP1_64(I64, table, 2 * index + which));
      load->setMetadata(LLVMContext::MD_invariant_load, MDNode::get(C, {}));
      return load;
    };
    return {bound(0), bound(1), static_cast<int>(index)};
  }

  std::string location(Instruction *I) {
    const DebugLoc &loc = I->getDebugLoc();
    std::string file = Source;
    if (!loc) return file + ": in `" + I->getFunction()->getName().str() + "`";
    if (auto *scope = dyn_cast<DIScope>(loc.getScope())) {
      StringRef name = scope->getFilename(), directory = scope->getDirectory();
      // A file parsed from a string is `-`: the kernel file itself.
      if (!name.empty() && name != "-")
        file = directory.empty() || name.starts_with("/") ? name.str()
                                                          : (directory + "/" + name).str();
    }
    return file + ":" + std::to_string(loc.getLine()) + ":" + std::to_string(loc.getCol());
  }

  Constant *site(Instruction *I, Kind kind, int parameter,
                 gpu_check::SiteCheck check = gpu_check::CHECK_BOUNDS, uint64_t detail = 0) {
    Constant *text = ConstantDataArray::getString(C, location(I));
    auto *where = new GlobalVariable(M, text->getType(), true, GlobalValue::PrivateLinkage, text,
                                     "check.location");
    where->setUnnamedAddr(GlobalValue::UnnamedAddr::Global);
    Constant *fields = ConstantStruct::get(
        SiteType, {where, ConstantInt::get(I32, kind), ConstantInt::get(I32, parameter, true),
                   ConstantInt::get(I32, check), ConstantInt::get(I32, detail)});
    auto *site = new GlobalVariable(M, SiteType, true, GlobalValue::PrivateLinkage, fields,
                                    "check.site");
    return site;
  }

  Value *readId(IRBuilder<> &b, const char *name) {
    FunctionCallee id = M.getOrInsertFunction(name, FunctionType::get(I32, false));
    return b.CreateCall(id);
  }

  // The thread's and the block's ids, x y z each.
  void appendIds(IRBuilder<> &b, SmallVectorImpl<Value *> &arguments) {
    for (const char *id : {"llvm.nvvm.read.ptx.sreg.tid.x", "llvm.nvvm.read.ptx.sreg.tid.y",
                           "llvm.nvvm.read.ptx.sreg.tid.z", "llvm.nvvm.read.ptx.sreg.ctaid.x",
                           "llvm.nvvm.read.ptx.sreg.ctaid.y", "llvm.nvvm.read.ptx.sreg.ctaid.z"})
      arguments.push_back(readId(b, id));
  }

  // What the runtime writes to a ready slot for this block: its linear id plus one.
  Value *blockStamp(IRBuilder<> &b) {
    Value *x = readId(b, "llvm.nvvm.read.ptx.sreg.ctaid.x");
    Value *y = readId(b, "llvm.nvvm.read.ptx.sreg.ctaid.y");
    Value *z = readId(b, "llvm.nvvm.read.ptx.sreg.ctaid.z");
    Value *gridX = readId(b, "llvm.nvvm.read.ptx.sreg.nctaid.x");
    Value *gridY = readId(b, "llvm.nvvm.read.ptx.sreg.nctaid.y");
    Value *linear = b.CreateAdd(x, b.CreateMul(gridX, b.CreateAdd(y, b.CreateMul(gridY, z))));
    return b.CreateAdd(linear, ConstantInt::get(I32, 1));
  }

  // The marker function `name` (check_markers.h) taking `parameters`: an i1 that reads memory
  // only when `reads`, has no other effect and may be computed anywhere.
  FunctionCallee marker(const char *name, ArrayRef<Type *> parameters, bool reads) {
    FunctionCallee callee =
        M.getOrInsertFunction(name, FunctionType::get(Type::getInt1Ty(C), parameters, false));
    auto *function = cast<Function>(callee.getCallee());
    function->setMemoryEffects(reads ? MemoryEffects::readOnly() : MemoryEffects::none());
    function->addFnAttr(Attribute::NoUnwind);
    function->addFnAttr(Attribute::WillReturn);
    function->addFnAttr(Attribute::NoSync);
    if (!reads) function->addFnAttr(Attribute::Speculatable);
    return callee;
  }

  // The context's function pointer at `offset` (the same for the whole launch).
  Value *hook(IRBuilder<> &b, Value *context, uint32_t offset) {
    LoadInst *function = b.CreateLoad(Ptr, b.CreateConstGEP1_64(b.getInt8Ty(), context, offset));
    function->setMetadata(LLVMContext::MD_invariant_load, MDNode::get(C, {}));
    return function;
  }

  // Calls the context's function at `offset` with `arguments` (returning nothing), which
  // touches the memory its arguments point into as `touches` says.
  void callThrough(IRBuilder<> &b, Value *context, uint32_t offset, ArrayRef<Value *> arguments,
                   ModRefInfo touches) {
    SmallVector<Type *, 16> types;
    for (Value *argument : arguments) types.push_back(argument->getType());
    CallInst *call = b.CreateCall(FunctionType::get(Type::getVoidTy(C), types, false),
                                  hook(b, context, offset), arguments);
    call->setMemoryEffects(gpu_check::runtimeEffects(touches, ModRefInfo::ModRef));
    gpu_check::markHookCall(call);
    call->setDoesNotThrow();
    call->addFnAttr(Attribute::WillReturn);
  }

  // A constant naming a workgroup variable for the runtime, `{ ptr name, i64 bytes, i64 slot }`:
  // the runtime keeps the variable's shadow (who wrote and read each byte, in which barrier
  // interval) under it, per OS thread as workgroup memory is, and marks the variable's ready
  // slot (`u64::MAX`: none) once a block has written all of it.
  DenseMap<GlobalVariable *, GlobalVariable *> Descriptions;
  DenseMap<GlobalVariable *, uint64_t> Slots;

  uint64_t workgroupBytes(GlobalVariable *variable) {
    Type *type = variable->getValueType();
    uint64_t bytes = variable->isDeclaration() ? 0 : M.getDataLayout().getTypeAllocSize(type);
    // `gpu.dynamic_shared_memory`: a zero-length array, or a declaration.
    return bytes == 0 ? Layout.dynamic_workgroup_bytes : bytes;
  }

  GlobalVariable *descriptionOf(GlobalVariable *variable) {
    auto found = Descriptions.find(variable);
    if (found != Descriptions.end()) return found->second;
    Constant *name = ConstantDataArray::getString(C, variable->getName());
    auto *nameVariable = new GlobalVariable(M, name->getType(), true, GlobalValue::PrivateLinkage,
                                            name, "check.variable.name");
    StructType *descriptionType = StructType::get(C, {Ptr, I64, I64});
    uint64_t slot = NextSlot < Layout.ready_slots ? NextSlot++ : UINT64_MAX;
    auto *description = new GlobalVariable(
        M, descriptionType, true, GlobalValue::PrivateLinkage,
        ConstantStruct::get(descriptionType,
                            {nameVariable, ConstantInt::get(I64, workgroupBytes(variable)),
                             ConstantInt::get(I64, slot)}),
        "check.variable");
    Slots[variable] = slot;
    Descriptions[variable] = description;
    return description;
  }

  // An access of workgroup memory: within its variable (else reported as out of bounds and not
  // made), and told to the runtime (`layout.workgroup_offset`, through a `gpu.check.workgroup`
  // marker), which keeps the variable's shadow to find races between the block's threads and
  // reads of bytes not written since the block began.
  void checkWorkgroup(Instruction *I, unsigned operandIndex, Value *bytes, Kind kind,
                      Value *context) {
    Value *pointer = I->getOperand(operandIndex);
    GlobalVariable *variable = workgroupVariable(pointer);
    if (!variable) return;
    GlobalVariable *description = descriptionOf(variable);
    IRBuilder<> b(I);
    auto *intrinsic = dyn_cast<MemIntrinsic>(I);
    if (intrinsic) bytes = b.CreateZExtOrTrunc(intrinsic->getLength(), I64);
    Value *base = b.CreatePtrToInt(variable, I64);
    Value *address = b.CreatePtrToInt(pointer, I64);
    Value *high = b.CreateAdd(base, ConstantInt::get(I64, workgroupBytes(variable)));
    Bounds bounds = {base, high, -1};
    Value *ok = guard(I, operandIndex, bytes, kind, context, &bounds, address);
    // Only accesses that were made are told to the shadow; a load no write can race with, not
    // once its variable is all written in the block (`unracedLoads`).
    uint64_t slot = Slots[variable];
    IRBuilder<> before(I);
    Value *ready = slot == UINT64_MAX ? ConstantPointerNull::get(Ptr)
                                      : before.CreateConstGEP1_64(before.getInt8Ty(), context,
                                                                  Layout.ready_offset + 4 * slot);
    if (Unraced.count(I) && slot != UINT64_MAX)
      ok = before.CreateAnd(ok, before.CreateCall(marker(gpu_check::UNREADY, {Ptr, I32}, true),
                                                  {ready, blockStamp(before)}, "check.unready"));
    Instruction *made = SplitBlockAndInsertIfThen(ok, I, false);
    IRBuilder<> record(made);
    Value *offset = record.CreateSub(address, base);
    SmallVector<Value *, 15> arguments = {hook(record, context, Layout.workgroup_offset),
                                          hook(record, context, Layout.writes_offset),
                                          ready,
                                          blockStamp(record),
                                          context,
                                          site(I, kind, -1),
                                          description,
                                          offset,
                                          bytes};
    appendIds(record, arguments);
    SmallVector<Type *, 15> types;
    for (Value *argument : arguments) types.push_back(argument->getType());
    FunctionCallee callee = M.getOrInsertFunction(
        gpu_check::WORKGROUP, FunctionType::get(Type::getVoidTy(C), types, false));
    auto *function = cast<Function>(callee.getCallee());
    // The workgroup hook writes the context's ready slots, and its own shadow.
    function->setMemoryEffects(gpu_check::runtimeEffects(ModRefInfo::ModRef, ModRefInfo::ModRef));
    function->addFnAttr(Attribute::NoUnwind);
    function->addFnAttr(Attribute::WillReturn);
    gpu_check::markHookCall(record.CreateCall(callee, arguments));
  }

  // The bounds `pointer` must stay within: its kernel parameter's, a global variable's, or the
  // live allocation the runtime finds it in. None for private and workgroup memory.
  bool boundsOf(Value *pointer, IRBuilder<> &b, Value *context,
                const DenseMap<unsigned, Bounds> &parameters, Bounds &bounds) {
    if (pointer->getType()->getPointerAddressSpace() == WORKGROUP_ADDRESS_SPACE) return false;
    const Value *object = underlyingObject(pointer);
    if (isa<AllocaInst>(object)) return false;
    if (auto *global = dyn_cast<GlobalVariable>(object)) {
      if (global->getAddressSpace() == WORKGROUP_ADDRESS_SPACE || global->isThreadLocal())
        return false;
      auto *low = ConstantExpr::getPtrToInt(const_cast<GlobalVariable *>(global), I64);
      uint64_t bytes = M.getDataLayout().getTypeAllocSize(global->getValueType());
      bounds = {low, ConstantExpr::getAdd(low, ConstantInt::get(I64, bytes)), -1};
      return true;
    }
    if (auto *argument = dyn_cast<Argument>(object)) {
      auto found = parameters.find(argument->getArgNo());
      if (found != parameters.end()) {
        bounds = found->second;
        return true;
      }
    }
    // Any other pointer (loaded from memory, computed from an integer, a device function's
    // parameter): the live allocation it points into.
    Value *find = b.CreateLoad(Ptr, b.CreateConstGEP1_64(b.getInt8Ty(), context, Layout.find_offset));
    StructType *pair = StructType::get(C, {I64, I64});
    CallInst *found = b.CreateCall(FunctionType::get(pair, {Ptr, I64}, false), find,
                                   {context, b.CreatePtrToInt(pointer, I64)});
    found->setMemoryEffects(gpu_check::runtimeEffects(ModRefInfo::Ref, ModRefInfo::Ref));
    found->setDoesNotThrow();
    found->addFnAttr(Attribute::WillReturn);
    bounds = {b.CreateExtractValue(found, 0), b.CreateExtractValue(found, 1), -1};
    return true;
  }

  GlobalVariable *scratch() {
    if (!Scratch) {
      // Sized once every access is known (`finish`).
      Type *type = ArrayType::get(Type::getInt8Ty(C), 1);
      Scratch = new GlobalVariable(M, type, false, GlobalValue::InternalLinkage,
                                   Constant::getNullValue(type), "check.scratch", nullptr,
                                   GlobalValue::GeneralDynamicTLSModel);
      Scratch->setAlignment(Align(64));
    }
    return Scratch;
  }

  // Checks operand `operandIndex` of `I` (a pointer) for an access of `bytes` (null: the
  // memory intrinsic's length); outside its bounds the access is reported and not made.
  void checkOne(Instruction *I, unsigned operandIndex, Value *bytes, Kind kind, Value *context,
                const DenseMap<unsigned, Bounds> &parameters) {
    Value *pointer = I->getOperand(operandIndex);
    if (pointer->getType()->getPointerAddressSpace() == WORKGROUP_ADDRESS_SPACE) {
      checkWorkgroup(I, operandIndex, bytes, kind, context);
      return;
    }
    IRBuilder<> b(I);
    Bounds bounds;
    bool bounded = boundsOf(pointer, b, context, parameters, bounds);
    // Private memory: only its memref indices, if it has any.
    if (!bounded && !Indices.count(I)) return;
    if (auto *intrinsic = dyn_cast<MemIntrinsic>(I))
      bytes = b.CreateZExtOrTrunc(intrinsic->getLength(), I64);
    Value *made = guard(I, operandIndex, bytes, kind, context, bounded ? &bounds : nullptr,
                        b.CreatePtrToInt(pointer, I64));
    if (bounded) tellGlobal(I, pointer, bytes, kind, context, made, bounds.parameter);
  }

  // Tells the runtime's global-memory shadow of an access of `bytes` at `pointer` that is made
  // (`made`), while the launch's checks need it (the switch at `GlobalOn`): a
  // `gpu.check.global` marker of the hooks at `layout.global_offset` and `global_rows_offset`,
  // with a store's value when it fits 64 bits (a store of the value already there races with
  // nothing).
  void tellGlobal(Instruction *I, Value *pointer, Value *bytes, Kind kind, Value *context,
                  Value *made, int parameter) {
    IRBuilder<> b(I);
    Value *chosen =
        b.CreateCall(marker(gpu_check::CHOSEN, {Ptr}, true), {GlobalOn}, "check.chosen");
    Instruction *then = SplitBlockAndInsertIfThen(b.CreateAnd(made, chosen), I, false,
                                                  MDBuilder(C).createUnlikelyBranchWeights());
    IRBuilder<> call(then);
    Value *value = ConstantInt::get(I64, 0);
    Value *known = ConstantInt::get(I32, 0);
    if (auto *store = dyn_cast<StoreInst>(I)) {
      Value *stored = store->getValueOperand();
      Type *type = stored->getType();
      uint64_t bits = M.getDataLayout().getTypeSizeInBits(type).getFixedValue();
      if (bits <= 64 && M.getDataLayout().getTypeStoreSizeInBits(type) == bits) {
        if (type->isPtrOrPtrVectorTy()) {
          if (type->isPointerTy()) stored = call.CreatePtrToInt(stored, I64);
        } else {
          stored = call.CreateBitCast(stored, call.getIntNTy(bits));
        }
        if (stored->getType()->isIntegerTy()) {
          value = call.CreateZExtOrTrunc(stored, I64);
          known = ConstantInt::get(I32, 1);
        }
      }
    }
    // One marker type for pointers of every address space.
    if (pointer->getType() != Ptr) pointer = call.CreateAddrSpaceCast(pointer, Ptr);
    SmallVector<Value *, 16> arguments = {hook(call, context, Layout.global_offset),
                                          hook(call, context, Layout.global_rows_offset),
                                          GlobalOn,
                                          context,
                                          site(I, kind, parameter),
                                          pointer,
                                          bytes,
                                          value,
                                          known};
    appendIds(call, arguments);
    SmallVector<Type *, 16> types;
    for (Value *argument : arguments) types.push_back(argument->getType());
    FunctionCallee callee = M.getOrInsertFunction(
        gpu_check::GLOBAL, FunctionType::get(Type::getVoidTy(C), types, false));
    auto *function = cast<Function>(callee.getCallee());
    // The global hook reads the context and the memory it is given, and writes its own shadow.
    function->setMemoryEffects(gpu_check::runtimeEffects(ModRefInfo::Ref, ModRefInfo::ModRef));
    function->addFnAttr(Attribute::NoUnwind);
    function->addFnAttr(Attribute::WillReturn);
    gpu_check::markHookCall(call.CreateCall(callee, arguments));
  }

  // The alignment an access declares (1: none to check; a copy's is its own business).
  static uint64_t declaredAlignment(Instruction *I) {
    if (auto *load = dyn_cast<LoadInst>(I)) return load->getAlign().value();
    if (auto *store = dyn_cast<StoreInst>(I)) return store->getAlign().value();
    if (auto *rmw = dyn_cast<AtomicRMWInst>(I)) return rmw->getAlign().value();
    if (auto *cmpxchg = dyn_cast<AtomicCmpXchgInst>(I)) return cmpxchg->getAlign().value();
    return 1;
  }

  // Reports a failed check at `site` with `access` ({address, bytes, low, high}) where
  // `failed` holds, before `I`.
  void reportIf(Instruction *I, Value *failed, Value *context, Constant *site,
                ArrayRef<Value *> access) {
    Instruction *bad =
        SplitBlockAndInsertIfThen(failed, I, false, MDBuilder(C).createUnlikelyBranchWeights());
    IRBuilder<> report(bad);
    SmallVector<Value *, 12> arguments = {context, site};
    arguments.append(access.begin(), access.end());
    appendIds(report, arguments);
    callThrough(report, context, Layout.report_offset, arguments, ModRefInfo::Ref);
  }

  // The checks of an access of `bytes` at `address` (operand `operandIndex` of `I`), each
  // reported only when the ones before it passed, so one bug makes one report: its memref
  // indices within their dimensions (the index markers before it), the address within
  // `bounds` (none: private memory) and aligned as the access declares. When one fails the
  // access is not made (a copy of nothing, or at a scratch location whose loads read zero).
  // Returns whether it was made.
  Value *guard(Instruction *I, unsigned operandIndex, Value *bytes, Kind kind, Value *context,
               const Bounds *bounds, Value *address) {
    IRBuilder<> b(I);
    int parameter = bounds ? bounds->parameter : -1;
    Constant *zero = ConstantInt::get(I64, 0);
    // Every condition, and whether the ones before each held, computed before the first report
    // branch: the access's `ok` is then an `and` of markers, which the checked loops'
    // versioning evaluates, not a merge of the branches' paths.
    struct Check {
      Value *holds;
      Constant *site;
      SmallVector<Value *, 4> access;
    };
    SmallVector<Check, 4> checks;
    auto found = Indices.find(I);
    if (found != Indices.end())
      for (CallInst *index : found->second) {
        Value *first = index->getArgOperand(0), *count = index->getArgOperand(1);
        Value *size = index->getArgOperand(2);
        auto *dimension = dyn_cast<ConstantInt>(index->getArgOperand(3));
        Value *within = b.CreateCall(marker(gpu_check::INDEX_WITHIN, {I64, I64, I64, I64}, true),
                                     {first, count, zero, size}, "check.index");
        checks.push_back({within,
                          site(index, kind, parameter, gpu_check::CHECK_INDEX,
                               dimension ? dimension->getZExtValue() : 0),
                          {first, count, zero, size}});
      }
    auto *intrinsic = dyn_cast<MemIntrinsic>(I);
    Value *low = zero, *high = zero;
    if (bounds) {
      low = bounds->low;
      high = bounds->high;
      Value *within = b.CreateCall(marker(gpu_check::WITHIN, {I64, I64, I64, I64}, false),
                                   {address, bytes, low, high}, "check.within");
      if (intrinsic) within = b.CreateOr(within, b.CreateICmpEQ(bytes, zero));
      checks.push_back({within, site(I, kind, parameter), {address, bytes, low, high}});
    }
    // A memref's elements are aligned to their size (its aligned pointer is: the runtime's
    // allocations are aligned to 256 bytes, and a view starts at a whole element): what can be
    // misaligned is an access declaring more (a vector load's `alignment`) or one through a
    // raw pointer.
    uint64_t alignment = declaredAlignment(I);
    if (bounds && bounds->elementBytes >= alignment) alignment = 1;
    if (alignment > 1) {
      Value *aligned = b.CreateCall(marker(gpu_check::ALIGNED, {I64, I64}, false),
                                    {address, ConstantInt::get(I64, alignment)}, "check.aligned");
      checks.push_back({aligned,
                        site(I, kind, parameter, gpu_check::CHECK_ALIGNMENT, alignment),
                        {address, bytes, low, high}});
    }
    SmallVector<Value *, 4> failed;
    Value *ok = b.getTrue();
    for (const Check &check : checks) {
      failed.push_back(b.CreateAnd(ok, b.CreateNot(check.holds)));
      ok = b.CreateAnd(ok, check.holds);
    }
    for (unsigned i = 0; i < checks.size(); ++i)
      reportIf(I, failed[i], context, checks[i].site, checks[i].access);
    IRBuilder<> at(I);
    if (intrinsic) {
      Value *length = intrinsic->getLength();
      intrinsic->setLength(at.CreateSelect(ok, length, Constant::getNullValue(length->getType())));
      return ok;
    }
    Value *pointer = I->getOperand(operandIndex);
    Value *safe = at.CreateSelect(
        ok, pointer, ConstantExpr::getPointerBitCastOrAddrSpaceCast(scratch(), pointer->getType()));
    I->setOperand(operandIndex, safe);
    if (auto *load = dyn_cast<LoadInst>(I)) {
      IRBuilder<> after(load->getNextNode());
      Value *nothing = Constant::getNullValue(load->getType());
      auto *value = cast<Instruction>(after.CreateSelect(ok, load, nothing));
      load->replaceUsesWithIf(value, [&](Use &use) { return use.getUser() != value; });
    }
    return ok;
  }

 public:
  // Gives the scratch location its final size: the largest access redirected to it.
  void finish() {
    if (!Scratch) return;
    Type *type = ArrayType::get(Type::getInt8Ty(C), ScratchBytes);
    auto *sized = new GlobalVariable(M, type, false, GlobalValue::InternalLinkage,
                                     Constant::getNullValue(type), "check.scratch.sized", nullptr,
                                     GlobalValue::GeneralDynamicTLSModel);
    sized->setAlignment(Align(64));
    Scratch->replaceAllUsesWith(sized);
    Scratch->eraseFromParent();
    sized->setName("check.scratch");
  }
};

}  // namespace

// (passes.h)
extern "C" char *gpu_build_check_accesses(LLVMModuleRef module, LLVMValueRef context,
                                          const char *source, LLVMValueRef const *kernels,
                                          uint32_t kernel_count, const GpuCheckMemref *memrefs,
                                          uint32_t memref_count, const GpuCheckLayout *layout) {
  Module &M = *unwrap(module);
  auto *contextVariable = dyn_cast<GlobalVariable>(unwrap(context));
  if (!contextVariable) return LLVMCreateMessage("the context is not a global variable");
  Instrumenter instrumenter(M, contextVariable, source, *layout);
  std::vector<Function *> functions;
  for (Function &F : M)
    if (!F.isDeclaration()) functions.push_back(&F);
  for (Function *F : functions) {
    std::vector<GpuCheckMemref> own;
    bool kernel = false;
    for (uint32_t k = 0; k < kernel_count; ++k) {
      if (unwrap(kernels[k]) != F) continue;
      kernel = true;
      for (uint32_t m = 0; m < memref_count; ++m)
        if (memrefs[m].kernel == k) {
          if (memrefs[m].aligned + 2 + 2 * memrefs[m].rank > F->arg_size())
            return LLVMCreateMessage("a memref argument past the kernel's parameters");
          own.push_back(memrefs[m]);
        }
    }
    instrumenter.instrument(*F, kernel, own);
  }
  instrumenter.finish();
  // The locations are in the reports now; nothing after this step expects debug information.
  StripDebugInfo(M);
  return nullptr;
}
