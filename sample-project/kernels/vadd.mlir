// c[i] = a[i] + b[i]: the gpu dialect with dynamically sized memrefs. Launched with 256 threads
// per block (`known_block_size`: Vulkan fixes the workgroup size when the kernel is compiled).
module attributes {gpu.container_module} {
  gpu.module @vadd [#nvvm.target<chip = "sm_80">, #rocdl.target<chip = "gfx90a">] {
    gpu.func @vadd(%a: memref<?xf32>, %b: memref<?xf32>, %c: memref<?xf32>, %n: index) kernel
        attributes {known_block_size = array<i32: 256, 1, 1>} {
      %block = gpu.block_id x
      %block_dim = gpu.block_dim x
      %thread = gpu.thread_id x
      %base = arith.muli %block, %block_dim : index
      %i = arith.addi %base, %thread : index
      %in_range = arith.cmpi ult, %i, %n : index
      scf.if %in_range {
        %x = memref.load %a[%i] : memref<?xf32>
        %y = memref.load %b[%i] : memref<?xf32>
        %sum = arith.addf %x, %y : f32
        memref.store %sum, %c[%i] : memref<?xf32>
      }
      gpu.return
    }
  }
}
