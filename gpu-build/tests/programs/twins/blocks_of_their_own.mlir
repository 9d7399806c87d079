// The correct twin of bugs/blocks_overlap_by_one_element.mlir: each block writes its own 16
// elements. Runs checked with no report and this output.
module attributes {gpu.container_module} {
  gpu.module @kernels {
    gpu.func @fill(%out: memref<64xf32>) kernel {
      %t = gpu.thread_id x
      %b = gpu.block_id x
      %c16 = arith.constant 16 : index
      %base = arith.muli %b, %c16 : index
      %i = arith.addi %base, %t : index
      %bi = arith.index_cast %b : index to i32
      %one = arith.constant 1 : i32
      %value = arith.addi %bi, %one : i32
      %vf = arith.sitofp %value : i32 to f32
      memref.store %vf, %out[%i] : memref<64xf32>
      gpu.return
    }
  }
  func.func @main() {
    %c1 = arith.constant 1 : index
    %c4 = arith.constant 4 : index
    %c16 = arith.constant 16 : index
    %out = gpu.alloc () : memref<64xf32>
    gpu.launch_func @kernels::@fill blocks in (%c4, %c1, %c1)
        threads in (%c16, %c1, %c1) args(%out : memref<64xf32>)
    %host = memref.alloc() : memref<64xf32>
    gpu.memcpy %host, %out : memref<64xf32>, memref<64xf32>
    %cast = memref.cast %host : memref<64xf32> to memref<*xf32>
    call @printMemrefF32(%cast) : (memref<*xf32>) -> ()
    // CHECK: [1,   1,   1,   1,   1,   1,   1,   1,   1,   1,   1,   1,   1,   1,   1,   1,   2,
    // CHECK-SAME: 4,   4,   4]
    memref.dealloc %host : memref<64xf32>
    gpu.dealloc %out : memref<64xf32>
    return
  }
  func.func private @printMemrefF32(memref<*xf32>)
}
