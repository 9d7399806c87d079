// out[block] = the sum of the block's 256 elements of `in`, with gpu.all_reduce (a subgroup
// reduction, then one across the block's subgroups, on every target); and an empty kernel, to
// time a launch. Launch block_total with 256 threads per block.
module attributes {gpu.container_module} {
  gpu.module @block_total [#nvvm.target<chip = "sm_80">, #rocdl.target<chip = "gfx90a">] {
    gpu.func @block_total(%in: memref<?xf32>, %out: memref<?xf32>, %n: index) kernel
        attributes {known_block_size = array<i32: 256, 1, 1>} {
      %c0 = arith.constant 0 : index
      %zero = arith.constant 0.0 : f32
      %block = gpu.block_id x
      %thread = gpu.thread_id x
      %i = gpu.global_id x
      %in_range = arith.cmpi ult, %i, %n : index
      %value = scf.if %in_range -> f32 {
        %v = memref.load %in[%i] : memref<?xf32>
        scf.yield %v : f32
      } else {
        scf.yield %zero : f32
      }
      %total = gpu.all_reduce add %value uniform {} : (f32) -> (f32)
      %first = arith.cmpi eq, %thread, %c0 : index
      scf.if %first {
        memref.store %total, %out[%block] : memref<?xf32>
      }
      gpu.return
    }
    gpu.func @nothing() kernel {
      gpu.return
    }
  }
}
