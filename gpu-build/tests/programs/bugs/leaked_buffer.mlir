// A seeded bug for `gpu-build run --check` (gpu-build/tests/command/check.rs): the program
// frees one of its two buffers; the leak check reports the other, at the gpu.alloc that made
// it, when the program ends. Twin: twins/buffers_freed.mlir.
// CHECKS: leaks
// EXPECT: leak: 64 bytes of device memory at … allocated at {FILE}:22:12 (gpu.alloc), were never freed
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
    %zero = arith.constant 0.0 : f32
    %in = gpu.alloc () : memref<16xf32>
    gpu.memset %in, %zero : memref<16xf32>, f32
    %out = gpu.alloc () : memref<16xf32>
    gpu.launch_func @kernels::@double blocks in (%c1, %c1, %c1)
        threads in (%c16, %c1, %c1) args(%in : memref<16xf32>, %out : memref<16xf32>)
    gpu.dealloc %in : memref<16xf32>
    return
  }
}
