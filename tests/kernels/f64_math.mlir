// f64 math that GLSL lacks, which the Vulkan target implements itself (`tests/runtime/vulkan.rs`
// holds it to the host's libm, within the ulps of `gpu_tests::spirv_checks::F64_MATH`). Not
// built for opencl: MLIR 22's OpenCL lowering has no exp2, log2 or log10 on f64.
module attributes {gpu.container_module} {
  gpu.module @f64_math {
    // out[9 i + j] = the j-th of exp, exp2, log, log2, log10, sin, cos, tan of x[i], and
    // pow(x[i], y[i]): f64 math that GLSL lacks, which the Vulkan target implements itself.
    gpu.func @f64_math(%x: memref<?xf64>, %y: memref<?xf64>, %out: memref<?xf64>, %n: index) kernel {
      %i = gpu.global_id x
      %in_range = arith.cmpi ult, %i, %n : index
      scf.if %in_range {
        %a = memref.load %x[%i] : memref<?xf64>
        %b = memref.load %y[%i] : memref<?xf64>
        %c9 = arith.constant 9 : index
        %base = arith.muli %i, %c9 : index
        %r0 = math.exp %a : f64
        %r1 = math.exp2 %a : f64
        %r2 = math.log %a : f64
        %r3 = math.log2 %a : f64
        %r4 = math.log10 %a : f64
        %r5 = math.sin %a : f64
        %r6 = math.cos %a : f64
        %r7 = math.tan %a : f64
        %r8 = math.powf %a, %b : f64
        %c0 = arith.constant 0 : index
        %at0 = arith.addi %base, %c0 : index
        memref.store %r0, %out[%at0] : memref<?xf64>
        %c1 = arith.constant 1 : index
        %at1 = arith.addi %base, %c1 : index
        memref.store %r1, %out[%at1] : memref<?xf64>
        %c2 = arith.constant 2 : index
        %at2 = arith.addi %base, %c2 : index
        memref.store %r2, %out[%at2] : memref<?xf64>
        %c3 = arith.constant 3 : index
        %at3 = arith.addi %base, %c3 : index
        memref.store %r3, %out[%at3] : memref<?xf64>
        %c4 = arith.constant 4 : index
        %at4 = arith.addi %base, %c4 : index
        memref.store %r4, %out[%at4] : memref<?xf64>
        %c5 = arith.constant 5 : index
        %at5 = arith.addi %base, %c5 : index
        memref.store %r5, %out[%at5] : memref<?xf64>
        %c6 = arith.constant 6 : index
        %at6 = arith.addi %base, %c6 : index
        memref.store %r6, %out[%at6] : memref<?xf64>
        %c7 = arith.constant 7 : index
        %at7 = arith.addi %base, %c7 : index
        memref.store %r7, %out[%at7] : memref<?xf64>
        %c8 = arith.constant 8 : index
        %at8 = arith.addi %base, %c8 : index
        memref.store %r8, %out[%at8] : memref<?xf64>
      }
      gpu.return
    }
  }
}
