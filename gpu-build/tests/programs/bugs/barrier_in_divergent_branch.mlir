// A seeded bug for `gpu-build run --check` (gpu-build/tests/command/check.rs): threads below 4
// wait at a barrier inside an `scf.if` on the thread id; the others never get there.
// EXPECT: block (0, 0, 0): threads at different barriers (thread (0, 0, 0) reached the barrier at {FILE}:16:9, thread (4, 0, 0) did not (it had returned))
module attributes {gpu.container_module} {
  gpu.module @kernels {
    gpu.func @half_wait(%out: memref<8xf32>)
        workgroup(%shared: memref<8xf32, #gpu.address_space<workgroup>>) kernel {
      %t = gpu.thread_id x
      %c4 = arith.constant 4 : index
      %one = arith.constant 1.0 : f32
      memref.store %one, %shared[%t] : memref<8xf32, #gpu.address_space<workgroup>>
      %low = arith.cmpi ult, %t, %c4 : index
      scf.if %low {
        %o = arith.addi %t, %c4 : index
        // Only threads 0 to 3 get here.
        gpu.barrier
        %v = memref.load %shared[%o] : memref<8xf32, #gpu.address_space<workgroup>>
        memref.store %v, %out[%t] : memref<8xf32>
      }
      gpu.return
    }
  }
  func.func @main() {
    %c1 = arith.constant 1 : index
    %c8 = arith.constant 8 : index
    %out = gpu.alloc () : memref<8xf32>
    gpu.launch_func @kernels::@half_wait blocks in (%c1, %c1, %c1) threads in (%c8, %c1, %c1)
        args(%out : memref<8xf32>)
    gpu.dealloc %out : memref<8xf32>
    return
  }
}
