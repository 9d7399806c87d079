// A seeded bug for `gpu-build run --check` (gpu-build/tests/command/check.rs): each thread sums
// its row of `n` (8) with a loop of its own that runs to `n` inclusive, one element too far:
// the last thread's last read is past the buffer. The checked object tests a thread loop with a loop
// inside once before it (version_checked_loops.cpp: the addresses of both loops' iterations), and the
// last thread's reach must fail that test.
// EXPECT: out-of-bounds load of 4 bytes at {FILE}:19:14, block (0, 0, 0), thread (7, 0, 0): address … is 0 bytes past the end of argument `in` (256 bytes
// EXPECT-COUNT: 1
module attributes {gpu.container_module} {
  gpu.module @kernels {
    gpu.func @row_sums(%in: memref<64xf32>, %out: memref<8xf32>, %n: index) kernel {
      %t = gpu.thread_id x
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %zero = arith.constant 0.0 : f32
      %base = arith.muli %t, %n : index
      %end = arith.addi %n, %c1 : index
      %sum = scf.for %k = %c0 to %end step %c1 iter_args(%acc = %zero) -> (f32) {
        %i = arith.addi %base, %k : index
        %v = memref.load %in[%i] : memref<64xf32>
        %next = arith.addf %acc, %v : f32
        scf.yield %next : f32
      }
      memref.store %sum, %out[%t] : memref<8xf32>
      gpu.return
    }
  }
  func.func @main() {
    %c1 = arith.constant 1 : index
    %c8 = arith.constant 8 : index
    %in = gpu.alloc () : memref<64xf32>
    %out = gpu.alloc () : memref<8xf32>
    gpu.launch_func @kernels::@row_sums blocks in (%c1, %c1, %c1) threads in (%c8, %c1, %c1)
        args(%in : memref<64xf32>, %out : memref<8xf32>, %c8 : index)
    gpu.dealloc %in : memref<64xf32>
    gpu.dealloc %out : memref<8xf32>
    return
  }
}
