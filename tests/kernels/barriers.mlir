// Barrier placements the host target splits kernels at (barrier fission), checked against
// plain-Rust references in tests/runtime/host_semantics.rs, plus one it cannot split (a coroutine per
// thread) and one that breaks the GPU programming model at run time. Blocks of 64 threads.
module attributes {gpu.container_module} {
  gpu.module @barriers [#nvvm.target<chip = "sm_80">, #rocdl.target<chip = "gfx90a">] {
    // Barriers inside a loop whose trip count is an argument. Per thread: acc starts at in[i];
    // each round, acc += tile[(t + 1) % 64] + r + u, where tile holds every thread's acc of the
    // round before, and u (the same in every thread) grows by 3 r each round. Then out[i] = acc.
    gpu.func @loop_barriers(%in: memref<?xi32>, %out: memref<?xi32>, %rounds: index)
        workgroup(%tile: memref<64xi32, #gpu.address_space<workgroup>>) kernel {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c3 = arith.constant 3 : i32
      %c64 = arith.constant 64 : index
      %zero = arith.constant 0 : i32
      %t = gpu.thread_id x
      %b = gpu.block_id x
      %base = arith.muli %b, %c64 : index
      %i = arith.addi %base, %t : index
      %next = arith.addi %t, %c1 : index
      %neighbour = arith.remui %next, %c64 : index
      %start = memref.load %in[%i] : memref<?xi32>
      %acc, %u = scf.for %r = %c0 to %rounds step %c1 iter_args(%a = %start, %v = %zero) -> (i32, i32) {
        memref.store %a, %tile[%t] : memref<64xi32, #gpu.address_space<workgroup>>
        gpu.barrier
        %seen = memref.load %tile[%neighbour] : memref<64xi32, #gpu.address_space<workgroup>>
        %r32 = arith.index_cast %r : index to i32
        %sum = arith.addi %a, %seen : i32
        %plus_r = arith.addi %sum, %r32 : i32
        %plus_u = arith.addi %plus_r, %v : i32
        %step = arith.muli %r32, %c3 : i32
        %v2 = arith.addi %v, %step : i32
        gpu.barrier
        scf.yield %plus_u, %v2 : i32, i32
      }
      memref.store %acc, %out[%i] : memref<?xi32>
      gpu.return
    }

    // Values live across several barriers: a (per thread, loaded before the first), u (the same
    // in every thread of the block), p (in private memory indexed at run time), b and c.
    //   a = in[i]; u = 7 * block; p[t % 4] = a * 3
    //   tile[t] = a        | barrier | b = tile[63 - t] | barrier
    //   tile[t] = 2 * b    | barrier | c = tile[(t + 5) % 64] | barrier
    //   out[i] = a + b + c + u + t + p[t % 4]
    gpu.func @several_barriers(%in: memref<?xi32>, %out: memref<?xi32>)
        workgroup(%tile: memref<64xi32, #gpu.address_space<workgroup>>) kernel {
      %c2 = arith.constant 2 : i32
      %c3 = arith.constant 3 : i32
      %c4 = arith.constant 4 : index
      %c5 = arith.constant 5 : index
      %c7 = arith.constant 7 : index
      %c63 = arith.constant 63 : index
      %c64 = arith.constant 64 : index
      %t = gpu.thread_id x
      %b = gpu.block_id x
      %base = arith.muli %b, %c64 : index
      %i = arith.addi %base, %t : index
      %a = memref.load %in[%i] : memref<?xi32>
      %u_index = arith.muli %b, %c7 : index
      %u = arith.index_cast %u_index : index to i32
      %private = memref.alloca() : memref<4xi32>
      %slot = arith.remui %t, %c4 : index
      %a3 = arith.muli %a, %c3 : i32
      memref.store %a3, %private[%slot] : memref<4xi32>
      memref.store %a, %tile[%t] : memref<64xi32, #gpu.address_space<workgroup>>
      gpu.barrier
      %mirror = arith.subi %c63, %t : index
      %bv = memref.load %tile[%mirror] : memref<64xi32, #gpu.address_space<workgroup>>
      gpu.barrier
      %b2 = arith.muli %bv, %c2 : i32
      memref.store %b2, %tile[%t] : memref<64xi32, #gpu.address_space<workgroup>>
      gpu.barrier
      %shift = arith.addi %t, %c5 : index
      %other = arith.remui %shift, %c64 : index
      %cv = memref.load %tile[%other] : memref<64xi32, #gpu.address_space<workgroup>>
      gpu.barrier
      %t32 = arith.index_cast %t : index to i32
      %p = memref.load %private[%slot] : memref<4xi32>
      %s1 = arith.addi %a, %bv : i32
      %s2 = arith.addi %s1, %cv : i32
      %s3 = arith.addi %s2, %u : i32
      %s4 = arith.addi %s3, %t32 : i32
      %s5 = arith.addi %s4, %p : i32
      memref.store %s5, %out[%i] : memref<?xi32>
      gpu.return
    }

    // A barrier under an scf.if whose condition is the same in every thread of a block (even
    // blocks reverse their 64 values through workgroup memory, odd blocks negate them), then a
    // barrier after the if: out[i] = r + r', with r' the result r of thread (t + 1) % 64.
    gpu.func @uniform_if(%in: memref<?xi32>, %out: memref<?xi32>)
        workgroup(%tile: memref<64xi32, #gpu.address_space<workgroup>>) kernel {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c2 = arith.constant 2 : index
      %c63 = arith.constant 63 : index
      %c64 = arith.constant 64 : index
      %zero = arith.constant 0 : i32
      %t = gpu.thread_id x
      %b = gpu.block_id x
      %base = arith.muli %b, %c64 : index
      %i = arith.addi %base, %t : index
      %x = memref.load %in[%i] : memref<?xi32>
      %parity = arith.remui %b, %c2 : index
      %even = arith.cmpi eq, %parity, %c0 : index
      %r = scf.if %even -> i32 {
        memref.store %x, %tile[%t] : memref<64xi32, #gpu.address_space<workgroup>>
        gpu.barrier
        %mirror = arith.subi %c63, %t : index
        %v = memref.load %tile[%mirror] : memref<64xi32, #gpu.address_space<workgroup>>
        scf.yield %v : i32
      } else {
        %n = arith.subi %zero, %x : i32
        scf.yield %n : i32
      }
      gpu.barrier
      memref.store %r, %tile[%t] : memref<64xi32, #gpu.address_space<workgroup>>
      gpu.barrier
      %next = arith.addi %t, %c1 : index
      %neighbour = arith.remui %next, %c64 : index
      %w = memref.load %tile[%neighbour] : memref<64xi32, #gpu.address_space<workgroup>>
      %sum = arith.addi %r, %w : i32
      memref.store %sum, %out[%i] : memref<?xi32>
      gpu.return
    }

    // Threads t >= n of the block return before the barrier: the barrier depends on the thread,
    // which fission cannot split, so the kernel runs a coroutine per thread (a build warning
    // says so). The n active threads reverse their values: out[t] = t' with t' = n - 1 - t.
    gpu.func @early_exit(%out: memref<?xi32>, %n: index)
        workgroup(%tile: memref<64xi32, #gpu.address_space<workgroup>>) kernel {
      %c1 = arith.constant 1 : index
      %t = gpu.thread_id x
      %active = arith.cmpi ult, %t, %n : index
      cf.cond_br %active, ^work, ^done
    ^work:
      %t32 = arith.index_cast %t : index to i32
      memref.store %t32, %tile[%t] : memref<64xi32, #gpu.address_space<workgroup>>
      gpu.barrier
      %last = arith.subi %n, %c1 : index
      %mirror = arith.subi %last, %t : index
      %v = memref.load %tile[%mirror] : memref<64xi32, #gpu.address_space<workgroup>>
      memref.store %v, %out[%t] : memref<?xi32>
      cf.br ^done
    ^done:
      gpu.return
    }

    // Thread 63 of block 2 sets flag[2] before every thread of its block reads it, with no
    // barrier in between: a race, so only thread 63 sees 1 and waits at the barrier. On a GPU
    // this hangs or is undefined; the host target fails the launch naming the block.
    gpu.func @racy_barrier(%flag: memref<?xi32>) kernel {
      %c2 = arith.constant 2 : index
      %c63 = arith.constant 63 : index
      %one = arith.constant 1 : i32
      %t = gpu.thread_id x
      %b = gpu.block_id x
      %last = arith.cmpi eq, %t, %c63 : index
      %block2 = arith.cmpi eq, %b, %c2 : index
      %writer = arith.andi %last, %block2 : i1
      scf.if %writer {
        memref.store %one, %flag[%b] : memref<?xi32>
      }
      %seen = memref.load %flag[%b] : memref<?xi32>
      %set = arith.cmpi eq, %seen, %one : i32
      scf.if %set {
        gpu.barrier
      }
      gpu.return
    }
    // Guards on the thread id, which the host's thread loops may leave at once the guard turns
    // its threads away for good, but only when the rest of the loop does nothing. 64 threads a
    // block; thread t of block b owns out[64 b + t].
    // Threads t < k write t + 1: the loop may stop at thread k.
    gpu.func @guard_prefix(%out: memref<?xi32>, %k: index) kernel {
      %c1 = arith.constant 1 : index
      %c64 = arith.constant 64 : index
      %t = gpu.thread_id x
      %b = gpu.block_id x
      %base = arith.muli %b, %c64 : index
      %i = arith.addi %base, %t : index
      %active = arith.cmpi ult, %t, %k : index
      scf.if %active {
        %v = arith.addi %t, %c1 : index
        %v32 = arith.index_cast %v : index to i32
        memref.store %v32, %out[%i] : memref<?xi32>
      }
      gpu.return
    }
    // Threads t >= k write t + 1: the threads turned away come first, the loop must not stop.
    gpu.func @guard_suffix(%out: memref<?xi32>, %k: index) kernel {
      %c1 = arith.constant 1 : index
      %c64 = arith.constant 64 : index
      %t = gpu.thread_id x
      %b = gpu.block_id x
      %base = arith.muli %b, %c64 : index
      %i = arith.addi %base, %t : index
      %late = arith.cmpi uge, %t, %k : index
      scf.if %late {
        %v = arith.addi %t, %c1 : index
        %v32 = arith.index_cast %v : index to i32
        memref.store %v32, %out[%i] : memref<?xi32>
      }
      gpu.return
    }
    // Threads t < k write t + 1 to out, then every thread writes 7 to other: the threads
    // turned away still write, the loop must not stop.
    gpu.func @guard_then_store(%out: memref<?xi32>, %other: memref<?xi32>, %k: index) kernel {
      %c1 = arith.constant 1 : index
      %c64 = arith.constant 64 : index
      %seven = arith.constant 7 : i32
      %t = gpu.thread_id x
      %b = gpu.block_id x
      %base = arith.muli %b, %c64 : index
      %i = arith.addi %base, %t : index
      %active = arith.cmpi ult, %t, %k : index
      scf.if %active {
        %v = arith.addi %t, %c1 : index
        %v32 = arith.index_cast %v : index to i32
        memref.store %v32, %out[%i] : memref<?xi32>
      }
      memref.store %seven, %other[%i] : memref<?xi32>
      gpu.return
    }
  }
}
