// A seeded bug for `gpu-build run --check` (gpu-build/tests/command/check.rs): every thread but
// the last stores its element of a workgroup row (`t < 7` of 8 threads), then after the barrier
// every thread reads its element: element 7 was never written. The guarded stores are told to
// the shadow a row at a time (workgroup_nest.cpp's row hook), for exactly the threads the guard
// lets through.
// EXPECT: uninitialized workgroup read: load of 4 bytes at {FILE}:22:12, block (0, 0, 0), thread (7, 0, 0): byte 28 of `__wg_copy_row_0` was not written since the block began
// EXPECT-COUNT: 1
module attributes {gpu.container_module} {
  gpu.module @kernels {
    gpu.func @copy_row(%in: memref<8xf32>, %out: memref<8xf32>)
        workgroup(%row: memref<8xf32, #gpu.address_space<workgroup>>) kernel
        attributes {known_block_size = array<i32: 8, 1, 1>} {
      %t = gpu.thread_id x
      %c7 = arith.constant 7 : index
      %below = arith.cmpi ult, %t, %c7 : index
      scf.if %below {
        %v = memref.load %in[%t] : memref<8xf32>
        memref.store %v, %row[%t] : memref<8xf32, #gpu.address_space<workgroup>>
      }
      gpu.barrier
      // Thread 7 reads what no thread wrote.
      %w = memref.load %row[%t] : memref<8xf32, #gpu.address_space<workgroup>>
      memref.store %w, %out[%t] : memref<8xf32>
      gpu.return
    }
  }
  func.func @main() {
    %c1 = arith.constant 1 : index
    %c8 = arith.constant 8 : index
    %in = gpu.alloc () : memref<8xf32>
    %out = gpu.alloc () : memref<8xf32>
    gpu.launch_func @kernels::@copy_row blocks in (%c1, %c1, %c1) threads in (%c8, %c1, %c1)
        args(%in : memref<8xf32>, %out : memref<8xf32>)
    gpu.dealloc %in : memref<8xf32>
    gpu.dealloc %out : memref<8xf32>
    return
  }
}
