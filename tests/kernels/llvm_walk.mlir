// An LLVM-dialect kernel for Vulkan (device addresses: targets/vulkan/llvm_kernels.rs), the host
// and the LLVM GPU targets; tests/src/spirv_checks.rs `check_llvm_walk` runs it. Not built for
// the OpenCL-style target: LLVM 22's SPIR-V back end, which that target uses for LLVM-dialect
// kernels, wrote this module's objects with an id defined twice (spirv-val refuses them) in about
// one run of three of the compile tests, which compile many modules in one process, and in none
// of 80 command-line builds.
gpu.module @llvm_walk {
  // out[0..4] = the sum of the n vectors at p, out[4] = the signed byte at bytes[0], by one
  // thread walking a pointer through a loop (a pointer carried by a block argument), with 16-byte
  // vector loads and stores and an 8-bit load.
  llvm.func @walk(%p: !llvm.ptr<1>, %bytes: !llvm.ptr, %out: !llvm.ptr, %n: i64) attributes {gpu.kernel} {
    %c0 = llvm.mlir.constant(0 : i64) : i64
    %c1 = llvm.mlir.constant(1 : i64) : i64
    %zero = llvm.mlir.constant(dense<0.0> : vector<4xf32>) : vector<4xf32>
    llvm.br ^loop(%c0, %p, %zero : i64, !llvm.ptr<1>, vector<4xf32>)
  ^loop(%i: i64, %at: !llvm.ptr<1>, %acc: vector<4xf32>):
    %more = llvm.icmp "ult" %i, %n : i64
    llvm.cond_br %more, ^step, ^done
  ^step:
    %v = llvm.load %at {alignment = 16 : i64} : !llvm.ptr<1> -> vector<4xf32>
    %sum = llvm.fadd %acc, %v : vector<4xf32>
    %next = llvm.getelementptr %at[1] : (!llvm.ptr<1>) -> !llvm.ptr<1>, vector<4xf32>
    %i1 = llvm.add %i, %c1 : i64
    llvm.br ^loop(%i1, %next, %sum : i64, !llvm.ptr<1>, vector<4xf32>)
  ^done:
    %b = llvm.load %bytes : !llvm.ptr -> i8
    %wide = llvm.sext %b : i8 to i32
    %f = llvm.sitofp %wide : i32 to f32
    llvm.store %acc, %out {alignment = 16 : i64} : vector<4xf32>, !llvm.ptr
    %fifth = llvm.getelementptr %out[4] : (!llvm.ptr) -> !llvm.ptr, f32
    llvm.store %f, %fifth : f32, !llvm.ptr
    llvm.return
  }
}
