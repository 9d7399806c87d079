// Every thread of four blocks adds the square of its global id to `total[0]` with
// memref.generic_atomic_rmw, which is lowered to a compare-and-swap loop whose first read of
// the element is a plain load: the checks take that load as part of the atomic access (it
// raced with the other threads' compare-and-swaps when it was taken for a load). Runs checked
// with no report and this output.
module attributes {gpu.container_module} {
  gpu.module @kernels {
    gpu.func @sum_of_squares(%total: memref<1xi32>) kernel {
      %c0 = arith.constant 0 : index
      %id = gpu.global_id x
      %i = arith.index_cast %id : index to i32
      %square = arith.muli %i, %i : i32
      %old = memref.generic_atomic_rmw %total[%c0] : memref<1xi32> {
      ^bb0(%current: i32):
        %sum = arith.addi %current, %square : i32
        memref.atomic_yield %sum : i32
      }
      gpu.return
    }
  }
  func.func @main() {
    %c1 = arith.constant 1 : index
    %c4 = arith.constant 4 : index
    %c8 = arith.constant 8 : index
    %zero = arith.constant 0 : i32
    %total = gpu.alloc () : memref<1xi32>
    gpu.memset %total, %zero : memref<1xi32>, i32
    gpu.launch_func @kernels::@sum_of_squares blocks in (%c4, %c1, %c1)
        threads in (%c8, %c1, %c1) args(%total : memref<1xi32>)
    %host = memref.alloc() : memref<1xi32>
    gpu.memcpy %host, %total : memref<1xi32>, memref<1xi32>
    %cast = memref.cast %host : memref<1xi32> to memref<*xi32>
    call @printMemrefI32(%cast) : (memref<*xi32>) -> ()
    // 0² + 1² + ... + 31²
    // CHECK: [10416]
    memref.dealloc %host : memref<1xi32>
    gpu.dealloc %total : memref<1xi32>
    return
  }
  func.func private @printMemrefI32(memref<*xi32>)
}
