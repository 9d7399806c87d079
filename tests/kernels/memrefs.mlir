// Memref arguments of every shape a launch stub must describe: rank 0 and 3, static sizes,
// dynamic strided layouts and a static inner stride. Built for every target: the host runs them
// (tests/runtime/host_semantics.rs) and the ABI test checks the GPU objects' parameter lists.
module attributes {gpu.container_module} {
  gpu.module @memrefs [#nvvm.target<chip = "sm_80">, #rocdl.target<chip = "gfx90a">] {
    // x[i][j][k] = 2 * x[i][j][k] + (100 i + 10 j + k), for thread (k, j, i) of one block.
    gpu.func @tag3(%x: memref<?x?x?xf32>) kernel {
      %k = gpu.thread_id x
      %j = gpu.thread_id y
      %i = gpu.thread_id z
      %c10 = arith.constant 10 : index
      %c100 = arith.constant 100 : index
      %hi = arith.muli %i, %c100 : index
      %mid = arith.muli %j, %c10 : index
      %sum = arith.addi %hi, %mid : index
      %tag = arith.addi %sum, %k : index
      %tag_i = arith.index_cast %tag : index to i32
      %tag_f = arith.sitofp %tag_i : i32 to f32
      %v = memref.load %x[%i, %j, %k] : memref<?x?x?xf32>
      %twice = arith.addf %v, %v : f32
      %r = arith.addf %twice, %tag_f : f32
      memref.store %r, %x[%i, %j, %k] : memref<?x?x?xf32>
      gpu.return
    }
    // x[i][j] *= s for thread (j, i), through any strides and offset.
    gpu.func @scale_strided(%x: memref<?x?xf32, strided<[?, ?], offset: ?>>, %s: f32) kernel {
      %j = gpu.thread_id x
      %i = gpu.thread_id y
      %v = memref.load %x[%i, %j] : memref<?x?xf32, strided<[?, ?], offset: ?>>
      %r = arith.mulf %v, %s : f32
      memref.store %r, %x[%i, %j] : memref<?x?xf32, strided<[?, ?], offset: ?>>
      gpu.return
    }
    // Rows of any stride, elements adjacent: x[i][j] += 1.
    gpu.func @bump_rows(%x: memref<?x?xf32, strided<[?, 1], offset: ?>>) kernel {
      %j = gpu.thread_id x
      %i = gpu.thread_id y
      %one = arith.constant 1.0 : f32
      %v = memref.load %x[%i, %j] : memref<?x?xf32, strided<[?, 1], offset: ?>>
      %r = arith.addf %v, %one : f32
      memref.store %r, %x[%i, %j] : memref<?x?xf32, strided<[?, 1], offset: ?>>
      gpu.return
    }
    // A static 4 x 8 matrix: x[i][j] = 8 i + j.
    gpu.func @fixed(%x: memref<4x8xi32>) kernel {
      %j = gpu.thread_id x
      %i = gpu.thread_id y
      %c8 = arith.constant 8 : index
      %row = arith.muli %i, %c8 : index
      %at = arith.addi %row, %j : index
      %v = arith.index_cast %at : index to i32
      memref.store %v, %x[%i, %j] : memref<4x8xi32>
      gpu.return
    }
    // A rank-0 memref: *x = v.
    gpu.func @store0(%x: memref<f64>, %v: f64) kernel {
      memref.store %v, %x[] : memref<f64>
      gpu.return
    }
  }
}
