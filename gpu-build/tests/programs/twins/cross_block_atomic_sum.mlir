// The correct twin of bugs/cross_block_write_race.mlir: the blocks add their weighted sums to
// `total[0]` atomically. Runs checked with no report and this output.
module attributes {gpu.container_module} {
  gpu.module @kernels {
    gpu.func @row_sums(%in: memref<4x8xf32>, %total: memref<1xf32>) kernel {
      %row = gpu.block_id x
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c8 = arith.constant 8 : index
      %zero = arith.constant 0.0 : f32
      %sum = scf.for %k = %c0 to %c8 step %c1 iter_args(%acc = %zero) -> f32 {
        %v = memref.load %in[%row, %k] : memref<4x8xf32>
        %next = arith.addf %acc, %v : f32
        scf.yield %next : f32
      }
      %weight = arith.addi %row, %c1 : index
      %r = arith.index_cast %weight : index to i32
      %rf = arith.sitofp %r : i32 to f32
      %weighted = arith.mulf %sum, %rf : f32
      %old = memref.atomic_rmw addf %weighted, %total[%c0] : (f32, memref<1xf32>) -> f32
      gpu.return
    }
  }
  func.func @main() {
    %c1 = arith.constant 1 : index
    %c4 = arith.constant 4 : index
    %one = arith.constant 1.0 : f32
    %zero = arith.constant 0.0 : f32
    %in = gpu.alloc () : memref<4x8xf32>
    gpu.memset %in, %one : memref<4x8xf32>, f32
    %total = gpu.alloc () : memref<1xf32>
    gpu.memset %total, %zero : memref<1xf32>, f32
    gpu.launch_func @kernels::@row_sums blocks in (%c4, %c1, %c1)
        threads in (%c1, %c1, %c1) args(%in : memref<4x8xf32>, %total : memref<1xf32>)
    %host = memref.alloc() : memref<1xf32>
    gpu.memcpy %host, %total : memref<1xf32>, memref<1xf32>
    %cast = memref.cast %host : memref<1xf32> to memref<*xf32>
    call @printMemrefF32(%cast) : (memref<*xf32>) -> ()
    // 8 * (1 + 2 + 3 + 4)
    // CHECK: [80]
    memref.dealloc %host : memref<1xf32>
    gpu.dealloc %in : memref<4x8xf32>
    gpu.dealloc %total : memref<1xf32>
    return
  }
  func.func private @printMemrefF32(memref<*xf32>)
}
