// A seeded bug for `gpu-build run --check` (gpu-build/tests/command/check.rs): the program
// fills the first 12 of 16 input elements and the kernel reads all 16: four threads read
// memory nobody wrote (compute-sanitizer's initcheck finds this on a GPU).
// Twin: twins/read_of_memory_written.mlir.
// CHECKS: uninitialized
// EXPECT: uninitialized read: load of 4 bytes at {FILE}:11:12, block (0, 0, 0), thread (12, 0, 0): byte 48 of argument `in` (64 bytes at … was never written
module attributes {gpu.container_module} {
  gpu.module @kernels {
    gpu.func @double(%in: memref<16xf32>, %out: memref<16xf32>) kernel {
      %t = gpu.thread_id x
      %v = memref.load %in[%t] : memref<16xf32>
      %w = arith.addf %v, %v : f32
      memref.store %w, %out[%t] : memref<16xf32>
      gpu.return
    }
  }
  func.func @main() {
    %c1 = arith.constant 1 : index
    %c16 = arith.constant 16 : index
    %one = arith.constant 1.0 : f32
    %in = gpu.alloc () : memref<16xf32>
    %first = memref.subview %in[0] [12] [1] : memref<16xf32> to memref<12xf32, strided<[1]>>
    gpu.memset %first, %one : memref<12xf32, strided<[1]>>, f32
    %out = gpu.alloc () : memref<16xf32>
    gpu.launch_func @kernels::@double blocks in (%c1, %c1, %c1)
        threads in (%c16, %c1, %c1) args(%in : memref<16xf32>, %out : memref<16xf32>)
    gpu.dealloc %in : memref<16xf32>
    gpu.dealloc %out : memref<16xf32>
    return
  }
}
