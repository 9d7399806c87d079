// A seeded bug for `gpu-build run --check` (gpu-build/tests/command/check.rs): each thread
// reads its right neighbour in a row of a 4x8 matrix; the last thread of each row reads
// element 8 of its row, which is the next row's first (inside the buffer: only the index check
// finds it, and for the last row the bounds check would). Twin: twins/row_overrun_guarded.mlir.
// EXPECT: index out of bounds: load at {FILE}:14:12, block (0, 0, 0), thread (7, 0, 0): index 8 of dimension 1 of argument `in` (of size 8)
// EXPECT-COUNT: 4
module attributes {gpu.container_module} {
  gpu.module @kernels {
    gpu.func @right_neighbour(%in: memref<4x8xf32>, %out: memref<4x8xf32>) kernel {
      %col = gpu.thread_id x
      %row = gpu.thread_id y
      %c1 = arith.constant 1 : index
      %next = arith.addi %col, %c1 : index
      %v = memref.load %in[%row, %next] : memref<4x8xf32>
      memref.store %v, %out[%row, %col] : memref<4x8xf32>
      gpu.return
    }
  }
  func.func @main() {
    %c1 = arith.constant 1 : index
    %c4 = arith.constant 4 : index
    %c8 = arith.constant 8 : index
    %in = gpu.alloc () : memref<4x8xf32>
    %out = gpu.alloc () : memref<4x8xf32>
    gpu.launch_func @kernels::@right_neighbour blocks in (%c1, %c1, %c1)
        threads in (%c8, %c4, %c1) args(%in : memref<4x8xf32>, %out : memref<4x8xf32>)
    gpu.dealloc %in : memref<4x8xf32>
    gpu.dealloc %out : memref<4x8xf32>
    return
  }
}
