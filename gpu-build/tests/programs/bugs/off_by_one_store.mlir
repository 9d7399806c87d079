// A seeded bug for `gpu-build run --check` (gpu-build/tests/command/check.rs): thread 15 of 16
// stores one element past a 16-element gpu.alloc. Unchecked, the run exits 0 and says nothing.
// EXPECT: out-of-bounds store of 4 bytes at {FILE}:12:7, block (0, 0, 0), thread (15, 0, 0): address … is 0 bytes past the end of argument `out` (64 bytes at
module attributes {gpu.container_module} {
  gpu.module @kernels {
    gpu.func @shift_right(%in: memref<16xf32>, %out: memref<16xf32>) kernel {
      %t = gpu.thread_id x
      %c1 = arith.constant 1 : index
      %next = arith.addi %t, %c1 : index
      %v = memref.load %in[%t] : memref<16xf32>
      // Should be guarded by %next < 16.
      memref.store %v,
        %out[%next] : memref<16xf32>
    gpu.return
    }
  }
  func.func @main() {
    %c1 = arith.constant 1 : index
    %c16 = arith.constant 16 : index
    %in = gpu.alloc () : memref<16xf32>
    %out = gpu.alloc () : memref<16xf32>
    gpu.launch_func @kernels::@shift_right blocks in (%c1, %c1, %c1)
        threads in (%c16, %c1, %c1) args(%in : memref<16xf32>, %out : memref<16xf32>)
    gpu.dealloc %in : memref<16xf32>
    gpu.dealloc %out : memref<16xf32>
    return
  }
}
