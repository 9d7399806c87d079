// Kernels the Vulkan target runs that MLIR's SPIR-V lowering alone cannot (`tests/runtime/
// vulkan.rs`, against the host target): gpu.printf and cf.assert, which a Vulkan shader has no
// instruction for (a log buffer the runtime reads once the launch has run), and shuffles of
// every mode at a width below the subgroup's (the subgroup's own shuffle).
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

  gpu.module @vk_shuffle {
    // out[4 i + m] = shuffle m (xor, up, down, idx) of x over segments of 4 lanes, offset 1
    // (idx: lane 1); -1000 where the source lane is outside the segment.
    gpu.func @shuffle_modes(%x: memref<?xi32>, %out: memref<?xi32>) kernel {
      %i = gpu.global_id x
      %v = memref.load %x[%i] : memref<?xi32>
      %width = arith.constant 4 : i32
      %one = arith.constant 1 : i32
      %invalid = arith.constant -1000 : i32
      %c4 = arith.constant 4 : index
      %base = arith.muli %i, %c4 : index
      %x0, %ok0 = gpu.shuffle xor %v, %one, %width : i32
      %x1, %ok1 = gpu.shuffle up %v, %one, %width : i32
      %x2, %ok2 = gpu.shuffle down %v, %one, %width : i32
      %x3, %ok3 = gpu.shuffle idx %v, %one, %width : i32
      %r0 = arith.select %ok0, %x0, %invalid : i32
      %r1 = arith.select %ok1, %x1, %invalid : i32
      %r2 = arith.select %ok2, %x2, %invalid : i32
      %r3 = arith.select %ok3, %x3, %invalid : i32
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c2 = arith.constant 2 : index
      %c3 = arith.constant 3 : index
      %a0 = arith.addi %base, %c0 : index
      %a1 = arith.addi %base, %c1 : index
      %a2 = arith.addi %base, %c2 : index
      %a3 = arith.addi %base, %c3 : index
      memref.store %r0, %out[%a0] : memref<?xi32>
      memref.store %r1, %out[%a1] : memref<?xi32>
      memref.store %r2, %out[%a2] : memref<?xi32>
      memref.store %r3, %out[%a3] : memref<?xi32>
      gpu.return
    }
  }
}
