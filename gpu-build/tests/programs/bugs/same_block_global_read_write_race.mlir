// A seeded bug for `gpu-build run --check` (gpu-build/tests/command/check.rs): each thread of a
// block reads its right neighbour's element of a global buffer and writes its own, in place,
// doubled, with no barrier between the reads and the writes: thread i writes element i, which
// thread i - 1 read, between the same two barriers.
// Twin: twins/same_block_global_barrier.mlir.
// CHECKS: races
// EXPECT: global memory race: store of 4 bytes at {FILE}:21:7, block (0, 0, 0), thread (1, 0, 0): byte 4 of argument `data` (64 bytes at … was read by thread (0, 0, 0) of the same block at {FILE}:18:12, between the same two barriers
module attributes {gpu.container_module} {
  gpu.module @kernels {
    gpu.func @shift_left_in_place(%data: memref<16xf32>) kernel {
      %t = gpu.thread_id x
      %c1 = arith.constant 1 : index
      %c15 = arith.constant 15 : index
      %next = arith.addi %t, %c1 : index
      %last = arith.cmpi eq, %t, %c15 : index
      %from = arith.select %last, %t, %next : index
      // Thread t reads element t + 1 ...
      %v = memref.load %data[%from] : memref<16xf32>
      %w = arith.addf %v, %v : f32
      // ... which thread t + 1 overwrites: a gpu.barrier belongs between.
      memref.store %w, %data[%t] : memref<16xf32>
      gpu.return
    }
  }
  func.func @main() {
    %c1 = arith.constant 1 : index
    %c16 = arith.constant 16 : index
    %one = arith.constant 1.0 : f32
    %data = gpu.alloc () : memref<16xf32>
    gpu.memset %data, %one : memref<16xf32>, f32
    gpu.launch_func @kernels::@shift_left_in_place blocks in (%c1, %c1, %c1)
        threads in (%c16, %c1, %c1) args(%data : memref<16xf32>)
    gpu.dealloc %data : memref<16xf32>
    return
  }
}
