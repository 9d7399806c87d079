// A seeded bug for `gpu-build run --check` (gpu-build/tests/command/check.rs): a kernel given a
// view of 8 elements in the middle of a 32-element allocation reads the element after the view,
// which is inside the allocation (a bounds check against allocations alone would miss it).
// EXPECT: out-of-bounds load of 4 bytes at {FILE}:14:12, block (0, 0, 0), thread (7, 0, 0): address … is 0 bytes past the end of argument `view` (32 bytes at
module attributes {gpu.container_module} {
  gpu.module @kernels {
    // view[t] = view[t + 1] * 2: a shift that forgot the view's last element has no successor.
    gpu.func @double_next(%view: memref<8xf32, strided<[1], offset: 8>>) kernel {
      %t = gpu.thread_id x
      %c1 = arith.constant 1 : index
      %next = arith.addi %t, %c1 : index
      %c2 = arith.constant 2.0 : f32
      %v =
           memref.load %view[%next] : memref<8xf32, strided<[1], offset: 8>>
      %d = arith.mulf %v, %c2 : f32
      memref.store %d, %view[%t] : memref<8xf32, strided<[1], offset: 8>>
      gpu.return
    }
  }
  func.func @main() {
    %c1 = arith.constant 1 : index
    %c8 = arith.constant 8 : index
    %all = gpu.alloc () : memref<32xf32>
    %view = memref.subview %all[8] [8] [1] : memref<32xf32> to memref<8xf32, strided<[1], offset: 8>>
    gpu.launch_func @kernels::@double_next blocks in (%c1, %c1, %c1) threads in (%c8, %c1, %c1)
        args(%view : memref<8xf32, strided<[1], offset: 8>>)
    gpu.dealloc %all : memref<32xf32>
    return
  }
}
