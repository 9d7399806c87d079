// Atomics only the SPIR-V targets take (`support/atomics.rs`: a compare-and-swap loop on the
// float's bits; MLIR 22's LLVM lowering refuses float products), and atomics on 64-bit values
// (`Int64Atomics`); `tests/runtime/vulkan.rs` and `tests/runtime/opencl.rs` check them against
// plain Rust.
module attributes {gpu.container_module} {
  gpu.module @spirv_atomics {
    // Thread g < n multiplies out[0] by a sign and a power of two (-1 where g % 7 == 0, 2 where
    // g % 97 == 0: exact in any order) and, by a generic atomic, adds g / 8 to out[1] when it is
    // larger than out[1] / 2 (the region reads the current value; the sum of the kept values
    // depends on the order, the invariant out[1] >= every g / 8 does not).
    gpu.func @float_products(%out: memref<?xf32>, %n: index) kernel {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c7 = arith.constant 7 : index
      %c97 = arith.constant 97 : index
      %minus_one = arith.constant -1.0 : f32
      %plus_one = arith.constant 1.0 : f32
      %two = arith.constant 2.0 : f32
      %half = arith.constant 0.5 : f32
      %eighth = arith.constant 0.125 : f32
      %g = gpu.global_id x
      %inside = arith.cmpi ult, %g, %n : index
      scf.if %inside {
        %g7 = arith.remui %g, %c7 : index
        %negative = arith.cmpi eq, %g7, %c0 : index
        %sign = arith.select %negative, %minus_one, %plus_one : f32
        %g97 = arith.remui %g, %c97 : index
        %doubled = arith.cmpi eq, %g97, %c0 : index
        %scale = arith.select %doubled, %two, %plus_one : f32
        %factor = arith.mulf %sign, %scale : f32
        %product = memref.atomic_rmw mulf %factor, %out[%c0] : (f32, memref<?xf32>) -> f32
        %g_i32 = arith.index_cast %g : index to i32
        %gf = arith.uitofp %g_i32 : i32 to f32
        %mine = arith.mulf %gf, %eighth : f32
        %kept = memref.generic_atomic_rmw %out[%c1] : memref<?xf32> {
        ^bb0(%current: f32):
          %half_current = arith.mulf %current, %half : f32
          %larger = arith.cmpf ogt, %mine, %half_current : f32
          %sum = arith.addf %current, %mine : f32
          %next = arith.select %larger, %sum, %current : f32
          memref.atomic_yield %next : f32
        }
      }
      gpu.return
    }

    // 64-bit atomics: thread g < n adds (g << 32) + 1 to out[0] (the sum crosses 32 bits) and to
    // its block's sum in workgroup memory, which thread 0 then adds to out[3]; takes the signed
    // maximum of g * 2^33 - 5 into out[1] and the unsigned minimum of !g into out[2]; adds g / 2
    // to sum[0] (an f64 compare-and-swap loop on the 64-bit bits).
    gpu.func @wide_atomics(%out: memref<?xi64>, %sum: memref<?xf64>, %n: index)
        workgroup(%block: memref<1xi64, #gpu.address_space<workgroup>>) kernel {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c2 = arith.constant 2 : index
      %c3 = arith.constant 3 : index
      %zero = arith.constant 0 : i64
      %one = arith.constant 1 : i64
      %all_ones = arith.constant -1 : i64
      %c32 = arith.constant 32 : i64
      %c33 = arith.constant 33 : i64
      %five = arith.constant 5 : i64
      %half = arith.constant 0.5 : f64
      %t = gpu.thread_id x
      %first = arith.cmpi eq, %t, %c0 : index
      scf.if %first {
        memref.store %zero, %block[%c0] : memref<1xi64, #gpu.address_space<workgroup>>
      }
      gpu.barrier
      %g = gpu.global_id x
      %inside = arith.cmpi ult, %g, %n : index
      scf.if %inside {
        %gi = arith.index_cast %g : index to i64
        %high = arith.shli %gi, %c32 : i64
        %tagged = arith.addi %high, %one : i64
        %a = memref.atomic_rmw addi %tagged, %out[%c0] : (i64, memref<?xi64>) -> i64
        %b = memref.atomic_rmw addi %tagged, %block[%c0] : (i64, memref<1xi64, #gpu.address_space<workgroup>>) -> i64
        %big = arith.shli %gi, %c33 : i64
        %shifted = arith.subi %big, %five : i64
        %c = memref.atomic_rmw maxs %shifted, %out[%c1] : (i64, memref<?xi64>) -> i64
        %inverted = arith.xori %gi, %all_ones : i64
        %d = memref.atomic_rmw minu %inverted, %out[%c2] : (i64, memref<?xi64>) -> i64
        %gf = arith.uitofp %gi : i64 to f64
        %value = arith.mulf %gf, %half : f64
        %e = memref.atomic_rmw addf %value, %sum[%c0] : (f64, memref<?xf64>) -> f64
      }
      gpu.barrier
      scf.if %first {
        %total = memref.load %block[%c0] : memref<1xi64, #gpu.address_space<workgroup>>
        %f = memref.atomic_rmw addi %total, %out[%c3] : (i64, memref<?xi64>) -> i64
      }
      gpu.return
    }
  }
}
