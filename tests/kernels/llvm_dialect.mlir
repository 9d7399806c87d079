// Kernels in the LLVM dialect over pointers in the global address space (!llvm.ptr<1>) and
// generic ones (!llvm.ptr): an LLVM intrinsic, GEP chains and a loop. Built for the OpenCL-style target (LLVM's SPIR-V back
// end) and the host (tests/runtime/opencl.rs); not yet for Vulkan, whose pattern raising refuses
// it.
gpu.module @llvm_kernels {
  // y[i] = fma(a, x[i], y[i]) + (x[0] + ... + x[i % 4 - 1]) over pointers in the global
  // address space: an LLVM intrinsic, GEP chains and a loop.
  llvm.func @saxpy_global(%a: f32, %x: !llvm.ptr<1>, %y: !llvm.ptr<1>, %n: i64) attributes {gpu.kernel} {
    %block = gpu.block_id x
    %block_dim = gpu.block_dim x
    %thread = gpu.thread_id x
    %base = arith.muli %block, %block_dim : index
    %index = arith.addi %base, %thread : index
    %i = arith.index_cast %index : index to i64
    %in_range = llvm.icmp "ult" %i, %n : i64
    llvm.cond_br %in_range, ^body, ^done
  ^body:
    %px = llvm.getelementptr %x[%i] : (!llvm.ptr<1>, i64) -> !llvm.ptr<1>, f32
    %py = llvm.getelementptr %y[%i] : (!llvm.ptr<1>, i64) -> !llvm.ptr<1>, f32
    %vx = llvm.load %px : !llvm.ptr<1> -> f32
    %vy = llvm.load %py : !llvm.ptr<1> -> f32
    %r = llvm.intr.fma(%a, %vx, %vy) : (f32, f32, f32) -> f32
    %c0 = llvm.mlir.constant(0 : i64) : i64
    %c1 = llvm.mlir.constant(1 : i64) : i64
    %c4 = llvm.mlir.constant(4 : i64) : i64
    %count = llvm.urem %i, %c4 : i64
    llvm.br ^loop(%c0, %r : i64, f32)
  ^loop(%j: i64, %acc: f32):
    %more = llvm.icmp "ult" %j, %count : i64
    llvm.cond_br %more, ^step, ^store
  ^step:
    %pj = llvm.getelementptr %x[%j] : (!llvm.ptr<1>, i64) -> !llvm.ptr<1>, f32
    %vj = llvm.load %pj : !llvm.ptr<1> -> f32
    %next = llvm.fadd %acc, %vj : f32
    %j1 = llvm.add %j, %c1 : i64
    llvm.br ^loop(%j1, %next : i64, f32)
  ^store:
    llvm.store %acc, %py : f32, !llvm.ptr<1>
    llvm.br ^done
  ^done:
    llvm.return
  }

  // The same over generic pointers (!llvm.ptr), as kernels written for NVIDIA take them: the
  // OpenCL-style target makes kernel pointer arguments global ones.
  llvm.func @saxpy_generic(%a: f32, %x: !llvm.ptr, %y: !llvm.ptr, %n: i64) attributes {gpu.kernel} {
    %block = gpu.block_id x
    %block_dim = gpu.block_dim x
    %thread = gpu.thread_id x
    %base = arith.muli %block, %block_dim : index
    %index = arith.addi %base, %thread : index
    %i = arith.index_cast %index : index to i64
    %in_range = llvm.icmp "ult" %i, %n : i64
    llvm.cond_br %in_range, ^body, ^done
  ^body:
    %px = llvm.getelementptr %x[%i] : (!llvm.ptr, i64) -> !llvm.ptr, f32
    %py = llvm.getelementptr %y[%i] : (!llvm.ptr, i64) -> !llvm.ptr, f32
    %vx = llvm.load %px : !llvm.ptr -> f32
    %vy = llvm.load %py : !llvm.ptr -> f32
    %r = llvm.intr.fma(%a, %vx, %vy) : (f32, f32, f32) -> f32
    %c0 = llvm.mlir.constant(0 : i64) : i64
    %c1 = llvm.mlir.constant(1 : i64) : i64
    %c4 = llvm.mlir.constant(4 : i64) : i64
    %count = llvm.urem %i, %c4 : i64
    llvm.br ^loop(%c0, %r : i64, f32)
  ^loop(%j: i64, %acc: f32):
    %more = llvm.icmp "ult" %j, %count : i64
    llvm.cond_br %more, ^step, ^store
  ^step:
    %pj = llvm.getelementptr %x[%j] : (!llvm.ptr, i64) -> !llvm.ptr, f32
    %vj = llvm.load %pj : !llvm.ptr -> f32
    %next = llvm.fadd %acc, %vj : f32
    %j1 = llvm.add %j, %c1 : i64
    llvm.br ^loop(%j1, %next : i64, f32)
  ^store:
    llvm.store %acc, %py : f32, !llvm.ptr
    llvm.br ^done
  ^done:
    llvm.return
  }
}
