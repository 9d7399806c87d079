// The correct twin of bugs/same_block_global_read_write_race.mlir: every thread reads its
// neighbour's element, waits at a barrier, then writes its own. Runs checked with no report
// and this output.
module attributes {gpu.container_module} {
  gpu.module @kernels {
    gpu.func @shift_left_in_place(%data: memref<16xf32>) kernel {
      %t = gpu.thread_id x
      %c1 = arith.constant 1 : index
      %c15 = arith.constant 15 : index
      %next = arith.addi %t, %c1 : index
      %last = arith.cmpi eq, %t, %c15 : index
      %from = arith.select %last, %t, %next : index
      %v = memref.load %data[%from] : memref<16xf32>
      %w = arith.addf %v, %v : f32
      gpu.barrier
      memref.store %w, %data[%t] : memref<16xf32>
      gpu.return
    }
  }
  func.func @main() {
    %c1 = arith.constant 1 : index
    %c16 = arith.constant 16 : index
    %one = arith.constant 1.0 : f32
    %data = gpu.alloc () : memref<16xf32>
    gpu.memset %data, %one : memref<16xf32>, f32
    gpu.launch_func @kernels::@shift_left_in_place blocks in (%c1, %c1, %c1)
        threads in (%c16, %c1, %c1) args(%data : memref<16xf32>)
    %host = memref.alloc() : memref<16xf32>
    gpu.memcpy %host, %data : memref<16xf32>, memref<16xf32>
    %cast = memref.cast %host : memref<16xf32> to memref<*xf32>
    call @printMemrefF32(%cast) : (memref<*xf32>) -> ()
    // CHECK: [2,   2,   2,   2,   2,   2,   2,   2,   2,   2,   2,   2,   2,   2,   2,   2]
    memref.dealloc %host : memref<16xf32>
    gpu.dealloc %data : memref<16xf32>
    return
  }
  func.func private @printMemrefF32(memref<*xf32>)
}
