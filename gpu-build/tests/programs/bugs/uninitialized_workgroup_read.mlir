// A seeded bug for `gpu-build run --check` (gpu-build/tests/command/check.rs): a block-wide
// step whose second block writes elements 0 to 6 of an 8-element workgroup array but reads
// all eight after the barrier: its element 7 was never written.
// EXPECT: uninitialized workgroup read: load of 4 bytes at {FILE}:26:12, block (1, 0, 0), thread (7, 0, 0): byte 28 of `__wg_last_of_row_0` was not written since the block began
// EXPECT-COUNT: 1
module attributes {gpu.container_module} {
  gpu.module @kernels {
    gpu.func @last_of_row(%in: memref<16xf32>, %out: memref<16xf32>)
        workgroup(%row: memref<8xf32, #gpu.address_space<workgroup>>) kernel {
      %t = gpu.thread_id x
      %b = gpu.block_id x
      %c7 = arith.constant 7 : index
      %c8 = arith.constant 8 : index
      %base = arith.muli %b, %c8 : index
      %i = arith.addi %base, %t : index
      // Block 0 writes all eight; block 1 forgets its last.
      %below = arith.cmpi ult, %t, %c7 : index
      %c0 = arith.constant 0 : index
      %first = arith.cmpi eq, %b, %c0 : index
      %writes = arith.ori %below, %first : i1
      scf.if %writes {
        %v = memref.load %in[%i] : memref<16xf32>
        memref.store %v, %row[%t] : memref<8xf32, #gpu.address_space<workgroup>>
      }
      gpu.barrier
      %w = memref.load %row[%t] : memref<8xf32, #gpu.address_space<workgroup>>
      memref.store %w, %out[%i] : memref<16xf32>
      gpu.return
    }
  }
  func.func @main() {
    %c1 = arith.constant 1 : index
    %c2 = arith.constant 2 : index
    %c8 = arith.constant 8 : index
    %in = gpu.alloc () : memref<16xf32>
    %out = gpu.alloc () : memref<16xf32>
    gpu.launch_func @kernels::@last_of_row blocks in (%c2, %c1, %c1) threads in (%c8, %c1, %c1)
        args(%in : memref<16xf32>, %out : memref<16xf32>)
    gpu.dealloc %in : memref<16xf32>
    gpu.dealloc %out : memref<16xf32>
    return
  }
}
