// c = a * b for n x n row-major matrices (n a multiple of 16): 16 x 16 tiles of a and b staged in
// workgroup memory, with a gpu.barrier after loading a tile and after using it. Launch a
// (n/16, n/16) grid of (16, 16) blocks.
module attributes {gpu.container_module} {
  gpu.module @matmul [#nvvm.target<chip = "sm_80">, #rocdl.target<chip = "gfx90a">] {
    gpu.func @matmul(%a: memref<?xf32>, %b: memref<?xf32>, %c: memref<?xf32>, %n: index)
        workgroup(%tile_a: memref<16x16xf32, #gpu.address_space<workgroup>>,
                  %tile_b: memref<16x16xf32, #gpu.address_space<workgroup>>) kernel {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c16 = arith.constant 16 : index
      %zero = arith.constant 0.0 : f32
      %tx = gpu.thread_id x
      %ty = gpu.thread_id y
      %bx = gpu.block_id x
      %by = gpu.block_id y
      %row_base = arith.muli %by, %c16 : index
      %row = arith.addi %row_base, %ty : index
      %col_base = arith.muli %bx, %c16 : index
      %col = arith.addi %col_base, %tx : index
      %tiles = arith.divui %n, %c16 : index
      %a_row = arith.muli %row, %n : index
      %sum = scf.for %t = %c0 to %tiles step %c1 iter_args(%acc = %zero) -> (f32) {
        %k_base = arith.muli %t, %c16 : index
        %a_col = arith.addi %k_base, %tx : index
        %a_index = arith.addi %a_row, %a_col : index
        %a_value = memref.load %a[%a_index] : memref<?xf32>
        memref.store %a_value, %tile_a[%ty, %tx] : memref<16x16xf32, #gpu.address_space<workgroup>>
        %b_row = arith.addi %k_base, %ty : index
        %b_row_start = arith.muli %b_row, %n : index
        %b_index = arith.addi %b_row_start, %col : index
        %b_value = memref.load %b[%b_index] : memref<?xf32>
        memref.store %b_value, %tile_b[%ty, %tx] : memref<16x16xf32, #gpu.address_space<workgroup>>
        gpu.barrier
        %partial = scf.for %k = %c0 to %c16 step %c1 iter_args(%p = %acc) -> (f32) {
          %x = memref.load %tile_a[%ty, %k] : memref<16x16xf32, #gpu.address_space<workgroup>>
          %y = memref.load %tile_b[%k, %tx] : memref<16x16xf32, #gpu.address_space<workgroup>>
          %product = arith.mulf %x, %y : f32
          %next = arith.addf %p, %product : f32
          scf.yield %next : f32
        }
        gpu.barrier
        scf.yield %partial : f32
      }
      %c_index = arith.addi %a_row, %col : index
      memref.store %sum, %c[%c_index] : memref<?xf32>
      gpu.return
    }
  }
}
