// Two gpu.modules in one file: each becomes its own Rust module (`scale::scale`,
// `shift::shift`), with its own objects and targets.
module attributes {gpu.container_module} {
  gpu.module @scale [#nvvm.target<chip = "sm_80">, #rocdl.target<chip = "gfx90a">] {
    // x[i] *= factor
    gpu.func @scale(%x: memref<?xf32>, %factor: f32, %n: index) kernel {
      %block = gpu.block_id x
      %size = gpu.block_dim x
      %thread = gpu.thread_id x
      %base = arith.muli %block, %size : index
      %i = arith.addi %base, %thread : index
      %in_range = arith.cmpi ult, %i, %n : index
      scf.if %in_range {
        %v = memref.load %x[%i] : memref<?xf32>
        %scaled = arith.mulf %v, %factor : f32
        memref.store %scaled, %x[%i] : memref<?xf32>
      }
      gpu.return
    }
  }
  gpu.module @shift [#nvvm.target<chip = "sm_90">, #rocdl.target<chip = "gfx1100">] {
    // y[i] = x[i] + offset, over a 2-D memref (rows x cols), one thread per element.
    gpu.func @shift(%x: memref<?x?xi32>, %y: memref<?x?xi32>, %offset: i32) kernel {
      %row = gpu.block_id y
      %col_block = gpu.block_id x
      %size = gpu.block_dim x
      %thread = gpu.thread_id x
      %base = arith.muli %col_block, %size : index
      %col = arith.addi %base, %thread : index
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %rows = memref.dim %x, %c0 : memref<?x?xi32>
      %cols = memref.dim %x, %c1 : memref<?x?xi32>
      %row_ok = arith.cmpi ult, %row, %rows : index
      %col_ok = arith.cmpi ult, %col, %cols : index
      %ok = arith.andi %row_ok, %col_ok : i1
      scf.if %ok {
        %v = memref.load %x[%row, %col] : memref<?x?xi32>
        %w = arith.addi %v, %offset : i32
        memref.store %w, %y[%row, %col] : memref<?x?xi32>
      }
      gpu.return
    }
  }
}
