// Math library calls: exp, log, sin on f32 and cos, pow on f64. On NVIDIA these become libdevice
// (`__nv_*`) calls, on AMD device-library (`__ocml_*`) calls or native instructions.
module attributes {gpu.container_module} {
  gpu.module @math [#nvvm.target<chip = "sm_80">, #rocdl.target<chip = "gfx90a">] {
    // out[i] = exp(x[i]) + log(x[i]) + sin(x[i])
    gpu.func @math_f32(%x: memref<?xf32>, %out: memref<?xf32>, %n: index) kernel {
      %i = gpu.global_id x
      %in_range = arith.cmpi ult, %i, %n : index
      scf.if %in_range {
        %v = memref.load %x[%i] : memref<?xf32>
        %e = math.exp %v : f32
        %l = math.log %v : f32
        %s = math.sin %v : f32
        %el = arith.addf %e, %l : f32
        %r = arith.addf %el, %s : f32
        memref.store %r, %out[%i] : memref<?xf32>
      }
      gpu.return
    }
    // out[i] = cos(x[i]) + pow(x[i], y[i])
    gpu.func @math_f64(%x: memref<?xf64>, %y: memref<?xf64>, %out: memref<?xf64>, %n: index) kernel {
      %i = gpu.global_id x
      %in_range = arith.cmpi ult, %i, %n : index
      scf.if %in_range {
        %a = memref.load %x[%i] : memref<?xf64>
        %b = memref.load %y[%i] : memref<?xf64>
        %c = math.cos %a : f64
        %p = math.powf %a, %b : f64
        %r = arith.addf %c, %p : f64
        memref.store %r, %out[%i] : memref<?xf64>
      }
      gpu.return
    }
  }
}
