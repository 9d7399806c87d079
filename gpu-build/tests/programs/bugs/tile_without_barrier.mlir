// A seeded bug for `gpu-build run --check` (gpu-build/tests/command/check.rs): each thread
// writes its element of a workgroup tile and reads its neighbour's, with no barrier between.
// EXPECT: workgroup memory race: store of 4 bytes at {FILE}:12:7, block (0, 0, 0), thread (1, 0, 0): byte 4 of … was read by thread (0, 0, 0) at {FILE}:17:12 since the last barrier
module attributes {gpu.container_module} {
  gpu.module @kernels {
    gpu.func @neighbours(%in: memref<16xf32>, %out: memref<16xf32>)
        workgroup(%tile: memref<16xf32, #gpu.address_space<workgroup>>) kernel {
      %t = gpu.thread_id x
      %c1 = arith.constant 1 : index
      %c15 = arith.constant 15 : index
      %v = memref.load %in[%t] : memref<16xf32>
      memref.store %v,
        %tile[%t] : memref<16xf32, #gpu.address_space<workgroup>>
      // A gpu.barrier belongs here.
      %after = arith.addi %t, %c1 : index
      %next = arith.minui %after, %c15 : index
      %w = memref.load %tile[%next] : memref<16xf32, #gpu.address_space<workgroup>>
      memref.store %w, %out[%t] : memref<16xf32>
      gpu.return
    }
  }
  func.func @main() {
    %c1 = arith.constant 1 : index
    %c16 = arith.constant 16 : index
    %in = gpu.alloc () : memref<16xf32>
    %out = gpu.alloc () : memref<16xf32>
    gpu.launch_func @kernels::@neighbours blocks in (%c1, %c1, %c1) threads in (%c16, %c1, %c1)
        args(%in : memref<16xf32>, %out : memref<16xf32>)
    gpu.dealloc %in : memref<16xf32>
    gpu.dealloc %out : memref<16xf32>
    return
  }
}
