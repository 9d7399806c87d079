// gpu.subgroup_reduce (uniform, i32), which MLIR 22 lowers only through NVIDIA's redux.sync
// (sm_80 and later), emulated on the host; checked in tests/runtime/host_semantics.rs.
module attributes {gpu.container_module} {
  gpu.module @subgroup_reduce [#nvvm.target<chip = "sm_80">] {
    // out[6 i + k] for thread i: its subgroup's add, maxsi, minsi, and, or, xor of x (the kinds
    // MLIR 22 lowers to redux.sync; mul, minui and maxui it does not).
    gpu.func @reduce_subgroup(%x: memref<?xi32>, %out: memref<?xi32>) kernel {
      %c1 = arith.constant 1 : index
      %c2 = arith.constant 2 : index
      %c3 = arith.constant 3 : index
      %c4 = arith.constant 4 : index
      %c5 = arith.constant 5 : index
      %c6 = arith.constant 6 : index
      %t = gpu.thread_id x
      %dx = gpu.block_dim x
      %b = gpu.block_id x
      %first = arith.muli %b, %dx : index
      %i = arith.addi %first, %t : index
      %v = memref.load %x[%i] : memref<?xi32>
      %add = gpu.subgroup_reduce add %v uniform : (i32) -> i32
      %max = gpu.subgroup_reduce maxsi %v uniform : (i32) -> i32
      %minu = gpu.subgroup_reduce minsi %v uniform : (i32) -> i32
      %and = gpu.subgroup_reduce and %v uniform : (i32) -> i32
      %or = gpu.subgroup_reduce or %v uniform : (i32) -> i32
      %xor = gpu.subgroup_reduce xor %v uniform : (i32) -> i32
      %o = arith.muli %i, %c6 : index
      %o1 = arith.addi %o, %c1 : index
      %o2 = arith.addi %o, %c2 : index
      %o3 = arith.addi %o, %c3 : index
      %o4 = arith.addi %o, %c4 : index
      %o5 = arith.addi %o, %c5 : index
      memref.store %add, %out[%o] : memref<?xi32>
      memref.store %max, %out[%o1] : memref<?xi32>
      memref.store %minu, %out[%o2] : memref<?xi32>
      memref.store %and, %out[%o3] : memref<?xi32>
      memref.store %or, %out[%o4] : memref<?xi32>
      memref.store %xor, %out[%o5] : memref<?xi32>
      gpu.return
    }
  }
}
