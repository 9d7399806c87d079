// Kernels for the Vulkan target (`tests/runtime/vulkan.rs` runs them on every Vulkan device, lavapipe
// here, against the host target and plain Rust): what SPIR-V needs is supplied by the pipeline,
// so these are ordinary target-neutral kernels (`any_block` without a `known_block_size`: the
// launch chooses its size). Between them they use
// workgroup memory, barriers, subgroup reductions, every gpu.all_reduce, 2-D memrefs with a static inner size, and
// 8-, 16- and 64-bit types (capabilities from use).
module attributes {gpu.container_module} {
  gpu.module @vk {
    // out[i] = i + 1000 * (threads per block), i the thread's linear index over the whole grid
    // (x fastest, in blocks and in threads): written for no particular block size, so every
    // id and size built-in is read in all three dimensions.
    gpu.func @any_block(%out: memref<?xi32>, %n: index) kernel {
      %bx = gpu.block_dim x
      %by = gpu.block_dim y
      %bz = gpu.block_dim z
      %tx = gpu.thread_id x
      %ty = gpu.thread_id y
      %tz = gpu.thread_id z
      %gx = gpu.grid_dim x
      %gy = gpu.grid_dim y
      %ix = gpu.block_id x
      %iy = gpu.block_id y
      %iz = gpu.block_id z
      %plane = arith.muli %bx, %by : index
      %threads = arith.muli %plane, %bz : index
      %tzy = arith.muli %tz, %by : index
      %trow = arith.addi %tzy, %ty : index
      %trow_x = arith.muli %trow, %bx : index
      %local = arith.addi %trow_x, %tx : index
      %izy = arith.muli %iz, %gy : index
      %brow = arith.addi %izy, %iy : index
      %brow_x = arith.muli %brow, %gx : index
      %block = arith.addi %brow_x, %ix : index
      %first = arith.muli %block, %threads : index
      %i = arith.addi %first, %local : index
      %in_range = arith.cmpi ult, %i, %n : index
      scf.if %in_range {
        %c1000 = arith.constant 1000 : index
        %tag = arith.muli %threads, %c1000 : index
        %value = arith.addi %i, %tag : index
        %v = arith.index_cast %value : index to i32
        memref.store %v, %out[%i] : memref<?xi32>
      }
      gpu.return
    }

    // x[i] *= factor (the cookbook's `scale`).
    gpu.func @scale(%x: memref<?xf32>, %factor: f32, %n: index) kernel
        attributes {known_block_size = array<i32: 128, 1, 1>} {
      %i = gpu.global_id x
      %in_range = arith.cmpi ult, %i, %n : index
      scf.if %in_range {
        %v = memref.load %x[%i] : memref<?xf32>
        %scaled = arith.mulf %v, %factor : f32
        memref.store %scaled, %x[%i] : memref<?xf32>
      }
      gpu.return
    }

    // y[r][c] = x[r][c] + offset over rows of 300 (a 2-D memref whose inner size is static; its
    // dynamic size comes as an argument: Vulkan kernels cannot read a buffer's size).
    gpu.func @shift_rows(%x: memref<?x300xi32>, %y: memref<?x300xi32>, %offset: i32, %rows: index) kernel
        attributes {known_block_size = array<i32: 64, 1, 1>} {
      %c300 = arith.constant 300 : index
      %row = gpu.block_id y
      %col = gpu.global_id x
      %row_ok = arith.cmpi ult, %row, %rows : index
      %col_ok = arith.cmpi ult, %col, %c300 : index
      %ok = arith.andi %row_ok, %col_ok : i1
      scf.if %ok {
        %v = memref.load %x[%row, %col] : memref<?x300xi32>
        %w = arith.addi %v, %offset : i32
        memref.store %w, %y[%row, %col] : memref<?x300xi32>
      }
      gpu.return
    }

    // x[i][j][k] = 1000 ((i d1 + j) d2 + k) + 100 d0 + 10 d1 + d2 for thread (k, j, i) of one
    // block, over a 3-D memref whose sizes (d0, d1, d2) all come at launch and are read with
    // memref.dim: the SPIR-V targets pass them as hidden arguments and index the buffer
    // row-major with them.
    gpu.func @tag_dims(%x: memref<?x?x?xi32>) kernel {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c2 = arith.constant 2 : index
      %c10 = arith.constant 10 : index
      %c100 = arith.constant 100 : index
      %c1000 = arith.constant 1000 : index
      %d0 = memref.dim %x, %c0 : memref<?x?x?xi32>
      %d1 = memref.dim %x, %c1 : memref<?x?x?xi32>
      %d2 = memref.dim %x, %c2 : memref<?x?x?xi32>
      %k = gpu.thread_id x
      %j = gpu.thread_id y
      %i = gpu.thread_id z
      %i_ok = arith.cmpi ult, %i, %d0 : index
      %j_ok = arith.cmpi ult, %j, %d1 : index
      %k_ok = arith.cmpi ult, %k, %d2 : index
      %ij_ok = arith.andi %i_ok, %j_ok : i1
      %ok = arith.andi %ij_ok, %k_ok : i1
      scf.if %ok {
        %row = arith.muli %i, %d1 : index
        %plane = arith.addi %row, %j : index
        %scaled = arith.muli %plane, %d2 : index
        %linear = arith.addi %scaled, %k : index
        %tag_linear = arith.muli %linear, %c1000 : index
        %tag_d0 = arith.muli %d0, %c100 : index
        %tag_d1 = arith.muli %d1, %c10 : index
        %tag_sizes = arith.addi %tag_d0, %tag_d1 : index
        %tag_all = arith.addi %tag_sizes, %d2 : index
        %tag = arith.addi %tag_linear, %tag_all : index
        %v = arith.index_cast %tag : index to i32
        memref.store %v, %x[%i, %j, %k] : memref<?x?x?xi32>
      }
      gpu.return
    }

    // out[block] = the largest of the block's 64 values: a tree in workgroup memory.
    gpu.func @block_max(%in: memref<?xi32>, %out: memref<?xi32>)
        workgroup(%tile: memref<64xi32, #gpu.address_space<workgroup>>) kernel
        attributes {known_block_size = array<i32: 64, 1, 1>} {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c6 = arith.constant 6 : index
      %c32 = arith.constant 32 : index
      %block = gpu.block_id x
      %thread = gpu.thread_id x
      %i = gpu.global_id x
      %value = memref.load %in[%i] : memref<?xi32>
      memref.store %value, %tile[%thread] : memref<64xi32, #gpu.address_space<workgroup>>
      scf.for %step = %c0 to %c6 step %c1 {
        gpu.barrier
        %stride = arith.shrui %c32, %step : index
        %active = arith.cmpi ult, %thread, %stride : index
        scf.if %active {
          %other = arith.addi %thread, %stride : index
          %mine = memref.load %tile[%thread] : memref<64xi32, #gpu.address_space<workgroup>>
          %theirs = memref.load %tile[%other] : memref<64xi32, #gpu.address_space<workgroup>>
          %larger = arith.maxsi %mine, %theirs : i32
          memref.store %larger, %tile[%thread] : memref<64xi32, #gpu.address_space<workgroup>>
        }
      }
      gpu.barrier
      %first = arith.cmpi eq, %thread, %c0 : index
      scf.if %first {
        %total = memref.load %tile[%c0] : memref<64xi32, #gpu.address_space<workgroup>>
        memref.store %total, %out[%block] : memref<?xi32>
      }
      gpu.return
    }

    // out[i] = the sum of x over i's subgroup (as many threads as the device's subgroup).
    gpu.func @subgroup_sum(%x: memref<?xi32>, %out: memref<?xi32>) kernel
        attributes {known_block_size = array<i32: 64, 1, 1>} {
      %i = gpu.global_id x
      %v = memref.load %x[%i] : memref<?xi32>
      %sum = gpu.subgroup_reduce add %v uniform : (i32) -> i32
      memref.store %sum, %out[%i] : memref<?xi32>
      gpu.return
    }

    // out[i] = the sum of x over i's 32 lanes, by a butterfly of xor shuffles (on Vulkan through
    // workgroup memory where subgroups are narrower than 32).
    gpu.func @shuffle_sum(%x: memref<?xi32>, %out: memref<?xi32>) kernel
        attributes {known_block_size = array<i32: 64, 1, 1>} {
      %i = gpu.global_id x
      %v = memref.load %x[%i] : memref<?xi32>
      %width = arith.constant 32 : i32
      %c16 = arith.constant 16 : i32
      %c8 = arith.constant 8 : i32
      %c4 = arith.constant 4 : i32
      %c2 = arith.constant 2 : i32
      %c1 = arith.constant 1 : i32
      %s16, %ok16 = gpu.shuffle xor %v, %c16, %width : i32
      %a16 = arith.addi %v, %s16 : i32
      %s8, %ok8 = gpu.shuffle xor %a16, %c8, %width : i32
      %a8 = arith.addi %a16, %s8 : i32
      %s4, %ok4 = gpu.shuffle xor %a8, %c4, %width : i32
      %a4 = arith.addi %a8, %s4 : i32
      %s2, %ok2 = gpu.shuffle xor %a4, %c2, %width : i32
      %a2 = arith.addi %a4, %s2 : i32
      %s1, %ok1 = gpu.shuffle xor %a2, %c1, %width : i32
      %a1 = arith.addi %a2, %s1 : i32
      memref.store %a1, %out[%i] : memref<?xi32>
      gpu.return
    }

    // c[i] = a[i] + int(b[i]) + k: 8-bit, half and 64-bit values.
    gpu.func @widths(%a: memref<?xi8>, %b: memref<?xf16>, %c: memref<?xi64>, %k: i64, %n: index) kernel
        attributes {known_block_size = array<i32: 32, 1, 1>} {
      %i = gpu.global_id x
      %in_range = arith.cmpi ult, %i, %n : index
      scf.if %in_range {
        %x = memref.load %a[%i] : memref<?xi8>
        %y = memref.load %b[%i] : memref<?xf16>
        %wide = arith.extsi %x : i8 to i64
        %whole = arith.fptosi %y : f16 to i64
        %sum = arith.addi %wide, %whole : i64
        %total = arith.addi %sum, %k : i64
        memref.store %total, %c[%i] : memref<?xi64>
      }
      gpu.return
    }
    // Every gpu.all_reduce operation over each block of 320 threads (more than the SPIR-V
    // lowering's 256 slots: two chunks), written by thread 0: out[10 b + k] for k = add, mul,
    // minsi, maxsi, minui, maxui, and, or, xor and a region (minui), fout[2 b + k] for add and
    // maximumf of floats.
    gpu.func @reductions(%in: memref<?xi32>, %fin: memref<?xf32>, %out: memref<?xi32>,
                         %fout: memref<?xf32>) kernel
        attributes {known_block_size = array<i32: 320, 1, 1>} {
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
      %c10 = arith.constant 10 : index
      %c320 = arith.constant 320 : index
      %b = gpu.block_id x
      %t = gpu.thread_id x
      %base = arith.muli %b, %c320 : index
      %i = arith.addi %base, %t : index
      %x = memref.load %in[%i] : memref<?xi32>
      %f = memref.load %fin[%i] : memref<?xf32>
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
      ^bb(%lhs : i32, %rhs : i32):
        %m = arith.minui %lhs, %rhs : i32
        gpu.yield %m : i32
      } : (i32) -> (i32)
      %fadd = gpu.all_reduce add %f uniform {} : (f32) -> (f32)
      %fmax = gpu.all_reduce maximumf %f uniform {} : (f32) -> (f32)
      %first = arith.cmpi eq, %t, %c0 : index
      scf.if %first {
        %o = arith.muli %b, %c10 : index
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
        %fo = arith.muli %b, %c2 : index
        %fo1 = arith.addi %fo, %c1 : index
        memref.store %fadd, %fout[%fo] : memref<?xf32>
        memref.store %fmax, %fout[%fo1] : memref<?xf32>
      }
      gpu.return
    }

    // Reductions over blocks of 16 x 4 x 2 threads (one chunk of the SPIR-V lowering's slots,
    // which it folds with no loop around its barriers where the block is declared), written by
    // the block's thread (0, 0, 0): out[3 b + k] for k = add, minsi and a region (minui),
    // fout[b] the maximumf of floats. Thread (x, y, z) takes element 128 b + x + 16 (y + 4 z).
    gpu.func @reductions_in_one_chunk(%in: memref<?xi32>, %fin: memref<?xf32>,
                                      %out: memref<?xi32>, %fout: memref<?xf32>) kernel
        attributes {known_block_size = array<i32: 16, 4, 2>} {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c2 = arith.constant 2 : index
      %c3 = arith.constant 3 : index
      %c4 = arith.constant 4 : index
      %c16 = arith.constant 16 : index
      %c128 = arith.constant 128 : index
      %b = gpu.block_id x
      %tx = gpu.thread_id x
      %ty = gpu.thread_id y
      %tz = gpu.thread_id z
      %z4 = arith.muli %tz, %c4 : index
      %row = arith.addi %z4, %ty : index
      %rows = arith.muli %row, %c16 : index
      %t = arith.addi %rows, %tx : index
      %base = arith.muli %b, %c128 : index
      %i = arith.addi %base, %t : index
      %x = memref.load %in[%i] : memref<?xi32>
      %f = memref.load %fin[%i] : memref<?xf32>
      %add = gpu.all_reduce add %x uniform {} : (i32) -> (i32)
      %minsi = gpu.all_reduce minsi %x uniform {} : (i32) -> (i32)
      %region = gpu.all_reduce %x uniform {
      ^bb(%lhs : i32, %rhs : i32):
        %m = arith.minui %lhs, %rhs : i32
        gpu.yield %m : i32
      } : (i32) -> (i32)
      %fmax = gpu.all_reduce maximumf %f uniform {} : (f32) -> (f32)
      %first = arith.cmpi eq, %t, %c0 : index
      scf.if %first {
        %o = arith.muli %b, %c3 : index
        %o1 = arith.addi %o, %c1 : index
        %o2 = arith.addi %o, %c2 : index
        memref.store %add, %out[%o] : memref<?xi32>
        memref.store %minsi, %out[%o1] : memref<?xi32>
        memref.store %region, %out[%o2] : memref<?xi32>
        memref.store %fmax, %fout[%b] : memref<?xf32>
      }
      gpu.return
    }

    // Every memref.atomic_rmw kind and a memref.generic_atomic_rmw, on global and workgroup
    // memory (`support/atomics.rs` lowers them for both SPIR-V targets). Thread g < n takes
    // v = in[g] and: counts v & 15 in its block's workgroup bins (its ticket, the bin's old
    // count, to olds[g]); folds v into ints[16..26] by addi, andi, ori, xori, maxs, mins, maxu,
    // minu, muli (v | 1) and a generic atomic adding v * v; exchanges g + 1 into ints[26] (the
    // old value to olds[n + g]); folds v / 4 into floats[0..6] by addf, maximumf, minimumf,
    // maxnumf and minnumf. Then threads 0..16 add their block's bins to ints[0..16]. (Float
    // products are in `spirv_atomics.mlir`: the LLVM targets refuse them.)
    gpu.func @atomics(%in: memref<?xi32>, %ints: memref<?xi32>, %floats: memref<?xf32>,
                      %olds: memref<?xi32>, %n: index)
        workgroup(%bins: memref<16xi32, #gpu.address_space<workgroup>>) kernel {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c2 = arith.constant 2 : index
      %c3 = arith.constant 3 : index
      %c4 = arith.constant 4 : index
      %c16 = arith.constant 16 : index
      %c17 = arith.constant 17 : index
      %c18 = arith.constant 18 : index
      %c19 = arith.constant 19 : index
      %c20 = arith.constant 20 : index
      %c21 = arith.constant 21 : index
      %c22 = arith.constant 22 : index
      %c23 = arith.constant 23 : index
      %c24 = arith.constant 24 : index
      %c25 = arith.constant 25 : index
      %c26 = arith.constant 26 : index
      %zero = arith.constant 0 : i32
      %one = arith.constant 1 : i32
      %fifteen = arith.constant 15 : i32
      %quarter = arith.constant 0.25 : f32
      %t = gpu.thread_id x
      %g = gpu.global_id x
      %first_bins = arith.cmpi ult, %t, %c16 : index
      scf.if %first_bins {
        memref.store %zero, %bins[%t] : memref<16xi32, #gpu.address_space<workgroup>>
      }
      gpu.barrier
      %inside = arith.cmpi ult, %g, %n : index
      scf.if %inside {
        %v = memref.load %in[%g] : memref<?xi32>
        %bin_value = arith.andi %v, %fifteen : i32
        %bin = arith.index_cast %bin_value : i32 to index
        %ticket = memref.atomic_rmw addi %one, %bins[%bin] : (i32, memref<16xi32, #gpu.address_space<workgroup>>) -> i32
        memref.store %ticket, %olds[%g] : memref<?xi32>
        %a0 = memref.atomic_rmw addi %v, %ints[%c16] : (i32, memref<?xi32>) -> i32
        %a1 = memref.atomic_rmw andi %v, %ints[%c17] : (i32, memref<?xi32>) -> i32
        %a2 = memref.atomic_rmw ori %v, %ints[%c18] : (i32, memref<?xi32>) -> i32
        %a3 = memref.atomic_rmw xori %v, %ints[%c19] : (i32, memref<?xi32>) -> i32
        %a4 = memref.atomic_rmw maxs %v, %ints[%c20] : (i32, memref<?xi32>) -> i32
        %a5 = memref.atomic_rmw mins %v, %ints[%c21] : (i32, memref<?xi32>) -> i32
        %a6 = memref.atomic_rmw maxu %v, %ints[%c22] : (i32, memref<?xi32>) -> i32
        %a7 = memref.atomic_rmw minu %v, %ints[%c23] : (i32, memref<?xi32>) -> i32
        %odd = arith.ori %v, %one : i32
        %a8 = memref.atomic_rmw muli %odd, %ints[%c24] : (i32, memref<?xi32>) -> i32
        %a9 = memref.generic_atomic_rmw %ints[%c25] : memref<?xi32> {
        ^bb0(%current: i32):
          %square = arith.muli %v, %v : i32
          %sum = arith.addi %current, %square : i32
          memref.atomic_yield %sum : i32
        }
        %g_i32 = arith.index_cast %g : index to i32
        %mine = arith.addi %g_i32, %one : i32
        %swapped = memref.atomic_rmw assign %mine, %ints[%c26] : (i32, memref<?xi32>) -> i32
        %after_n = arith.addi %g, %n : index
        memref.store %swapped, %olds[%after_n] : memref<?xi32>
        %vf = arith.sitofp %v : i32 to f32
        %f = arith.mulf %vf, %quarter : f32
        %f0 = memref.atomic_rmw addf %f, %floats[%c0] : (f32, memref<?xf32>) -> f32
        %f1 = memref.atomic_rmw maximumf %f, %floats[%c1] : (f32, memref<?xf32>) -> f32
        %f2 = memref.atomic_rmw minimumf %f, %floats[%c2] : (f32, memref<?xf32>) -> f32
        %f3 = memref.atomic_rmw maxnumf %f, %floats[%c3] : (f32, memref<?xf32>) -> f32
        %f4 = memref.atomic_rmw minnumf %f, %floats[%c4] : (f32, memref<?xf32>) -> f32
      }
      gpu.barrier
      scf.if %first_bins {
        %count = memref.load %bins[%t] : memref<16xi32, #gpu.address_space<workgroup>>
        %total = memref.atomic_rmw addi %count, %ints[%t] : (i32, memref<?xi32>) -> i32
      }
      gpu.return
    }
  }

  // Shuffles of every mode at a width below the subgroup's (`support/shuffle.rs`: the
  // subgroup's own shuffle where the device has subgroup operations).
  gpu.module @vk_shuffle {
    // out[4 i + m] = shuffle m (xor, up, down, idx) of x over segments of 4 lanes, offset 1
    // (idx: lane 1); -1000 where the source lane is outside the segment.
    gpu.func @shuffle_modes(%x: memref<?xi32>, %out: memref<?xi32>) kernel {
      %i = gpu.global_id x
      %v = memref.load %x[%i] : memref<?xi32>
      %width = arith.constant 4 : i32
      %one = arith.constant 1 : i32
      %invalid = arith.constant -1000 : i32
      %c4 = arith.constant 4 : index
      %base = arith.muli %i, %c4 : index
      %x0, %ok0 = gpu.shuffle xor %v, %one, %width : i32
      %x1, %ok1 = gpu.shuffle up %v, %one, %width : i32
      %x2, %ok2 = gpu.shuffle down %v, %one, %width : i32
      %x3, %ok3 = gpu.shuffle idx %v, %one, %width : i32
      %r0 = arith.select %ok0, %x0, %invalid : i32
      %r1 = arith.select %ok1, %x1, %invalid : i32
      %r2 = arith.select %ok2, %x2, %invalid : i32
      %r3 = arith.select %ok3, %x3, %invalid : i32
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c2 = arith.constant 2 : index
      %c3 = arith.constant 3 : index
      %a0 = arith.addi %base, %c0 : index
      %a1 = arith.addi %base, %c1 : index
      %a2 = arith.addi %base, %c2 : index
      %a3 = arith.addi %base, %c3 : index
      memref.store %r0, %out[%a0] : memref<?xi32>
      memref.store %r1, %out[%a1] : memref<?xi32>
      memref.store %r2, %out[%a2] : memref<?xi32>
      memref.store %r3, %out[%a3] : memref<?xi32>
      gpu.return
    }
  }
}
