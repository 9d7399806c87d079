// A seeded bug for `gpu-build run --check` (gpu-build/tests/command/check.rs): 4 blocks of 16
// threads each write their block's number into `out[15 * block + thread]`: the block stride
// should be 16, so the last thread of each block and the first of the next write the same
// element (a write-write race between blocks, found where the checked object tells the runtime
// of a whole row of threads at once). Which pair of blocks the report names depends on the
// order they ran in. Twin: twins/blocks_of_their_own.mlir.
// CHECKS: races
// EXPECT: global memory race: store of 4 bytes at {FILE}:22:7, block … thread … was written by block … thread … at {FILE}:22:7, with nothing ordering the two blocks
module attributes {gpu.container_module} {
  gpu.module @kernels {
    gpu.func @fill(%out: memref<64xf32>) kernel {
      %t = gpu.thread_id x
      %b = gpu.block_id x
      %c15 = arith.constant 15 : index
      %base = arith.muli %b, %c15 : index
      %i = arith.addi %base, %t : index
      %bi = arith.index_cast %b : index to i32
      %one = arith.constant 1 : i32
      %value = arith.addi %bi, %one : i32
      %vf = arith.sitofp %value : i32 to f32
      // Should be 16 * block + thread.
      memref.store %vf,
        %out[%i] : memref<64xf32>
      gpu.return
    }
  }
  func.func @main() {
    %c1 = arith.constant 1 : index
    %c4 = arith.constant 4 : index
    %c16 = arith.constant 16 : index
    %out = gpu.alloc () : memref<64xf32>
    gpu.launch_func @kernels::@fill blocks in (%c4, %c1, %c1)
        threads in (%c16, %c1, %c1) args(%out : memref<64xf32>)
    gpu.dealloc %out : memref<64xf32>
    return
  }
}
