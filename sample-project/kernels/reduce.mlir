// out[block] = sum of the block's 256 elements of `in`: a tree reduction in workgroup memory,
// with a gpu.barrier between steps. Launch with 256 threads per block.
module attributes {gpu.container_module} {
  gpu.module @reduce [#nvvm.target<chip = "sm_80">, #rocdl.target<chip = "gfx90a">] {
    gpu.func @block_sum(%in: memref<?xf32>, %out: memref<?xf32>, %n: index)
        workgroup(%tile: memref<256xf32, #gpu.address_space<workgroup>>) kernel
        attributes {known_block_size = array<i32: 256, 1, 1>} {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c8 = arith.constant 8 : index
      %c128 = arith.constant 128 : index
      %zero = arith.constant 0.0 : f32
      %block = gpu.block_id x
      %thread = gpu.thread_id x
      %base = arith.muli %block, %c128 : index
      %base2 = arith.addi %base, %base : index
      %i = arith.addi %base2, %thread : index
      %in_range = arith.cmpi ult, %i, %n : index
      %value = scf.if %in_range -> f32 {
        %v = memref.load %in[%i] : memref<?xf32>
        scf.yield %v : f32
      } else {
        scf.yield %zero : f32
      }
      memref.store %value, %tile[%thread] : memref<256xf32, #gpu.address_space<workgroup>>
      // Strides 128, 64, ..., 1.
      scf.for %step = %c0 to %c8 step %c1 {
        gpu.barrier
        %stride = arith.shrui %c128, %step : index
        %active = arith.cmpi ult, %thread, %stride : index
        scf.if %active {
          %other = arith.addi %thread, %stride : index
          %mine = memref.load %tile[%thread] : memref<256xf32, #gpu.address_space<workgroup>>
          %theirs = memref.load %tile[%other] : memref<256xf32, #gpu.address_space<workgroup>>
          %sum = arith.addf %mine, %theirs : f32
          memref.store %sum, %tile[%thread] : memref<256xf32, #gpu.address_space<workgroup>>
        }
      }
      gpu.barrier
      %first = arith.cmpi eq, %thread, %c0 : index
      scf.if %first {
        %total = memref.load %tile[%c0] : memref<256xf32, #gpu.address_space<workgroup>>
        memref.store %total, %out[%block] : memref<?xf32>
      }
      gpu.return
    }
  }
}
