// Kernels the Vulkan target runs that MLIR's SPIR-V lowering alone cannot (`tests/runtime/
// vulkan.rs`, against the host target): gpu.printf and cf.assert, which a Vulkan shader has no
// instruction for (a log buffer the runtime reads once the launch has run).
module attributes {gpu.container_module} {
  gpu.module @vk_log {
    // out[i] = i for i < n; a thread past n fails its assertion and stores nothing.
    gpu.func @checked_store(%out: memref<?xi32>, %n: index, %verbose: i1) kernel {
      %i = gpu.global_id x
      %in_range = arith.cmpi ult, %i, %n : index
      cf.assert %in_range, "index in range"
      %v = arith.index_cast %i : index to i32
      memref.store %v, %out[%i] : memref<?xi32>
      scf.if %verbose {
        gpu.printf "stored %d at %lld\n", %v, %i : i32, index
      }
      gpu.return
    }
  }
}
