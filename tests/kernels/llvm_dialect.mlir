// Kernels in the LLVM dialect over pointers in the global address space (!llvm.ptr<1>) and
// generic ones (!llvm.ptr): LLVM intrinsics, GEP chains into structs, pointer arithmetic through
// integers, selects and branches carrying pointers, loops. Built for the OpenCL-style target
// (LLVM's SPIR-V back end), Vulkan (device addresses: targets/vulkan/llvm_kernels.rs) and the
// host; tests/src/spirv_checks.rs `check_llvm_kernels` runs them on each (NVIDIA and AMD objects
// are built too: ptxas and the hsaco reader check them).
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

  // out[i] = (max(|pairs[i].a|, pairs[i].b) + (i odd ? x : y)[i]) frem 7, for i < n: GEPs into
  // an array of structs, math intrinsics and `llvm.frem` (which MLIR 22's NVVM and ROCDL
  // lowerings refuse written by hand: support/llvm_math.rs renames them), a select of pointers, a pointer carried by a branch and
  // moved by integer arithmetic (ptrtoint, inttoptr), 32-bit indices.
  llvm.func @pairs(%pairs: !llvm.ptr<1>, %x: !llvm.ptr, %y: !llvm.ptr, %out: !llvm.ptr, %n: i32) attributes {gpu.kernel} {
    %block = gpu.block_id x
    %block_dim = gpu.block_dim x
    %thread = gpu.thread_id x
    %base = arith.muli %block, %block_dim : index
    %index = arith.addi %base, %thread : index
    %i = arith.index_cast %index : index to i32
    %in_range = llvm.icmp "slt" %i, %n : i32
    llvm.cond_br %in_range, ^body, ^done
  ^body:
    %pa = llvm.getelementptr %pairs[%i, 0] : (!llvm.ptr<1>, i32) -> !llvm.ptr<1>, !llvm.struct<(f32, f32)>
    %pb = llvm.getelementptr %pairs[%i, 1] : (!llvm.ptr<1>, i32) -> !llvm.ptr<1>, !llvm.struct<(f32, f32)>
    %a = llvm.load %pa : !llvm.ptr<1> -> f32
    %b = llvm.load %pb : !llvm.ptr<1> -> f32
    %magnitude = llvm.intr.fabs(%a) : (f32) -> f32
    %larger = llvm.intr.maxnum(%magnitude, %b) : (f32, f32) -> f32
    %one = llvm.mlir.constant(1 : i32) : i32
    %bit = llvm.and %i, %one : i32
    %odd = llvm.icmp "eq" %bit, %one : i32
    %source = llvm.select %odd, %x, %y : i1, !llvm.ptr
    llvm.br ^add(%source : !llvm.ptr)
  ^add(%p: !llvm.ptr):
    %address = llvm.ptrtoint %p : !llvm.ptr to i64
    %wide = llvm.sext %i : i32 to i64
    %four = llvm.mlir.constant(4 : i64) : i64
    %bytes = llvm.mul %wide, %four : i64
    %moved = llvm.add %address, %bytes : i64
    %pv = llvm.inttoptr %moved : i64 to !llvm.ptr
    %v = llvm.load %pv : !llvm.ptr -> f32
    %r = llvm.fadd %larger, %v : f32
    %seven = llvm.mlir.constant(7.0 : f32) : f32
    %wrapped = llvm.frem %r, %seven : f32
    %po = llvm.getelementptr %out[%i] : (!llvm.ptr, i32) -> !llvm.ptr, f32
    llvm.store %wrapped, %po : f32, !llvm.ptr
    llvm.br ^done
  ^done:
    llvm.return
  }
}
