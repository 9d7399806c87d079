// The host optimization pipeline's register blocking of thread rows (thread_rows.cpp).
#pragma once

#include "llvm/IR/PassManager.h"

#include <string>

namespace gpu_host {

// Runs several rows of a two-dimensional thread loop nest together, their work interleaved,
// where the rows read the same values (a tile row every thread of a column reads); on the
// functions whose names end with `entrySuffix`, on the loops with the property `threadsMark`
// (thread loops whose iterations touch no memory another writes), after the thread-loop pass,
// before the vectorizers.
void addThreadRowBlocking(llvm::FunctionPassManager &FPM, const std::string &entrySuffix,
                          const std::string &threadsMark);

} // namespace gpu_host
