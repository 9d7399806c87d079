// A seeded bug for `gpu-build run --check` (gpu-build/tests/command/check.rs): after a barrier,
// thread 0 rewrites element 0 of a workgroup array while the other threads read it, on the other
// side of a branch. The read follows the same barrier as the write, so the checked object must
// keep telling the runtime about it even once every element was written (a read that follows
// no write of its variable skips the runtime then).
// EXPECT: workgroup memory race: load of 4 bytes at {FILE}:23:14, block (0, 0, 0), thread (1, 0, 0): byte 0 of … was written by thread (0, 0, 0) at {FILE}:20:9 since the last barrier
// EXPECT-COUNT: 1
module attributes {gpu.container_module} {
  gpu.module @kernels {
    gpu.func @broadcast(%in: memref<8xf32>, %out: memref<8xf32>)
        workgroup(%row: memref<8xf32, #gpu.address_space<workgroup>>) kernel {
      %t = gpu.thread_id x
      %c0 = arith.constant 0 : index
      %v = memref.load %in[%t] : memref<8xf32>
      memref.store %v, %row[%t] : memref<8xf32, #gpu.address_space<workgroup>>
      gpu.barrier
      %first = arith.cmpi eq, %t, %c0 : index
      scf.if %first {
        %s = arith.constant 2.0 : f32
        memref.store %s, %row[%c0] : memref<8xf32, #gpu.address_space<workgroup>>
      } else {
        %i = arith.constant 0 : index
        %w = memref.load %row[%i] : memref<8xf32, #gpu.address_space<workgroup>>
        memref.store %w, %out[%t] : memref<8xf32>
      }
      gpu.return
    }
  }
  func.func @main() {
    %c1 = arith.constant 1 : index
    %c8 = arith.constant 8 : index
    %in = gpu.alloc () : memref<8xf32>
    %out = gpu.alloc () : memref<8xf32>
    gpu.launch_func @kernels::@broadcast blocks in (%c1, %c1, %c1) threads in (%c8, %c1, %c1)
        args(%in : memref<8xf32>, %out : memref<8xf32>)
    gpu.dealloc %in : memref<8xf32>
    gpu.dealloc %out : memref<8xf32>
    return
  }
}
