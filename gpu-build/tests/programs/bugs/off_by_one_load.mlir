// A seeded bug for `gpu-build run --check` (gpu-build/tests/command/check.rs): a 2-D stencil
// whose last block's last thread reads one element past its input (a loop bound of `<=`).
// EXPECT: out-of-bounds load of 4 bytes at {FILE}:19:14, block (3, 0, 0), thread (7, 0, 0): address … is 0 bytes past the end of argument `in` (128 bytes at
module attributes {gpu.container_module} {
  gpu.module @kernels {
    // out[i] = in[i] + in[i + 1] over a 32-element row, but the last element reads in[32].
    gpu.func @pair_sums(%in: memref<32xf32>, %out: memref<32xf32>) kernel {
      %t = gpu.thread_id x
      %b = gpu.block_id x
      %n = gpu.block_dim x
      %base = arith.muli %b, %n : index
      %i = arith.addi %base, %t : index
      %c1 = arith.constant 1 : index
      %j = arith.addi %i, %c1 : index
      %a = memref.load %in[%i] : memref<32xf32>
      %c32 = arith.constant 32 : index
      %inside = arith.cmpi ule, %j, %c32 : index
      scf.if %inside {
        %c = memref.load %in[%j] : memref<32xf32>
        %s = arith.addf %a, %c : f32
        memref.store %s, %out[%i] : memref<32xf32>
      }
      gpu.return
    }
  }
  func.func @main() {
    %c1 = arith.constant 1 : index
    %c4 = arith.constant 4 : index
    %c8 = arith.constant 8 : index
    %in = gpu.alloc () : memref<32xf32>
    %out = gpu.alloc () : memref<32xf32>
    gpu.launch_func @kernels::@pair_sums blocks in (%c4, %c1, %c1) threads in (%c8, %c1, %c1)
        args(%in : memref<32xf32>, %out : memref<32xf32>)
    gpu.dealloc %in : memref<32xf32>
    gpu.dealloc %out : memref<32xf32>
    return
  }
}
