// A seeded bug for `gpu-build run --check` (gpu-build/tests/command/check.rs): a step that adds
// each element's right neighbour in place, `row[t] += row[t + 1]`, with no barrier between the
// read of the neighbour and the neighbour's own store. The row is written in full before, so
// the step is a loop the checked object would run without the shadow if no two threads' bytes
// met (workgroup_nest.cpp's race-free test): they do, and the test must say so.
// EXPECT: workgroup memory race: store of 4 bytes at {FILE}:25:9, block (0, 0, 0), thread (1, 0, 0): byte 4 of `__wg_smooth_0` was read by … at {FILE}:23:19 since the last barrier
// EXPECT-COUNT: 1
module attributes {gpu.container_module} {
  gpu.module @kernels {
    gpu.func @smooth(%in: memref<64xf32>, %out: memref<64xf32>)
        workgroup(%row: memref<64xf32, #gpu.address_space<workgroup>>) kernel
        attributes {known_block_size = array<i32: 64, 1, 1>} {
      %t = gpu.thread_id x
      %c1 = arith.constant 1 : index
      %c63 = arith.constant 63 : index
      %v = memref.load %in[%t] : memref<64xf32>
      memref.store %v, %row[%t] : memref<64xf32, #gpu.address_space<workgroup>>
      gpu.barrier
      %inner = arith.cmpi ult, %t, %c63 : index
      scf.if %inner {
        %next = arith.addi %t, %c1 : index
        %mine = memref.load %row[%t] : memref<64xf32, #gpu.address_space<workgroup>>
        %theirs = memref.load %row[%next] : memref<64xf32, #gpu.address_space<workgroup>>
        %sum = arith.addf %mine, %theirs : f32
        memref.store %sum, %row[%t] : memref<64xf32, #gpu.address_space<workgroup>>
      }
      gpu.barrier
      %w = memref.load %row[%t] : memref<64xf32, #gpu.address_space<workgroup>>
      memref.store %w, %out[%t] : memref<64xf32>
      gpu.return
    }
  }
  func.func @main() {
    %c1 = arith.constant 1 : index
    %c64 = arith.constant 64 : index
    %in = gpu.alloc () : memref<64xf32>
    %out = gpu.alloc () : memref<64xf32>
    gpu.launch_func @kernels::@smooth blocks in (%c1, %c1, %c1) threads in (%c64, %c1, %c1)
        args(%in : memref<64xf32>, %out : memref<64xf32>)
    gpu.dealloc %in : memref<64xf32>
    gpu.dealloc %out : memref<64xf32>
    return
  }
}
