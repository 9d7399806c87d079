// A program of our own for `gpu-build run` (gpu-build/tests/command/run.rs): a `gpu.launch` the runner
// outlines, over a 2-D grid, whose blocks reverse their row through dynamic shared memory sized
// at launch (mgpuLaunchKernel's shared-memory argument) with a barrier between the writes and
// the reads; memory from `gpu.alloc host_shared`, which host code reads directly, freed by a
// synchronous `gpu.dealloc` (which the runner makes async for gpu-to-llvm).
module attributes {gpu.container_module} {
  func.func @main() {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c2 = arith.constant 2 : index
    %c3 = arith.constant 3 : index
    %c6 = arith.constant 6 : index
    %bytes = arith.constant 24 : i32
    %data = gpu.alloc host_shared () : memref<3x2x6xf32>
    scf.for %i = %c0 to %c3 step %c1 {
      scf.for %j = %c0 to %c2 step %c1 {
        scf.for %k = %c0 to %c6 step %c1 {
          %row = arith.muli %i, %c2 : index
          %r = arith.addi %row, %j : index
          %base = arith.muli %r, %c6 : index
          %v = arith.addi %base, %k : index
          %vi = arith.index_cast %v : index to i32
          %vf = arith.sitofp %vi : i32 to f32
          memref.store %vf, %data[%i, %j, %k] : memref<3x2x6xf32>
        }
      }
    }
    gpu.launch blocks(%bx, %by, %bz) in (%gx = %c3, %gy = %c2, %gz = %c1)
               threads(%tx, %ty, %tz) in (%sx = %c6, %sy = %c1, %sz = %c1)
               dynamic_shared_memory_size %bytes {
      %shared = gpu.dynamic_shared_memory : memref<?xi8, #gpu.address_space<workgroup>>
      %row = memref.view %shared[%c0][] : memref<?xi8, #gpu.address_space<workgroup>> to memref<6xf32, #gpu.address_space<workgroup>>
      %v = memref.load %data[%bx, %by, %tx] : memref<3x2x6xf32>
      memref.store %v, %row[%tx] : memref<6xf32, #gpu.address_space<workgroup>>
      gpu.barrier
      %last = arith.subi %sx, %c1 : index
      %mirror = arith.subi %last, %tx : index
      %w = memref.load %row[%mirror] : memref<6xf32, #gpu.address_space<workgroup>>
      memref.store %w, %data[%bx, %by, %tx] : memref<3x2x6xf32>
      gpu.terminator
    }
    %cast = memref.cast %data : memref<3x2x6xf32> to memref<*xf32>
    call @printMemrefF32(%cast) : (memref<*xf32>) -> ()
    // CHECK: [5,   4,   3,   2,   1,   0]
    // CHECK: [11,   10,   9,   8,   7,   6]
    // CHECK: [17,   16,   15,   14,   13,   12]
    // CHECK: [23,   22,   21,   20,   19,   18]
    // CHECK: [29,   28,   27,   26,   25,   24]
    // CHECK: [35,   34,   33,   32,   31,   30]
    gpu.dealloc %data : memref<3x2x6xf32>
    return
  }
  func.func private @printMemrefF32(memref<*xf32>)
}
