// Atomics only the SPIR-V targets take (`support/atomics.rs`: a compare-and-swap loop on the
// float's bits); MLIR 22's LLVM lowering refuses them (`tests/runtime/vulkan.rs`,
// `tests/runtime/opencl.rs` check them against plain Rust).
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
  }
}
