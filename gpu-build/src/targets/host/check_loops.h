// The host optimization pipeline's passes for checked objects' loops (check_loops.cpp).
#pragma once

#include "llvm/IR/PassManager.h"

namespace gpu_check {

// Gathers the barrier hooks of a thread loop every thread of which reaches the barrier into one
// call after the loop; before the thread-loop pass, whose exits at guards it allows.
void addBarrierGathering(llvm::FunctionPassManager &FPM);

// Versions innermost loops on the checks a test before the loop decides for every iteration,
// then lowers every marker; after the thread-loop pass, before the vectorizers.
void addCheckedLoopVersioning(llvm::FunctionPassManager &FPM);

} // namespace gpu_check
