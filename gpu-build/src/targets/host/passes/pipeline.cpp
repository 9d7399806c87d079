// The host target's optimization pipeline: LLVM's default<O> pipeline (as every target gets),
// plus one pass for the thread loops of the blocks entries (exit_thread_loops_at_guards.cpp),
// which LLVM's C API cannot add (it takes pipeline text only, with no extension points), and
// around it, for checked objects, the passes of gather_barrier_hooks.cpp and
// version_checked_loops.cpp, and after it the row blocking of thread_rows.cpp; before the
// pipeline, the thread loops marked parallel (parallel_thread_loops.cpp) and the blocks entries
// multiversioned (multiversion_entries.cpp). The one place that orders the passes (pipeline.h
// lists them). See optimize.rs.

#include "check_markers.h"
#include "passes.h"
#include "pipeline.h"

#include "llvm-c/Core.h"
#include "llvm-c/TargetMachine.h"
#include "llvm/IR/Module.h"
#include "llvm/IR/PassManager.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/Transforms/Utils/LoopSimplify.h"

#include <cstring>
#include <string>

using namespace llvm;

extern "C" {

// (passes.h)
LLVMBool gpu_build_optimize_host(LLVMModuleRef module, LLVMTargetMachineRef machine,
                                 unsigned level, const char *entrySuffix,
                                 const char *const *cpus, unsigned cpuCount,
                                 const char *baselineCpu, unsigned levelOffset,
                                 const char *threadLoopMark, const char *threadBodyMark,
                                 const char *threadsMark, char **error) {
  Module &M = *unwrap(module);
  auto *TM = reinterpret_cast<TargetMachine *>(machine);
  gpu_host::markParallelThreadLoops(M, threadLoopMark, threadBodyMark, threadsMark);
  if (cpuCount > 0)
    gpu_host::multiversionEntries(M, entrySuffix, cpus, cpuCount, baselineCpu, levelOffset);
  PipelineTuningOptions tuning;
  tuning.LoopUnrolling = true;
  tuning.LoopInterleaving = true;
  tuning.LoopVectorization = true;
  tuning.SLPVectorization = true;
  PassBuilder builder(TM, tuning);
  LoopAnalysisManager LAM;
  FunctionAnalysisManager FAM;
  CGSCCAnalysisManager CGAM;
  ModuleAnalysisManager MAM;
  builder.registerModuleAnalyses(MAM);
  builder.registerCGSCCAnalyses(CGAM);
  builder.registerFunctionAnalyses(FAM);
  builder.registerLoopAnalyses(LAM);
  builder.crossRegisterProxies(LAM, FAM, CGAM, MAM);
  builder.registerVectorizerStartEPCallback(
      [suffix = std::string(entrySuffix),
       threads = std::string(threadsMark)](FunctionPassManager &FPM, OptimizationLevel) {
        // Loops with preheaders, as the pass expects.
        FPM.addPass(LoopSimplifyPass());
        gpu_check::addBarrierGathering(FPM);
        gpu_host::addExitThreadLoopsAtGuards(FPM, suffix);
        // Again in the loops unswitched on a uniform branch, where a barrier the branch chose
        // between is now reached by every thread.
        gpu_check::addBarrierGathering(FPM);
        gpu_check::addCheckedLoopVersioning(FPM);
        FPM.addPass(LoopSimplifyPass());
        gpu_host::addThreadRowBlocking(FPM, suffix, threads);
      });
  OptimizationLevel levels[] = {OptimizationLevel::O0, OptimizationLevel::O1,
                                OptimizationLevel::O2, OptimizationLevel::O3};
  if (level > 3) {
    *error = strdup("optimization level above 3");
    return 0;
  }
  ModulePassManager pipeline = level == 0 ? builder.buildO0DefaultPipeline(OptimizationLevel::O0)
                                          : builder.buildPerModuleDefaultPipeline(levels[level]);
  pipeline.run(M, MAM);
  // What the pipeline left of the checks' markers (all of them at level 0) lowered.
  for (Function &F : M)
    gpu_check::lowerCheckMarkers(F);
  return 1;
}

} // extern "C"
