// A 2-D 5-point stencil (one Jacobi step): out = 0.5 * in + 0.125 * (the four neighbours) on
// the interior, out = in on the border, for a row-major rows x cols grid passed as 2-D memrefs.
// Launch a (cols/16, rows/16) grid of (16, 16) blocks, the size it declares.
module attributes {gpu.container_module} {
  gpu.module @stencil [#nvvm.target<chip = "sm_80">, #rocdl.target<chip = "gfx90a">] {
    gpu.func @jacobi(%in: memref<?x?xf32>, %out: memref<?x?xf32>) kernel
        attributes {known_block_size = array<i32: 16, 16, 1>} {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %half = arith.constant 0.5 : f32
      %eighth = arith.constant 0.125 : f32
      %rows = memref.dim %in, %c0 : memref<?x?xf32>
      %cols = memref.dim %in, %c1 : memref<?x?xf32>
      %col = gpu.global_id x
      %row = gpu.global_id y
      %last_row = arith.subi %rows, %c1 : index
      %last_col = arith.subi %cols, %c1 : index
      %top = arith.cmpi eq, %row, %c0 : index
      %bottom = arith.cmpi uge, %row, %last_row : index
      %left = arith.cmpi eq, %col, %c0 : index
      %right = arith.cmpi uge, %col, %last_col : index
      %vertical = arith.ori %top, %bottom : i1
      %horizontal = arith.ori %left, %right : i1
      %border = arith.ori %vertical, %horizontal : i1
      %centre = memref.load %in[%row, %col] : memref<?x?xf32>
      %value = scf.if %border -> f32 {
        scf.yield %centre : f32
      } else {
        %up_row = arith.subi %row, %c1 : index
        %down_row = arith.addi %row, %c1 : index
        %left_col = arith.subi %col, %c1 : index
        %right_col = arith.addi %col, %c1 : index
        %up = memref.load %in[%up_row, %col] : memref<?x?xf32>
        %down = memref.load %in[%down_row, %col] : memref<?x?xf32>
        %west = memref.load %in[%row, %left_col] : memref<?x?xf32>
        %east = memref.load %in[%row, %right_col] : memref<?x?xf32>
        %ud = arith.addf %up, %down : f32
        %we = arith.addf %west, %east : f32
        %around = arith.addf %ud, %we : f32
        %scaled = arith.mulf %around, %eighth : f32
        %kept = arith.mulf %centre, %half : f32
        %next = arith.addf %kept, %scaled : f32
        scf.yield %next : f32
      }
      memref.store %value, %out[%row, %col] : memref<?x?xf32>
      gpu.return
    }
  }
}
