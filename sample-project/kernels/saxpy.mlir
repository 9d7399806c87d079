// y[i] = a * x[i] + y[i]: written in the llvm dialect, with the gpu dialect's index ops.
gpu.module @saxpy [#nvvm.target<chip = "sm_80">, #rocdl.target<chip = "gfx90a">] {
  llvm.func @saxpy(%a: f32, %x: !llvm.ptr, %y: !llvm.ptr, %n: i64) attributes {gpu.kernel} {
    %block = gpu.block_id x
    %block_dim = gpu.block_dim x
    %thread = gpu.thread_id x
    %base = arith.muli %block, %block_dim : index
    %index = arith.addi %base, %thread : index
    %i = arith.index_cast %index : index to i64
    %in_range = llvm.icmp "ult" %i, %n : i64
    llvm.cond_br %in_range, ^body, ^done
  ^body:
    %px = llvm.getelementptr inbounds %x[%i] : (!llvm.ptr, i64) -> !llvm.ptr, f32
    %py = llvm.getelementptr inbounds %y[%i] : (!llvm.ptr, i64) -> !llvm.ptr, f32
    %vx = llvm.load %px : !llvm.ptr -> f32
    %vy = llvm.load %py : !llvm.ptr -> f32
    %ax = llvm.fmul %a, %vx : f32
    %r = llvm.fadd %ax, %vy : f32
    llvm.store %r, %py : f32, !llvm.ptr
    llvm.br ^done
  ^done:
    llvm.return
  }
}
