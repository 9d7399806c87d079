// A program of our own for `gpu-build run` (gpu-build/tests/command/on_the_double.rs): a launch
// with 64 KiB of dynamic shared memory, more than a CUDA block gets without opting in (48 KiB):
// mgpuLaunchKernel must opt the kernel in (CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES) as
// upstream's wrapper does. One thread writes the last word of the shared memory and reads it back.
module attributes {gpu.container_module} {
  func.func @main() {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %last = arith.constant 16383 : index
    %bytes = arith.constant 65536 : i32
    %data = gpu.alloc () : memref<1xf32>
    gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
               threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1)
               dynamic_shared_memory_size %bytes {
      %shared = gpu.dynamic_shared_memory : memref<?xi8, #gpu.address_space<workgroup>>
      %words = memref.view %shared[%c0][] : memref<?xi8, #gpu.address_space<workgroup>> to memref<16384xf32, #gpu.address_space<workgroup>>
      %v = arith.constant 42.0 : f32
      memref.store %v, %words[%last] : memref<16384xf32, #gpu.address_space<workgroup>>
      %w = memref.load %words[%last] : memref<16384xf32, #gpu.address_space<workgroup>>
      memref.store %w, %data[%c0] : memref<1xf32>
      gpu.terminator
    }
    gpu.dealloc %data : memref<1xf32>
    return
  }
}
