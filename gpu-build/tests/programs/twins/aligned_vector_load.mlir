// The correct twin of bugs/misaligned_vector_load.mlir: each thread loads its own group of
// four, at a multiple of 16 bytes. Runs checked with no report and this output.
module attributes {gpu.container_module} {
  gpu.module @kernels {
    gpu.func @load4(%in: memref<64xf32>, %out: memref<28xf32>) kernel {
      %t = gpu.thread_id x
      %c4 = arith.constant 4 : index
      %base = arith.muli %t, %c4 : index
      %v = vector.load %in[%base] {alignment = 16} : memref<64xf32>, vector<4xf32>
      vector.store %v, %out[%base] {alignment = 16} : memref<28xf32>, vector<4xf32>
      gpu.return
    }
  }
  func.func @main() {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c7 = arith.constant 7 : index
    %c64 = arith.constant 64 : index
    %in = gpu.alloc host_shared () : memref<64xf32>
    %out = gpu.alloc host_shared () : memref<28xf32>
    scf.for %i = %c0 to %c64 step %c1 {
      %vi = arith.index_cast %i : index to i32
      %vf = arith.sitofp %vi : i32 to f32
      memref.store %vf, %in[%i] : memref<64xf32>
    }
    gpu.launch_func @kernels::@load4 blocks in (%c1, %c1, %c1)
        threads in (%c7, %c1, %c1) args(%in : memref<64xf32>, %out : memref<28xf32>)
    %cast = memref.cast %out : memref<28xf32> to memref<*xf32>
    call @printMemrefF32(%cast) : (memref<*xf32>) -> ()
    // CHECK: [0,   1,   2,   3,   4,   5,   6,   7,   8,   9,   10,   11,   12,   13,   14,   15,   16,   17,   18,   19,   20,   21,   22,   23,   24,   25,   26,   27]
    gpu.dealloc %in : memref<64xf32>
    gpu.dealloc %out : memref<28xf32>
    return
  }
  func.func private @printMemrefF32(memref<*xf32>)
}
