// The correct twin of bugs/read_of_memory_never_written.mlir: the program fills all 16 input
// elements. Runs checked with no report and this output.
module attributes {gpu.container_module} {
  gpu.module @kernels {
    gpu.func @double(%in: memref<16xf32>, %out: memref<16xf32>) kernel {
      %t = gpu.thread_id x
      %v = memref.load %in[%t] : memref<16xf32>
      %w = arith.addf %v, %v : f32
      memref.store %w, %out[%t] : memref<16xf32>
      gpu.return
    }
  }
  func.func @main() {
    %c1 = arith.constant 1 : index
    %c16 = arith.constant 16 : index
    %one = arith.constant 1.0 : f32
    %in = gpu.alloc () : memref<16xf32>
    gpu.memset %in, %one : memref<16xf32>, f32
    %out = gpu.alloc () : memref<16xf32>
    gpu.launch_func @kernels::@double blocks in (%c1, %c1, %c1)
        threads in (%c16, %c1, %c1) args(%in : memref<16xf32>, %out : memref<16xf32>)
    %host = memref.alloc() : memref<16xf32>
    gpu.memcpy %host, %out : memref<16xf32>, memref<16xf32>
    %cast = memref.cast %host : memref<16xf32> to memref<*xf32>
    call @printMemrefF32(%cast) : (memref<*xf32>) -> ()
    // CHECK: [2,   2,   2,   2,   2,   2,   2,   2,   2,   2,   2,   2,   2,   2,   2,   2]
    memref.dealloc %host : memref<16xf32>
    gpu.dealloc %in : memref<16xf32>
    gpu.dealloc %out : memref<16xf32>
    return
  }
  func.func private @printMemrefF32(memref<*xf32>)
}
