// The passes of the host target's optimization pipeline, each defined in the file named for it;
// pipeline.cpp, the one registration, orders them.
#pragma once

#include "llvm/IR/PassManager.h"

#include <string>

namespace llvm {
class Module;
}

namespace gpu_host {

// The thread loops the host target marked, as LLVM's parallel loops (parallel_thread_loops.cpp);
// before the pipeline.
void markParallelThreadLoops(llvm::Module &M, const char *loopMark, const char *bodyMark,
                             const char *threadsMark);

// Every blocks entry (its name ends with `suffix`) copied once per CPU of `cpus`, behind a
// dispatcher on the runtime's CPU level (multiversion_entries.cpp); before the pipeline.
void multiversionEntries(llvm::Module &M, const std::string &suffix, const char *const *cpus,
                         unsigned count, const char *baseline, unsigned levelOffset);

// Lets the thread loops of the functions whose names end with `entrySuffix` (the blocks
// entries) stop at, start at or drop their guards (exit_thread_loops_at_guards.cpp); before the
// vectorizers, on loops with preheaders.
void addExitThreadLoopsAtGuards(llvm::FunctionPassManager &FPM, const std::string &entrySuffix);

// Runs several rows of a two-dimensional thread loop nest together, their work interleaved,
// where the rows read the same values (a tile row every thread of a column reads); on the
// functions whose names end with `entrySuffix`, on the loops with the property `threadsMark`
// (thread loops whose iterations touch no memory another writes) (thread_rows.cpp); after the
// thread-loop pass, before the vectorizers.
void addThreadRowBlocking(llvm::FunctionPassManager &FPM, const std::string &entrySuffix,
                          const std::string &threadsMark);

} // namespace gpu_host

namespace gpu_check {

// Gathers the barrier hooks of a thread loop every thread of which reaches the barrier into one
// call after the loop (gather_barrier_hooks.cpp); before the thread-loop pass, whose exits at
// guards it allows.
void addBarrierGathering(llvm::FunctionPassManager &FPM);

// Versions innermost loops on the checks a test before the loop decides for every iteration,
// then lowers every marker (version_checked_loops.cpp); after the thread-loop pass, before the
// vectorizers.
void addCheckedLoopVersioning(llvm::FunctionPassManager &FPM);

} // namespace gpu_check
