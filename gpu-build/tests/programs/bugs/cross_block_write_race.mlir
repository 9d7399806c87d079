// A seeded bug for `gpu-build run --check` (gpu-build/tests/command/check.rs): every block
// stores its row's sum, weighted by the row's number plus one, to `total[0]` instead of adding
// it atomically: the blocks race on the one element (a write-write race between blocks, which
// compute-sanitizer's racecheck does not look for: it sees shared memory only). Which two
// blocks the report names depends on the order they ran in. Twin:
// twins/cross_block_atomic_sum.mlir.
// CHECKS: races
// EXPECT: global memory race: store of 4 bytes at {FILE}:26:7, block … thread (0, 0, 0): byte 0 of argument `total` (4 bytes at … was written by block … thread (0, 0, 0) at {FILE}:26:7, with nothing ordering the two blocks
module attributes {gpu.container_module} {
  gpu.module @kernels {
    gpu.func @row_sums(%in: memref<4x8xf32>, %total: memref<1xf32>) kernel {
      %row = gpu.block_id x
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c8 = arith.constant 8 : index
      %zero = arith.constant 0.0 : f32
      %sum = scf.for %k = %c0 to %c8 step %c1 iter_args(%acc = %zero) -> f32 {
        %v = memref.load %in[%row, %k] : memref<4x8xf32>
        %next = arith.addf %acc, %v : f32
        scf.yield %next : f32
      }
      %weight = arith.addi %row, %c1 : index
      %r = arith.index_cast %weight : index to i32
      %rf = arith.sitofp %r : i32 to f32
      %weighted = arith.mulf %sum, %rf : f32
      memref.store %weighted, %total[%c0] : memref<1xf32>
      gpu.return
    }
  }
  func.func @main() {
    %c1 = arith.constant 1 : index
    %c4 = arith.constant 4 : index
    %one = arith.constant 1.0 : f32
    %zero = arith.constant 0.0 : f32
    %in = gpu.alloc () : memref<4x8xf32>
    gpu.memset %in, %one : memref<4x8xf32>, f32
    %total = gpu.alloc () : memref<1xf32>
    gpu.memset %total, %zero : memref<1xf32>, f32
    gpu.launch_func @kernels::@row_sums blocks in (%c4, %c1, %c1)
        threads in (%c1, %c1, %c1) args(%in : memref<4x8xf32>, %total : memref<1xf32>)
    gpu.dealloc %in : memref<4x8xf32>
    gpu.dealloc %total : memref<1xf32>
    return
  }
}
