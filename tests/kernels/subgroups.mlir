// Subgroup operations the host target emulates (subgroups of 32 threads), checked against
// plain-Rust references in tests/runtime/host_semantics.rs; also compiled for NVPTX and AMDGPU.
module attributes {gpu.container_module} {
  gpu.module @subgroups [#nvvm.target<chip = "sm_80">, #rocdl.target<chip = "gfx90a">] {
    // Thread t (linear id in its block) of block b holds v = 1000 b + 10 t + 1 and shuffles it
    // four ways with `offset` and `width`: out[4 i + m] and valid[4 i + m] for mode m = xor,
    // up, down, idx, where i = the thread's global linear index.
    gpu.func @shuffles(%out: memref<?xi32>, %valid: memref<?xi32>, %offset: i32, %width: i32) kernel {
      %c4 = arith.constant 4 : index
      %c1 = arith.constant 1 : index
      %c2 = arith.constant 2 : index
      %c3 = arith.constant 3 : index
      %tx = gpu.thread_id x
      %ty = gpu.thread_id y
      %dx = gpu.block_dim x
      %dy = gpu.block_dim y
      %b = gpu.block_id x
      %row = arith.muli %ty, %dx : index
      %t = arith.addi %row, %tx : index
      %size = arith.muli %dx, %dy : index
      %first = arith.muli %b, %size : index
      %i = arith.addi %first, %t : index
      %b1000 = arith.muli %b, %c4 : index
      %t32 = arith.index_cast %t : index to i32
      %b32 = arith.index_cast %b : index to i32
      %k1000 = arith.constant 1000 : i32
      %k10 = arith.constant 10 : i32
      %one = arith.constant 1 : i32
      %vb = arith.muli %b32, %k1000 : i32
      %vt = arith.muli %t32, %k10 : i32
      %vbt = arith.addi %vb, %vt : i32
      %v = arith.addi %vbt, %one : i32
      %x, %xv = gpu.shuffle xor %v, %offset, %width : i32
      %u, %uv = gpu.shuffle up %v, %offset, %width : i32
      %d, %dv = gpu.shuffle down %v, %offset, %width : i32
      %n, %nv = gpu.shuffle idx %v, %offset, %width : i32
      %base = arith.muli %i, %c4 : index
      %s1 = arith.addi %base, %c1 : index
      %s2 = arith.addi %base, %c2 : index
      %s3 = arith.addi %base, %c3 : index
      memref.store %x, %out[%base] : memref<?xi32>
      memref.store %u, %out[%s1] : memref<?xi32>
      memref.store %d, %out[%s2] : memref<?xi32>
      memref.store %n, %out[%s3] : memref<?xi32>
      %xi = arith.extui %xv : i1 to i32
      %ui = arith.extui %uv : i1 to i32
      %di = arith.extui %dv : i1 to i32
      %ni = arith.extui %nv : i1 to i32
      memref.store %xi, %valid[%base] : memref<?xi32>
      memref.store %ui, %valid[%s1] : memref<?xi32>
      memref.store %di, %valid[%s2] : memref<?xi32>
      memref.store %ni, %valid[%s3] : memref<?xi32>
      gpu.return
    }

    // A butterfly sum over f32 in each subgroup of 32: every thread ends with its subgroup's
    // sum of x. out[i] = that sum; lane[i] = gpu.lane_id.
    gpu.func @warp_sum(%x: memref<?xf32>, %out: memref<?xf32>, %lane: memref<?xi32>) kernel {
      %c32 = arith.constant 32 : i32
      %t = gpu.thread_id x
      %dx = gpu.block_dim x
      %b = gpu.block_id x
      %first = arith.muli %b, %dx : index
      %i = arith.addi %first, %t : index
      %v = memref.load %x[%i] : memref<?xf32>
      %s1 = arith.constant 1 : i32
      %s2 = arith.constant 2 : i32
      %s4 = arith.constant 4 : i32
      %s8 = arith.constant 8 : i32
      %s16 = arith.constant 16 : i32
      %a1, %p1 = gpu.shuffle xor %v, %s16, %c32 : f32
      %v1 = arith.addf %v, %a1 : f32
      %a2, %p2 = gpu.shuffle xor %v1, %s8, %c32 : f32
      %v2 = arith.addf %v1, %a2 : f32
      %a3, %p3 = gpu.shuffle xor %v2, %s4, %c32 : f32
      %v3 = arith.addf %v2, %a3 : f32
      %a4, %p4 = gpu.shuffle xor %v3, %s2, %c32 : f32
      %v4 = arith.addf %v3, %a4 : f32
      %a5, %p5 = gpu.shuffle xor %v4, %s1, %c32 : f32
      %v5 = arith.addf %v4, %a5 : f32
      memref.store %v5, %out[%i] : memref<?xf32>
      %l = gpu.lane_id
      %l32 = arith.index_cast %l : index to i32
      memref.store %l32, %lane[%i] : memref<?xi32>
      gpu.return
    }

    // A block sum as CUDA code writes it: a butterfly in every subgroup, lane 0 of each stores
    // its subgroup's sum in workgroup memory, a barrier, then only the first subgroup
    // (`if (warp == 0)`: control flow that depends on the thread) sums those partial sums with
    // shuffles in a loop, and its lane 0 writes out[b]. Blocks of whole subgroups, at most 32.
    gpu.func @warp_then_block(%x: memref<?xf32>, %out: memref<?xf32>)
        workgroup(%partial: memref<32xf32, #gpu.address_space<workgroup>>) kernel {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c5 = arith.constant 5 : index
      %c32 = arith.constant 32 : index
      %w32 = arith.constant 32 : i32
      %one = arith.constant 1 : i32
      %sixteen = arith.constant 16 : i32
      %zero = arith.constant 0.0 : f32
      %t = gpu.thread_id x
      %dx = gpu.block_dim x
      %b = gpu.block_id x
      %first = arith.muli %b, %dx : index
      %i = arith.addi %first, %t : index
      %v = memref.load %x[%i] : memref<?xf32>
      %sum = scf.for %k = %c0 to %c5 step %c1 iter_args(%acc = %v) -> (f32) {
        %k32 = arith.index_cast %k : index to i32
        %offset = arith.shrui %sixteen, %k32 : i32
        %other, %ok = gpu.shuffle xor %acc, %offset, %w32 : f32
        %next = arith.addf %acc, %other : f32
        scf.yield %next : f32
      }
      %lane = arith.remui %t, %c32 : index
      %warp = arith.divui %t, %c32 : index
      %lane0 = arith.cmpi eq, %lane, %c0 : index
      scf.if %lane0 {
        memref.store %sum, %partial[%warp] : memref<32xf32, #gpu.address_space<workgroup>>
      }
      gpu.barrier
      %warps = arith.divui %dx, %c32 : index
      %warp0 = arith.cmpi eq, %warp, %c0 : index
      scf.if %warp0 {
        %has = arith.cmpi ult, %lane, %warps : index
        %p = scf.if %has -> (f32) {
          %loaded = memref.load %partial[%lane] : memref<32xf32, #gpu.address_space<workgroup>>
          scf.yield %loaded : f32
        } else {
          scf.yield %zero : f32
        }
        %total = scf.for %k = %c0 to %c5 step %c1 iter_args(%acc = %p) -> (f32) {
          %k32 = arith.index_cast %k : index to i32
          %offset = arith.shrui %sixteen, %k32 : i32
          %other, %ok = gpu.shuffle xor %acc, %offset, %w32 : f32
          %next = arith.addf %acc, %other : f32
          scf.yield %next : f32
        }
        scf.if %lane0 {
          memref.store %total, %out[%b] : memref<?xf32>
        }
      }
      gpu.return
    }

    // A shuffle only half of each subgroup runs (`if (lane < 16)`): a GPU leaves it undefined
    // (`shfl.sync` with a full mask); the host's launch fails, naming the block.
    gpu.func @split_subgroup(%out: memref<?xi32>) kernel {
      %c16 = arith.constant 16 : index
      %c32 = arith.constant 32 : index
      %one = arith.constant 1 : i32
      %w32 = arith.constant 32 : i32
      %t = gpu.thread_id x
      %lane = arith.remui %t, %c32 : index
      %low = arith.cmpi ult, %lane, %c16 : index
      %v = arith.index_cast %t : index to i32
      scf.if %low {
        %other, %ok = gpu.shuffle xor %v, %one, %w32 : i32
        memref.store %other, %out[%t] : memref<?xi32>
      }
      gpu.return
    }

    // gpu.all_reduce over the block, every operation: out[11 b + k] for k = add, mul, minsi,
    // maxsi, minui, maxui, and, or, xor (on x), then add and maximumf on f32 (on x as f32).
    // Thread 0 of each block writes.
    gpu.func @all_reduce(%in: memref<?xi32>, %out: memref<?xi32>, %fout: memref<?xf32>) kernel {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c2 = arith.constant 2 : index
      %c3 = arith.constant 3 : index
      %c4 = arith.constant 4 : index
      %c5 = arith.constant 5 : index
      %c6 = arith.constant 6 : index
      %c7 = arith.constant 7 : index
      %c8 = arith.constant 8 : index
      %c9 = arith.constant 9 : index
      %t = gpu.thread_id x
      %dx = gpu.block_dim x
      %b = gpu.block_id x
      %first = arith.muli %b, %dx : index
      %i = arith.addi %first, %t : index
      %x = memref.load %in[%i] : memref<?xi32>
      %f = arith.sitofp %x : i32 to f32
      %add = gpu.all_reduce add %x uniform {} : (i32) -> (i32)
      %mul = gpu.all_reduce mul %x uniform {} : (i32) -> (i32)
      %minsi = gpu.all_reduce minsi %x uniform {} : (i32) -> (i32)
      %maxsi = gpu.all_reduce maxsi %x uniform {} : (i32) -> (i32)
      %minui = gpu.all_reduce minui %x uniform {} : (i32) -> (i32)
      %maxui = gpu.all_reduce maxui %x uniform {} : (i32) -> (i32)
      %and = gpu.all_reduce and %x uniform {} : (i32) -> (i32)
      %or = gpu.all_reduce or %x uniform {} : (i32) -> (i32)
      %xor = gpu.all_reduce xor %x uniform {} : (i32) -> (i32)
      %region = gpu.all_reduce %x uniform {
      ^bb(%l : i32, %r : i32):
        %s = arith.subi %l, %r : i32
        %sq = arith.muli %s, %s : i32
        %m = arith.maxsi %l, %r : i32
        %keep = arith.cmpi sgt, %sq, %m : i32
        %y = arith.select %keep, %m, %l : i32
        %z = arith.maxsi %y, %r : i32
        gpu.yield %z : i32
      } : (i32) -> (i32)
      %fadd = gpu.all_reduce add %f uniform {} : (f32) -> (f32)
      %fmax = gpu.all_reduce maximumf %f uniform {} : (f32) -> (f32)
      %is0 = arith.cmpi eq, %t, %c0 : index
      scf.if %is0 {
        %k11 = arith.constant 11 : index
        %o = arith.muli %b, %k11 : index
        %o1 = arith.addi %o, %c1 : index
        %o2 = arith.addi %o, %c2 : index
        %o3 = arith.addi %o, %c3 : index
        %o4 = arith.addi %o, %c4 : index
        %o5 = arith.addi %o, %c5 : index
        %o6 = arith.addi %o, %c6 : index
        %o7 = arith.addi %o, %c7 : index
        %o8 = arith.addi %o, %c8 : index
        %o9 = arith.addi %o, %c9 : index
        memref.store %add, %out[%o] : memref<?xi32>
        memref.store %mul, %out[%o1] : memref<?xi32>
        memref.store %minsi, %out[%o2] : memref<?xi32>
        memref.store %maxsi, %out[%o3] : memref<?xi32>
        memref.store %minui, %out[%o4] : memref<?xi32>
        memref.store %maxui, %out[%o5] : memref<?xi32>
        memref.store %and, %out[%o6] : memref<?xi32>
        memref.store %or, %out[%o7] : memref<?xi32>
        memref.store %xor, %out[%o8] : memref<?xi32>
        memref.store %region, %out[%o9] : memref<?xi32>
        %b2 = arith.muli %b, %c2 : index
        %b21 = arith.addi %b2, %c1 : index
        memref.store %fadd, %fout[%b2] : memref<?xf32>
        memref.store %fmax, %fout[%b21] : memref<?xf32>
      }
      gpu.return
    }
  }
}
