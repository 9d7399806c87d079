// The kernel the UI tests embed: one scalar, one memref, one index.
gpu.module @ui_kernels [#nvvm.target<chip = "sm_80">] {
  gpu.func @scale(%a: f32, %x: memref<?xf32>, %n: index) kernel {
    %i = gpu.global_id x
    %in_range = arith.cmpi ult, %i, %n : index
    scf.if %in_range {
      %v = memref.load %x[%i] : memref<?xf32>
      %r = arith.mulf %a, %v : f32
      memref.store %r, %x[%i] : memref<?xf32>
    }
    gpu.return
  }
}
