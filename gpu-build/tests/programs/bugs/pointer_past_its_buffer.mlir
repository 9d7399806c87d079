// A seeded bug for `gpu-build run --check` (gpu-build/tests/command/check.rs): a kernel given a
// raw pointer one past the end of its 16-element buffer (the host code
// added the element count twice), which every thread then writes through.
// EXPECT: out-of-bounds store of 4 bytes at {FILE}:12:7, block (0, 0, 0), thread (0, 0, 0): address … is 0 bytes past the end of argument `p` (64 bytes at
// EXPECT-COUNT: 4
module attributes {gpu.container_module} {
  gpu.module @kernels {
    gpu.func @fill(%p: !llvm.ptr, %v: f32) kernel {
      %t = gpu.thread_id x
      %i = arith.index_cast %t : index to i64
      %at = llvm.getelementptr %p[%i] : (!llvm.ptr, i64) -> !llvm.ptr, f32
      llvm.store %v, %at : f32, !llvm.ptr
      gpu.return
    }
  }
  func.func @main() {
    %c1 = arith.constant 1 : index
    %c4 = arith.constant 4 : index
    %buffer = gpu.alloc () : memref<16xf32>
    %base = memref.extract_aligned_pointer_as_index %buffer : memref<16xf32> -> index
    %bytes = arith.constant 64 : index
    %end = arith.addi %base, %bytes : index
    %address = arith.index_cast %end : index to i64
    %p = llvm.inttoptr %address : i64 to !llvm.ptr
    %v = arith.constant 1.0 : f32
    gpu.launch_func @kernels::@fill blocks in (%c1, %c1, %c1) threads in (%c4, %c1, %c1)
        args(%p : !llvm.ptr, %v : f32)
    gpu.dealloc %buffer : memref<16xf32>
    return
  }
}
