// Subgroup matrix multiply-accumulate (gpu.subgroup_mma_*), which MLIR 22 lowers to NVIDIA's
// WMMA and the host emulates; checked in tests/runtime/host_semantics.rs. Subgroup s of the grid (its
// linear thread id / 32) works on tile s: rows 16 s to 16 s + 15 (8 s to 8 s + 7 for f64) of
// each matrix.
module attributes {gpu.container_module} {
  gpu.module @mma [#nvvm.target<chip = "sm_80">] {
    // d = a b + c (f16 inputs, f32 accumulator); e = max(2 d, c) through elementwise ops and
    // a constant fragment.
    gpu.func @multiply_f32(%a: memref<?x16xf16>, %b: memref<?x16xf16>, %c: memref<?x16xf32>,
                           %d: memref<?x16xf32>, %e: memref<?x16xf32>) kernel {
      %c0 = arith.constant 0 : index
      %c16 = arith.constant 16 : index
      %c32 = arith.constant 32 : index
      %t = gpu.thread_id x
      %bid = gpu.block_id x
      %bdim = gpu.block_dim x
      %first = arith.muli %bid, %bdim : index
      %i = arith.addi %first, %t : index
      %s = arith.divui %i, %c32 : index
      %row = arith.muli %s, %c16 : index
      %A = gpu.subgroup_mma_load_matrix %a[%row, %c0] {leadDimension = 16 : index} : memref<?x16xf16> -> !gpu.mma_matrix<16x16xf16, "AOp">
      %B = gpu.subgroup_mma_load_matrix %b[%row, %c0] {leadDimension = 16 : index} : memref<?x16xf16> -> !gpu.mma_matrix<16x16xf16, "BOp">
      %C = gpu.subgroup_mma_load_matrix %c[%row, %c0] {leadDimension = 16 : index} : memref<?x16xf32> -> !gpu.mma_matrix<16x16xf32, "COp">
      %D = gpu.subgroup_mma_compute %A, %B, %C : !gpu.mma_matrix<16x16xf16, "AOp">, !gpu.mma_matrix<16x16xf16, "BOp"> -> !gpu.mma_matrix<16x16xf32, "COp">
      gpu.subgroup_mma_store_matrix %D, %d[%row, %c0] {leadDimension = 16 : index} : !gpu.mma_matrix<16x16xf32, "COp">, memref<?x16xf32>
      %two = arith.constant 2.0 : f32
      %K = gpu.subgroup_mma_constant_matrix %two : !gpu.mma_matrix<16x16xf32, "COp">
      %D2 = gpu.subgroup_mma_elementwise mulf %D, %K : (!gpu.mma_matrix<16x16xf32, "COp">, !gpu.mma_matrix<16x16xf32, "COp">) -> !gpu.mma_matrix<16x16xf32, "COp">
      %E = gpu.subgroup_mma_elementwise maxf %D2, %C : (!gpu.mma_matrix<16x16xf32, "COp">, !gpu.mma_matrix<16x16xf32, "COp">) -> !gpu.mma_matrix<16x16xf32, "COp">
      gpu.subgroup_mma_store_matrix %E, %e[%row, %c0] {leadDimension = 16 : index} : !gpu.mma_matrix<16x16xf32, "COp">, memref<?x16xf32>
      gpu.return
    }

    // d = transpose(a tile) b + c, all f16: A read column-major, stored row-major.
    gpu.func @multiply_transposed_f16(%a: memref<?x16xf16>, %b: memref<?x16xf16>, %c: memref<?x16xf16>,
                                      %d: memref<?x16xf16>) kernel {
      %c0 = arith.constant 0 : index
      %c16 = arith.constant 16 : index
      %c32 = arith.constant 32 : index
      %t = gpu.thread_id x
      %bid = gpu.block_id x
      %bdim = gpu.block_dim x
      %first = arith.muli %bid, %bdim : index
      %i = arith.addi %first, %t : index
      %s = arith.divui %i, %c32 : index
      %row = arith.muli %s, %c16 : index
      %A = gpu.subgroup_mma_load_matrix %a[%row, %c0] {leadDimension = 16 : index, transpose} : memref<?x16xf16> -> !gpu.mma_matrix<16x16xf16, "AOp">
      %B = gpu.subgroup_mma_load_matrix %b[%row, %c0] {leadDimension = 16 : index} : memref<?x16xf16> -> !gpu.mma_matrix<16x16xf16, "BOp">
      %C = gpu.subgroup_mma_load_matrix %c[%row, %c0] {leadDimension = 16 : index} : memref<?x16xf16> -> !gpu.mma_matrix<16x16xf16, "COp">
      %D = gpu.subgroup_mma_compute %A, %B, %C {a_transpose} : !gpu.mma_matrix<16x16xf16, "AOp">, !gpu.mma_matrix<16x16xf16, "BOp"> -> !gpu.mma_matrix<16x16xf16, "COp">
      gpu.subgroup_mma_store_matrix %D, %d[%row, %c0] {leadDimension = 16 : index} : !gpu.mma_matrix<16x16xf16, "COp">, memref<?x16xf16>
      gpu.return
    }

    // d = a b + c in f64 (m8n8k4): a is 8x4, b 4x8, c and d 8x8 per tile.
    gpu.func @multiply_f64(%a: memref<?x4xf64>, %b: memref<?x8xf64>, %c: memref<?x8xf64>,
                           %d: memref<?x8xf64>) kernel {
      %c0 = arith.constant 0 : index
      %c4 = arith.constant 4 : index
      %c8 = arith.constant 8 : index
      %c32 = arith.constant 32 : index
      %t = gpu.thread_id x
      %bid = gpu.block_id x
      %bdim = gpu.block_dim x
      %first = arith.muli %bid, %bdim : index
      %i = arith.addi %first, %t : index
      %s = arith.divui %i, %c32 : index
      %row8 = arith.muli %s, %c8 : index
      %row4 = arith.muli %s, %c4 : index
      %A = gpu.subgroup_mma_load_matrix %a[%row8, %c0] {leadDimension = 4 : index} : memref<?x4xf64> -> !gpu.mma_matrix<8x4xf64, "AOp">
      %B = gpu.subgroup_mma_load_matrix %b[%row4, %c0] {leadDimension = 8 : index} : memref<?x8xf64> -> !gpu.mma_matrix<4x8xf64, "BOp">
      %C = gpu.subgroup_mma_load_matrix %c[%row8, %c0] {leadDimension = 8 : index} : memref<?x8xf64> -> !gpu.mma_matrix<8x8xf64, "COp">
      %D = gpu.subgroup_mma_compute %A, %B, %C : !gpu.mma_matrix<8x4xf64, "AOp">, !gpu.mma_matrix<4x8xf64, "BOp"> -> !gpu.mma_matrix<8x8xf64, "COp">
      gpu.subgroup_mma_store_matrix %D, %d[%row8, %c0] {leadDimension = 8 : index} : !gpu.mma_matrix<8x8xf64, "COp">, memref<?x8xf64>
      gpu.return
    }
  }
}
