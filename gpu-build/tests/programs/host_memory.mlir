// A program of our own for `gpu-build run --device vulkan` (gpu-build/tests/command/run.rs): host
// memory (`memref.alloc`) passed straight to kernels, as upstream's Vulkan tests do, which the
// runtime stages through device memory around each launch: a 2-D memref, one host memref
// passed as two arguments (one staging buffer, written in place), host and device memory
// (gpu.alloc) in one launch, scalar arguments of 4 and 8 bytes, host-shared memory
// (`gpu.alloc host_shared`). Runs on the host device too.
// Checked with FileCheck-22.
module attributes {gpu.container_module} {
  gpu.module @kernels {
    // out[i][j] = a[i][j] * scale + i * 10 + j
    gpu.func @affine(%a: memref<2x4xf32>, %out: memref<2x4xf32>, %scale: f32) kernel
        attributes {known_block_size = array<i32: 4, 2, 1>} {
      %j = gpu.thread_id x
      %i = gpu.thread_id y
      %v = memref.load %a[%i, %j] : memref<2x4xf32>
      %s = arith.mulf %v, %scale : f32
      %c10 = arith.constant 10 : index
      %row = arith.muli %i, %c10 : index
      %k = arith.addi %row, %j : index
      %ki = arith.index_cast %k : index to i32
      %kf = arith.sitofp %ki : i32 to f32
      %r = arith.addf %s, %kf : f32
      memref.store %r, %out[%i, %j] : memref<2x4xf32>
      gpu.return
    }
    // x[t] = y[t] + x[t] + n, for x and y the same memory, and d[t] = x[t] (device memory)
    gpu.func @in_place(%x: memref<8xi32>, %y: memref<8xi32>, %d: memref<8xi32>, %n: index)
        kernel attributes {known_block_size = array<i32: 8, 1, 1>} {
      %t = gpu.thread_id x
      %a = memref.load %x[%t] : memref<8xi32>
      %b = memref.load %y[%t] : memref<8xi32>
      %ni = arith.index_cast %n : index to i32
      %s = arith.addi %a, %b : i32
      %r = arith.addi %s, %ni : i32
      memref.store %r, %x[%t] : memref<8xi32>
      memref.store %r, %d[%t] : memref<8xi32>
      gpu.return
    }
  }

  func.func @main() {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c2 = arith.constant 2 : index
    %c4 = arith.constant 4 : index
    %c8 = arith.constant 8 : index
    %c100 = arith.constant 100 : index
    %half = arith.constant 0.5 : f32
    %a = memref.alloc() : memref<2x4xf32>
    scf.for %i = %c0 to %c2 step %c1 {
      scf.for %j = %c0 to %c4 step %c1 {
        %k = arith.muli %i, %c4 : index
        %l = arith.addi %k, %j : index
        %li = arith.index_cast %l : index to i32
        %lf = arith.sitofp %li : i32 to f32
        memref.store %lf, %a[%i, %j] : memref<2x4xf32>
      }
    }
    %out = memref.alloc() : memref<2x4xf32>
    gpu.launch_func @kernels::@affine blocks in (%c1, %c1, %c1) threads in (%c4, %c2, %c1)
        args(%a : memref<2x4xf32>, %out : memref<2x4xf32>, %half : f32)
    %out_unranked = memref.cast %out : memref<2x4xf32> to memref<*xf32>
    // CHECK: [0,   1.5,   3,   4.5],
    // CHECK-NEXT: [12,   13.5,   15,   16.5]]
    call @printMemrefF32(%out_unranked) : (memref<*xf32>) -> ()

    %x = memref.alloc() : memref<8xi32>
    scf.for %i = %c0 to %c8 step %c1 {
      %v = arith.index_cast %i : index to i32
      memref.store %v, %x[%i] : memref<8xi32>
    }
    %d = gpu.alloc () : memref<8xi32>
    gpu.launch_func @kernels::@in_place blocks in (%c1, %c1, %c1) threads in (%c8, %c1, %c1)
        args(%x : memref<8xi32>, %x : memref<8xi32>, %d : memref<8xi32>, %c100 : index)
    %back = memref.alloc() : memref<8xi32>
    gpu.memcpy %back, %d : memref<8xi32>, memref<8xi32>
    gpu.dealloc %d : memref<8xi32>
    %x_unranked = memref.cast %x : memref<8xi32> to memref<*xi32>
    // CHECK: [100,  102,  104,  106,  108,  110,  112,  114]
    call @printMemrefI32(%x_unranked) : (memref<*xi32>) -> ()
    %back_unranked = memref.cast %back : memref<8xi32> to memref<*xi32>
    // CHECK: [100,  102,  104,  106,  108,  110,  112,  114]
    call @printMemrefI32(%back_unranked) : (memref<*xi32>) -> ()
    // Host-shared memory (host memory on Vulkan devices, staged as the rest).
    %hs = gpu.alloc host_shared () : memref<8xi32>
    scf.for %i = %c0 to %c8 step %c1 {
      %v = arith.index_cast %i : index to i32
      %c10 = arith.constant 10 : i32
      %w = arith.muli %v, %c10 : i32
      memref.store %w, %hs[%i] : memref<8xi32>
    }
    %d2 = gpu.alloc () : memref<8xi32>
    gpu.launch_func @kernels::@in_place blocks in (%c1, %c1, %c1) threads in (%c8, %c1, %c1)
        args(%hs : memref<8xi32>, %hs : memref<8xi32>, %d2 : memref<8xi32>, %c1 : index)
    %hs_unranked = memref.cast %hs : memref<8xi32> to memref<*xi32>
    // CHECK: [1,  21,  41,  61,  81,  101,  121,  141]
    call @printMemrefI32(%hs_unranked) : (memref<*xi32>) -> ()
    gpu.dealloc %d2 : memref<8xi32>
    gpu.dealloc %hs : memref<8xi32>
    memref.dealloc %a : memref<2x4xf32>
    memref.dealloc %out : memref<2x4xf32>
    memref.dealloc %x : memref<8xi32>
    memref.dealloc %back : memref<8xi32>
    return
  }
  func.func private @printMemrefF32(memref<*xf32>)
  func.func private @printMemrefI32(memref<*xi32>)
}
