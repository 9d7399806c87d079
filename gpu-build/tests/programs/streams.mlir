// A program of our own for `gpu-build run` (gpu-build/tests/command/run.rs): device memory, 32- and
// 16-bit memsets, copies both ways, and two independent streams joined by events, through the
// mgpu* calls MLIR's gpu-to-llvm makes for async tokens. Checked with FileCheck-22.
module attributes {gpu.container_module} {
  gpu.module @kernels {
    // x[t] = x[t] * 2 + y[t]
    gpu.func @twice_plus(%x: memref<8xi32>, %y: memref<8xi32>) kernel {
      %t = gpu.thread_id x
      %v = memref.load %x[%t] : memref<8xi32>
      %w = memref.load %y[%t] : memref<8xi32>
      %d = arith.addi %v, %v : i32
      %s = arith.addi %d, %w : i32
      memref.store %s, %x[%t] : memref<8xi32>
      gpu.return
    }
    // h[t] = h[t] + t
    gpu.func @add_index(%h: memref<4xi16>) kernel {
      %t = gpu.thread_id x
      %v = memref.load %h[%t] : memref<4xi16>
      %i = arith.index_cast %t : index to i16
      %s = arith.addi %v, %i : i16
      memref.store %s, %h[%t] : memref<4xi16>
      gpu.return
    }
  }

  func.func @main() {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c4 = arith.constant 4 : index
    %c8 = arith.constant 8 : index
    %seven = arith.constant 7 : i32
    %forty = arith.constant 40 : i16
    %input = memref.alloc() : memref<8xi32>
    scf.for %i = %c0 to %c8 step %c1 {
      %v = arith.index_cast %i : index to i32
      memref.store %v, %input[%i] : memref<8xi32>
    }
    %result = memref.alloc() : memref<8xi32>
    %halves = memref.alloc() : memref<4xi16>

    // Two independent chains (two streams) ...
    %a0 = gpu.wait async
    %x, %a1 = gpu.alloc async [%a0] () : memref<8xi32>
    %a2 = gpu.memset async [%a1] %x, %seven : memref<8xi32>, i32
    %b0 = gpu.wait async
    %y, %b1 = gpu.alloc async [%b0] () : memref<8xi32>
    %b2 = gpu.memcpy async [%b1] %y, %input : memref<8xi32>, memref<8xi32>
    %h, %b3 = gpu.alloc async [%b2] () : memref<4xi16>
    %b4 = gpu.memset async [%b3] %h, %forty : memref<4xi16>, i16
    %b5 = gpu.launch_func async [%b4] @kernels::@add_index blocks in (%c1, %c1, %c1) threads in (%c4, %c1, %c1) args(%h : memref<4xi16>)
    // ... joined: an event recorded on one stream, waited on by the other.
    %joined = gpu.wait async [%a2, %b5]
    %j = gpu.launch_func async [%joined] @kernels::@twice_plus blocks in (%c1, %c1, %c1) threads in (%c8, %c1, %c1) args(%x : memref<8xi32>, %y : memref<8xi32>)
    %c = gpu.memcpy async [%j] %result, %x : memref<8xi32>, memref<8xi32>
    %d = gpu.memcpy async [%c] %halves, %h : memref<4xi16>, memref<4xi16>
    %f1 = gpu.dealloc async [%d] %x : memref<8xi32>
    %f2 = gpu.dealloc async [%f1] %y : memref<8xi32>
    %f3 = gpu.dealloc async [%f2] %h : memref<4xi16>
    gpu.wait [%f3]

    %cast = memref.cast %result : memref<8xi32> to memref<*xi32>
    call @printMemrefI32(%cast) : (memref<*xi32>) -> ()
    // CHECK: [14, 15, 16, 17, 18, 19, 20, 21]
    %wide = memref.alloc() : memref<4xi32>
    scf.for %i = %c0 to %c4 step %c1 {
      %v = memref.load %halves[%i] : memref<4xi16>
      %w = arith.extsi %v : i16 to i32
      memref.store %w, %wide[%i] : memref<4xi32>
    }
    %cast_wide = memref.cast %wide : memref<4xi32> to memref<*xi32>
    call @printMemrefI32(%cast_wide) : (memref<*xi32>) -> ()
    // CHECK: [40, 41, 42, 43]
    return
  }

  func.func private @printMemrefI32(memref<*xi32>)
}
