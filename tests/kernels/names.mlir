// Symbols a Rust identifier cannot hold: the macro names the module `_2d_kernels` and the stubs
// `_2d`, `weird_name_v2` and `fn_`; the host library keeps the symbols as they are. (NVPTX cannot
// name them at all, so only AMDGPU and the host build this file.)
gpu.module @"2d-Kernels" [#rocdl.target<chip = "gfx90a">] {
  gpu.func @"2d"(%out: memref<?xf32>) kernel {
    %i = gpu.thread_id x
    %v = arith.constant 2.0 : f32
    memref.store %v, %out[%i] : memref<?xf32>
    gpu.return
  }
  gpu.func @"weird-name.v2"(%out: memref<?xf32>) kernel {
    %i = gpu.thread_id x
    %v = arith.constant 3.0 : f32
    memref.store %v, %out[%i] : memref<?xf32>
    gpu.return
  }
  gpu.func @fn(%out: memref<?xf32>) kernel {
    %i = gpu.thread_id x
    %v = arith.constant 4.0 : f32
    memref.store %v, %out[%i] : memref<?xf32>
    gpu.return
  }
}
