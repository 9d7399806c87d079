// c = a * b for row-major matrices a (m x k), b (k x n), c (m x n), every size a multiple of 16,
// passed as 2-D memrefs (the sizes come from their descriptors): 16 x 16 tiles of a and b staged
// in workgroup memory, with a gpu.barrier after loading a tile and after using it. Launch an
// (n/16, m/16) grid of (16, 16) blocks, the size it declares. The multiply-add is marked
// `fastmath<contract>`: it may be one fused multiply-add, rounded once, as OpenCL C and CUDA
// compile `a * b + c` by default; without the flag every target keeps the two roundings.
module attributes {gpu.container_module} {
  gpu.module @matmul [#nvvm.target<chip = "sm_80">, #rocdl.target<chip = "gfx90a">] {
    gpu.func @matmul(%a: memref<?x?xf32>, %b: memref<?x?xf32>, %c: memref<?x?xf32>)
        workgroup(%tile_a: memref<16x16xf32, #gpu.address_space<workgroup>>,
                  %tile_b: memref<16x16xf32, #gpu.address_space<workgroup>>) kernel
        attributes {known_block_size = array<i32: 16, 16, 1>} {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c16 = arith.constant 16 : index
      %zero = arith.constant 0.0 : f32
      %k_size = memref.dim %a, %c1 : memref<?x?xf32>
      %tx = gpu.thread_id x
      %ty = gpu.thread_id y
      %bx = gpu.block_id x
      %by = gpu.block_id y
      %row_base = arith.muli %by, %c16 : index
      %row = arith.addi %row_base, %ty : index
      %col_base = arith.muli %bx, %c16 : index
      %col = arith.addi %col_base, %tx : index
      %tiles = arith.divui %k_size, %c16 : index
      %sum = scf.for %t = %c0 to %tiles step %c1 iter_args(%acc = %zero) -> (f32) {
        %k_base = arith.muli %t, %c16 : index
        %a_col = arith.addi %k_base, %tx : index
        %a_value = memref.load %a[%row, %a_col] : memref<?x?xf32>
        memref.store %a_value, %tile_a[%ty, %tx] : memref<16x16xf32, #gpu.address_space<workgroup>>
        %b_row = arith.addi %k_base, %ty : index
        %b_value = memref.load %b[%b_row, %col] : memref<?x?xf32>
        memref.store %b_value, %tile_b[%ty, %tx] : memref<16x16xf32, #gpu.address_space<workgroup>>
        gpu.barrier
        %partial = scf.for %k = %c0 to %c16 step %c1 iter_args(%p = %acc) -> (f32) {
          %x = memref.load %tile_a[%ty, %k] : memref<16x16xf32, #gpu.address_space<workgroup>>
          %y = memref.load %tile_b[%k, %tx] : memref<16x16xf32, #gpu.address_space<workgroup>>
          %product = arith.mulf %x, %y fastmath<contract> : f32
          %next = arith.addf %p, %product fastmath<contract> : f32
          scf.yield %next : f32
        }
        gpu.barrier
        scf.yield %partial : f32
      }
      memref.store %sum, %c[%row, %col] : memref<?x?xf32>
      gpu.return
    }
  }
}
