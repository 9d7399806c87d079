// A seeded bug for `gpu-build run --check` (gpu-build/tests/command/check.rs): a tree reduction
// over workgroup memory whose loop lacks the barrier between its steps (the one after the
// first store is there), so a thread reads a partial sum its neighbour writes in the same step.
// EXPECT: workgroup memory race: store of 4 bytes at {FILE}:28:11, block (0, 0, 0), thread (1, 0, 0): byte 4 of `__wg_tree_sum_0` was read by several other threads at {FILE}:26:16 since the last barrier
module attributes {gpu.container_module} {
  gpu.module @kernels {
    gpu.func @tree_sum(%in: memref<64xf32>, %out: memref<1xf32>)
        workgroup(%partial: memref<64xf32, #gpu.address_space<workgroup>>) kernel {
      %t = gpu.thread_id x
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c32 = arith.constant 32 : index
      %v = memref.load %in[%t] : memref<64xf32>
      memref.store %v, %partial[%t] : memref<64xf32, #gpu.address_space<workgroup>>
      gpu.barrier
      // for (s = 32; s > 0; s /= 2) { if (t < s) partial[t] += partial[t + s]; /* barrier */ }
      %r = scf.while (%s = %c32) : (index) -> index {
        %more = arith.cmpi ugt, %s, %c0 : index
        scf.condition(%more) %s : index
      } do {
      ^bb0(%s: index):
        %active = arith.cmpi ult, %t, %s : index
        scf.if %active {
          %o = arith.addi %t, %s : index
          %a = memref.load %partial[%t] : memref<64xf32, #gpu.address_space<workgroup>>
          %b = memref.load %partial[%o] : memref<64xf32, #gpu.address_space<workgroup>>
          %sum = arith.addf %a, %b : f32
          memref.store %sum, %partial[%t] : memref<64xf32, #gpu.address_space<workgroup>>
        }
        %half = arith.shrui %s, %c1 : index
        scf.yield %half : index
      }
      %first = arith.cmpi eq, %t, %c0 : index
      scf.if %first {
        %total = memref.load %partial[%c0] : memref<64xf32, #gpu.address_space<workgroup>>
        memref.store %total, %out[%c0] : memref<1xf32>
      }
      gpu.return
    }
  }
  func.func @main() {
    %c1 = arith.constant 1 : index
    %c64 = arith.constant 64 : index
    %in = gpu.alloc () : memref<64xf32>
    %out = gpu.alloc () : memref<1xf32>
    gpu.launch_func @kernels::@tree_sum blocks in (%c1, %c1, %c1) threads in (%c64, %c1, %c1)
        args(%in : memref<64xf32>, %out : memref<1xf32>)
    gpu.dealloc %in : memref<64xf32>
    gpu.dealloc %out : memref<1xf32>
    return
  }
}
