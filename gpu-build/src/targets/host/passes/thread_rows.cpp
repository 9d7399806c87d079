// Register blocking of thread rows: the host target's answer to what an OpenCL CPU runtime gets
// from vectorizing whole work-groups (issue 41's tiled matmul).
//
// A two-dimensional region runs as a loop over the block's rows around a loop over a row's
// threads, which the vectorizer turns into whole-row vectors. In the tiled matmul, every thread of
// a row reads its own row of the first tile and the second tile's column of its own x: each
// product needs a broadcast and a load of the second tile, and the second tile's row is read once
// for every row of threads. The rows' iterations are independent (the host target marks such
// loops, optimize.rs's THREADS_MARK: no two threads of a region touch memory one of them writes
// unless the kernel races), so several rows can run together, their work interleaved statement
// by statement: the loads every row makes of the same address become one load used by all of
// them (the second tile's row, once per four rows at AVX2), and each row's accumulator stays in a
// register. This is unroll-and-jam of the row loop, as a CPU BLAS blocks its micro-kernel.
//
// LLVM's LoopUnrollAndJam does the unrolling and the jam (its legality test, with dependence
// analysis, is kept: a loop it refuses is left alone); what it leaves is the rows one after the
// other in the jammed loop's body, each row's values live until the next row reuses them, more
// values than registers. The body is therefore reordered: the first statement of every row, then
// the second of every row, and so on, which the rows' independence allows.

#include "pipeline.h"

#include "llvm/Analysis/AssumptionCache.h"
#include "llvm/Analysis/DependenceAnalysis.h"
#include "llvm/Analysis/LoopInfo.h"
#include "llvm/Analysis/OptimizationRemarkEmitter.h"
#include "llvm/Analysis/ScalarEvolution.h"
#include "llvm/Analysis/ScalarEvolutionExpressions.h"
#include "llvm/Analysis/TargetTransformInfo.h"
#include "llvm/IR/Dominators.h"
#include "llvm/IR/Instructions.h"
#include "llvm/IR/IntrinsicInst.h"
#include "llvm/IR/Metadata.h"
#include "llvm/Transforms/Utils/LoopUtils.h"
#include "llvm/Transforms/Utils/UnrollLoop.h"

#include <algorithm>

using namespace llvm;

namespace {

// The metadata kind that numbers the statements of a row's body while it is copied (removed
// once the copies are interleaved).
const char *const StatementMark = "gpu_build.row_statement";
// The loop property that says a row loop is blocked already (LLVM's own, which its unroll-and-jam
// pass also respects).
const char *const BlockedMark = "llvm.loop.unroll_and_jam.disable";

// Whether `L` is one of the host target's thread loops whose iterations touch no memory another
// writes (the property `threadsMark`, see optimize.rs's THREADS_MARK).
bool threadLoop(const Loop &L, StringRef threadsMark) {
  return findOptionMDForLoop(&L, threadsMark) != nullptr;
}

// Whether the address `S` is the same for every iteration of `rows`: it has no recurrence of
// `rows` and no value computed inside it.
bool sameForEveryRow(const SCEV *S, const Loop &rows) {
  return !SCEVExprContains(S, [&](const SCEV *term) {
    if (const auto *recurrence = dyn_cast<SCEVAddRecExpr>(term))
      return recurrence->getLoop() == &rows;
    if (const auto *unknown = dyn_cast<SCEVUnknown>(term))
      if (const auto *I = dyn_cast<Instruction>(unknown->getValue()))
        return rows.contains(I);
    return false;
  });
}

// The loads of `row`'s body (its one block) that every row makes at the same address, and the
// widest of all its loads in bytes.
unsigned sharedLoads(const Loop &rows, const Loop &row, ScalarEvolution &SE, unsigned &widest) {
  unsigned shared = 0;
  widest = 0;
  for (Instruction &I : *row.getHeader())
    if (auto *load = dyn_cast<LoadInst>(&I)) {
      widest = std::max<unsigned>(widest, load->getType()->getPrimitiveSizeInBits() / 8);
      if (sameForEveryRow(SE.getSCEV(load->getPointerOperand()), rows))
        ++shared;
    }
  return shared;
}

// Whether `B`'s statements are all ones whose order among rows does not matter: no call but
// intrinsics that touch no memory (a checked object's hooks keep their order).
bool onlyPlainStatements(const BasicBlock &B) {
  for (const Instruction &I : B)
    if (const auto *call = dyn_cast<CallBase>(&I))
      if (!isa<IntrinsicInst>(call) || call->mayReadOrWriteMemory() || call->mayHaveSideEffects())
        return false;
  return true;
}

// How many vector registers a row of `threads` values of `bytes` each takes (0 if the target has
// none).
unsigned registersPerRow(const TargetTransformInfo &TTI, unsigned threads, unsigned bytes) {
  unsigned width =
      TTI.getRegisterBitWidth(TargetTransformInfo::RGK_FixedWidthVector).getFixedValue() / 8;
  return width == 0 ? 0 : std::max(1u, (threads * bytes + width - 1) / width);
}

// How many rows to run together: as many (8 at most, 2 at least) as keep one value per thread of
// each row in vector registers, with the shared row and a broadcast beside them.
unsigned rowsTogether(const TargetTransformInfo &TTI, unsigned perRow) {
  unsigned registers = TTI.getNumberOfRegisters(TTI.getRegisterClassForType(true));
  if (perRow == 0)
    return 1;
  for (unsigned count = 8; count >= 2; count /= 2)
    if (count * perRow + perRow + 2 <= registers)
      return count;
  return 1;
}

// Interleaves the rows' copies of the statements of `B` (numbered with `kind` before copying):
// statement i of every row, in row order, before statement i + 1 of any. Left as it is when a
// statement has no number or the new order would use a value before it is made.
void interleaveRows(BasicBlock &B, unsigned kind) {
  struct Placed {
    Instruction *I;
    unsigned statement, copy;
  };
  SmallVector<Placed, 64> placed;
  DenseMap<Instruction *, unsigned> where;
  unsigned copy = 0, last = 0;
  bool numbered = true;
  for (Instruction &I : B) {
    if (isa<PHINode>(I) || I.isTerminator())
      continue;
    MDNode *mark = I.getMetadata(kind);
    if (!mark) {
      numbered = false;
      break;
    }
    unsigned statement =
        mdconst::extract<ConstantInt>(mark->getOperand(0))->getZExtValue();
    if (!placed.empty() && statement <= last)
      ++copy;
    last = statement;
    where[&I] = placed.size();
    placed.push_back({&I, statement, copy});
  }
  for (Instruction &I : B)
    I.setMetadata(kind, nullptr);
  if (!numbered || copy == 0)
    return;
  auto before = [](const Placed &a, const Placed &b) {
    return a.statement != b.statement ? a.statement < b.statement : a.copy < b.copy;
  };
  for (const Placed &p : placed)
    for (Value *operand : p.I->operands())
      if (auto *I = dyn_cast<Instruction>(operand); I && I->getParent() == &B &&
                                                   !isa<PHINode>(I) &&
                                                   !before(placed[where.lookup(I)], p))
        return;
  SmallVector<Placed, 64> order(placed.begin(), placed.end());
  std::stable_sort(order.begin(), order.end(), before);
  Instruction *end = B.getTerminator();
  for (const Placed &p : order)
    p.I->moveBefore(end->getIterator());
}

// Blocks one row loop when it qualifies: a thread loop of a constant number of rows whose one
// subloop is a single-block thread loop over a row's threads that loads at least four values
// every row loads at the same address, and which LLVM's unroll-and-jam takes.
bool blockRows(Loop &rows, StringRef threadsMark, LoopInfo &LI, DominatorTree &DT,
               ScalarEvolution &SE, AssumptionCache &AC, const TargetTransformInfo &TTI,
               DependenceInfo &DI, OptimizationRemarkEmitter &ORE) {
  if (rows.getSubLoops().size() != 1 || !threadLoop(rows, threadsMark) ||
      getBooleanLoopAttribute(&rows, BlockedMark))
    return false;
  Loop &row = *rows.getSubLoops().front();
  if (!row.getSubLoops().empty() || row.getNumBlocks() != 1 || !threadLoop(row, threadsMark))
    return false;
  BasicBlock &body = *row.getHeader();
  unsigned rowCount = SE.getSmallConstantTripCount(&rows);
  unsigned threads = SE.getSmallConstantTripCount(&row);
  unsigned widest = 0;
  if (rowCount == 0 || threads == 0 || !onlyPlainStatements(body) ||
      sharedLoads(rows, row, SE, widest) < 4)
    return false;
  unsigned perRow = registersPerRow(TTI, threads, widest);
  unsigned count = rowsTogether(TTI, perRow);
  if (count < 2 || rowCount % count != 0 || !isSafeToUnrollAndJam(&rows, SE, DT, DI, LI))
    return false;

  LLVMContext &C = body.getContext();
  unsigned kind = C.getMDKindID(StatementMark);
  unsigned statement = 0;
  for (Instruction &I : body)
    if (!isa<PHINode>(I) && !I.isTerminator())
      I.setMetadata(kind, MDNode::get(C, ConstantAsMetadata::get(ConstantInt::get(
                                             Type::getInt32Ty(C), statement++))));
  formLCSSARecursively(rows, DT, &LI, &SE);
  addStringMetadataToLoop(&rows, BlockedMark, 1);
  LoopUnrollResult result = UnrollAndJamLoop(&rows, count, rowCount, rowCount,
                                             /*UnrollRemainder=*/false, &LI, &SE, &DT, &AC, &TTI,
                                             &ORE);
  // The jammed loop is the one left of the row loop's subloop; its body one block again once
  // the copies are merged.
  if (result != LoopUnrollResult::Unmodified && row.getNumBlocks() == 1)
    interleaveRows(*row.getHeader(), kind);
  // A whole row per vector iteration (as many vectors interleaved as the row fills), so that the
  // loop over a row's threads is gone: each row's broadcast value then serves every vector of the
  // row from a register, instead of being kept for the loop's next iteration (more values than
  // registers: each one spilled and reloaded by every product).
  if (result != LoopUnrollResult::Unmodified && perRow > 1)
    addStringMetadataToLoop(&row, "llvm.loop.interleave.count", perRow);
  for (BasicBlock *B : row.getBlocks())
    for (Instruction &I : *B)
      I.setMetadata(kind, nullptr);
  return result != LoopUnrollResult::Unmodified;
}

struct BlockThreadRows : PassInfoMixin<BlockThreadRows> {
  std::string entrySuffix;
  std::string threadsMark;

  PreservedAnalyses run(Function &F, FunctionAnalysisManager &FAM) {
    if (!F.getName().ends_with(entrySuffix))
      return PreservedAnalyses::all();
    bool changed = false;
    // One loop at a time, with fresh analyses.
    for (unsigned round = 0; round < 16; ++round) {
      auto &LI = FAM.getResult<LoopAnalysis>(F);
      auto &DT = FAM.getResult<DominatorTreeAnalysis>(F);
      auto &SE = FAM.getResult<ScalarEvolutionAnalysis>(F);
      auto &AC = FAM.getResult<AssumptionAnalysis>(F);
      auto &TTI = FAM.getResult<TargetIRAnalysis>(F);
      auto &DI = FAM.getResult<DependenceAnalysis>(F);
      auto &ORE = FAM.getResult<OptimizationRemarkEmitterAnalysis>(F);
      bool once = false;
      for (Loop *L : LI.getLoopsInPreorder())
        if (blockRows(*L, threadsMark, LI, DT, SE, AC, TTI, DI, ORE)) {
          once = true;
          break;
        }
      if (!once)
        break;
      changed = true;
      FAM.invalidate(F, PreservedAnalyses::none());
    }
    return changed ? PreservedAnalyses::none() : PreservedAnalyses::all();
  }
};

} // namespace

void gpu_host::addThreadRowBlocking(FunctionPassManager &FPM, const std::string &entrySuffix,
                                    const std::string &threadsMark) {
  FPM.addPass(BlockThreadRows{{}, entrySuffix, threadsMark});
}
