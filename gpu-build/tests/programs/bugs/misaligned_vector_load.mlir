// A seeded bug for `gpu-build run --check` (gpu-build/tests/command/check.rs): each thread
// loads four floats with a vector load that declares 16-byte alignment, starting one element
// into its group of four:
// inside the buffer, fine on a CPU, a misaligned address fault on a GPU (`ld.v4.f32`).
// Twin: twins/aligned_vector_load.mlir.
// EXPECT: misaligned load of 16 bytes at {FILE}:16:12, block (0, 0, 0), thread (0, 0, 0): address … is 4 bytes past a multiple of 16, the alignment the access declares
// EXPECT-COUNT: 7
module attributes {gpu.container_module} {
  gpu.module @kernels {
    gpu.func @load4(%in: memref<64xf32>, %out: memref<64xf32>) kernel {
      %t = gpu.thread_id x
      %c1 = arith.constant 1 : index
      %c4 = arith.constant 4 : index
      %base = arith.muli %t, %c4 : index
      %shifted = arith.addi %base, %c1 : index
      %v = vector.load %in[%shifted] {alignment = 16} : memref<64xf32>, vector<4xf32>
      vector.store %v, %out[%base] {alignment = 16} : memref<64xf32>, vector<4xf32>
      gpu.return
    }
  }
  func.func @main() {
    %c1 = arith.constant 1 : index
    %c7 = arith.constant 7 : index
    %in = gpu.alloc () : memref<64xf32>
    %out = gpu.alloc () : memref<64xf32>
    gpu.launch_func @kernels::@load4 blocks in (%c1, %c1, %c1)
        threads in (%c7, %c1, %c1) args(%in : memref<64xf32>, %out : memref<64xf32>)
    gpu.dealloc %in : memref<64xf32>
    gpu.dealloc %out : memref<64xf32>
    return
  }
}
