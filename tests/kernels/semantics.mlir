// Kernels whose results depend on GPU semantics the host target must reproduce.
module attributes {gpu.container_module} {
  gpu.module @semantics {
    // out[b*256 + t] = in[b*256 + 255 - t], through workgroup memory. Without the barrier a thread
    // reads tile slots other threads have not written yet.
    gpu.func @reverse(%in: memref<?xf32>, %out: memref<?xf32>)
        workgroup(%tile: memref<256xf32, #gpu.address_space<workgroup>>) kernel {
      %c255 = arith.constant 255 : index
      %c256 = arith.constant 256 : index
      %t = gpu.thread_id x
      %b = gpu.block_id x
      %base = arith.muli %b, %c256 : index
      %i = arith.addi %base, %t : index
      %v = memref.load %in[%i] : memref<?xf32>
      memref.store %v, %tile[%t] : memref<256xf32, #gpu.address_space<workgroup>>
      gpu.barrier
      %mirror = arith.subi %c255, %t : index
      %w = memref.load %tile[%mirror] : memref<256xf32, #gpu.address_space<workgroup>>
      memref.store %w, %out[%i] : memref<?xf32>
      gpu.return
    }
    // The same without the barrier: wrong on any target that does not happen to run the block's
    // threads in lockstep.
    gpu.func @reverse_without_barrier(%in: memref<?xf32>, %out: memref<?xf32>)
        workgroup(%tile: memref<256xf32, #gpu.address_space<workgroup>>) kernel {
      %c255 = arith.constant 255 : index
      %c256 = arith.constant 256 : index
      %t = gpu.thread_id x
      %b = gpu.block_id x
      %base = arith.muli %b, %c256 : index
      %i = arith.addi %base, %t : index
      %v = memref.load %in[%i] : memref<?xf32>
      memref.store %v, %tile[%t] : memref<256xf32, #gpu.address_space<workgroup>>
      %mirror = arith.subi %c255, %t : index
      %w = memref.load %tile[%mirror] : memref<256xf32, #gpu.address_space<workgroup>>
      memref.store %w, %out[%i] : memref<?xf32>
      gpu.return
    }
    // Every thread writes its block id into the block's tile, waits, then reads a neighbour's
    // slot: any value but its own block id means blocks shared workgroup memory. The loop of
    // barriers keeps blocks running long enough to overlap.
    gpu.func @isolation(%out: memref<?xi32>, %rounds: index)
        workgroup(%tile: memref<64xi32, #gpu.address_space<workgroup>>) kernel {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c64 = arith.constant 64 : index
      %t = gpu.thread_id x
      %b = gpu.block_id x
      %b32 = arith.index_cast %b : index to i32
      %next = arith.addi %t, %c1 : index
      %neighbour = arith.remui %next, %c64 : index
      %base = arith.muli %b, %c64 : index
      %i = arith.addi %base, %t : index
      memref.store %b32, %out[%i] : memref<?xi32>
      scf.for %r = %c0 to %rounds step %c1 {
        memref.store %b32, %tile[%t] : memref<64xi32, #gpu.address_space<workgroup>>
        gpu.barrier
        %seen = memref.load %tile[%neighbour] : memref<64xi32, #gpu.address_space<workgroup>>
        %same = arith.cmpi eq, %seen, %b32 : i32
        scf.if %same {
        } else {
          %bad = arith.constant -1 : i32
          memref.store %bad, %out[%i] : memref<?xi32>
        }
        gpu.barrier
      }
      gpu.return
    }
    // out[global linear index] = every id packed: thread x,y,z | block x,y,z | block dim x,y,z |
    // grid dim x,y,z, 4 bits each (all below 16).
    gpu.func @ids(%out: memref<?xi64>) kernel {
      %tx = gpu.thread_id x
      %ty = gpu.thread_id y
      %tz = gpu.thread_id z
      %bx = gpu.block_id x
      %by = gpu.block_id y
      %bz = gpu.block_id z
      %dx = gpu.block_dim x
      %dy = gpu.block_dim y
      %dz = gpu.block_dim z
      %gx = gpu.grid_dim x
      %gy = gpu.grid_dim y
      %gz = gpu.grid_dim z
      %c16 = arith.constant 16 : index
      %p1 = arith.muli %tx, %c16 : index
      %p2 = arith.addi %p1, %ty : index
      %p3 = arith.muli %p2, %c16 : index
      %p4 = arith.addi %p3, %tz : index
      %p5 = arith.muli %p4, %c16 : index
      %p6 = arith.addi %p5, %bx : index
      %p7 = arith.muli %p6, %c16 : index
      %p8 = arith.addi %p7, %by : index
      %p9 = arith.muli %p8, %c16 : index
      %p10 = arith.addi %p9, %bz : index
      %p11 = arith.muli %p10, %c16 : index
      %p12 = arith.addi %p11, %dx : index
      %p13 = arith.muli %p12, %c16 : index
      %p14 = arith.addi %p13, %dy : index
      %p15 = arith.muli %p14, %c16 : index
      %p16 = arith.addi %p15, %dz : index
      %p17 = arith.muli %p16, %c16 : index
      %p18 = arith.addi %p17, %gx : index
      %p19 = arith.muli %p18, %c16 : index
      %p20 = arith.addi %p19, %gy : index
      %p21 = arith.muli %p20, %c16 : index
      %packed = arith.addi %p21, %gz : index
      // Linear index: ((bz*gy + by)*gx + bx) block, then ((tz*dy + ty)*dx + tx) thread.
      %l1 = arith.muli %bz, %gy : index
      %l2 = arith.addi %l1, %by : index
      %l3 = arith.muli %l2, %gx : index
      %block = arith.addi %l3, %bx : index
      %m1 = arith.muli %tz, %dy : index
      %m2 = arith.addi %m1, %ty : index
      %m3 = arith.muli %m2, %dx : index
      %thread = arith.addi %m3, %tx : index
      %d1 = arith.muli %dx, %dy : index
      %threads = arith.muli %d1, %dz : index
      %start = arith.muli %block, %threads : index
      %i = arith.addi %start, %thread : index
      %value = arith.index_cast %packed : index to i64
      memref.store %value, %out[%i] : memref<?xi64>
      gpu.return
    }
    // out[i] = in[n - 1 - i] within a block, through dynamic shared memory sized at launch.
    gpu.func @reverse_dynamic(%in: memref<?xf32>, %out: memref<?xf32>, %n: index) kernel {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %t = gpu.thread_id x
      %raw = gpu.dynamic_shared_memory : memref<?xi8, #gpu.address_space<workgroup>>
      %tile = memref.view %raw[%c0][%n] : memref<?xi8, #gpu.address_space<workgroup>> to memref<?xf32, #gpu.address_space<workgroup>>
      %v = memref.load %in[%t] : memref<?xf32>
      memref.store %v, %tile[%t] : memref<?xf32, #gpu.address_space<workgroup>>
      gpu.barrier
      %last = arith.subi %n, %c1 : index
      %mirror = arith.subi %last, %t : index
      %w = memref.load %tile[%mirror] : memref<?xf32, #gpu.address_space<workgroup>>
      memref.store %w, %out[%t] : memref<?xf32>
      gpu.return
    }
    // Each thread prints two lines, in this order: "block B thread T: first x=X" and
    // "block B thread T: second".
    gpu.func @print_lines(%x: f32) kernel {
      %t = gpu.thread_id x
      %b = gpu.block_id x
      %t32 = arith.index_cast %t : index to i32
      %b32 = arith.index_cast %b : index to i32
      gpu.printf "block %d thread %d: first x=%f\n", %b32, %t32, %x : i32, i32, f32
      gpu.printf "block %d thread %d: second\n", %b32, %t32 : i32, i32
      gpu.return
    }
    // out[i] = x[i], for x[i] >= 0: an assertion stops any thread that finds a negative value.
    gpu.func @check_non_negative(%x: memref<?xi32>, %out: memref<?xi32>) kernel {
      %t = gpu.thread_id x
      %b = gpu.block_id x
      %d = gpu.block_dim x
      %first = arith.muli %b, %d : index
      %i = arith.addi %first, %t : index
      %v = memref.load %x[%i] : memref<?xi32>
      %zero = arith.constant 0 : i32
      %ok = arith.cmpi sge, %v, %zero : i32
      cf.assert %ok, "value is negative"
      memref.store %v, %out[%i] : memref<?xi32>
      gpu.return
    }
      // out[i] = 2 * in[i] where lo <= i < hi (signed) and i != skip, else -1: a guard that
    // combines comparisons of the thread's id, which the host versions its thread loops on (a
    // copy without the test runs where every thread of the loop passes it).
    gpu.func @window(%in: memref<?xf32>, %out: memref<?xf32>, %lo: index, %hi: index, %skip: index) kernel {
      %i = gpu.global_id x
      %two = arith.constant 2.0 : f32
      %none = arith.constant -1.0 : f32
      %above = arith.cmpi sge, %i, %lo : index
      %below = arith.cmpi slt, %i, %hi : index
      %other = arith.cmpi ne, %i, %skip : index
      %inside = arith.andi %above, %below : i1
      %take = arith.andi %inside, %other : i1
      scf.if %take {
        %v = memref.load %in[%i] : memref<?xf32>
        %w = arith.mulf %v, %two : f32
        memref.store %w, %out[%i] : memref<?xf32>
      } else {
        memref.store %none, %out[%i] : memref<?xf32>
      }
      gpu.return
    }
    // Every thread writes its ids, x | y << 5 | z << 10 | tx << 12 | ty << 16 (x, y, z its
    // block's), at its place in the grid of threads, the planes of blocks one under another.
    // Declares 8 x 4 blocks, which the host runs row by row across a range of blocks; launched
    // at others too.
    gpu.func @ids_2d(%out: memref<?xi32>) kernel
        attributes {known_block_size = array<i32: 8, 4, 1>} {
      %c5 = arith.constant 5 : index
      %c10 = arith.constant 10 : index
      %c12 = arith.constant 12 : index
      %c16 = arith.constant 16 : index
      %bx = gpu.block_id x
      %by = gpu.block_id y
      %bz = gpu.block_id z
      %tx = gpu.thread_id x
      %ty = gpu.thread_id y
      %dx = gpu.block_dim x
      %dy = gpu.block_dim y
      %gx = gpu.grid_dim x
      %gy = gpu.grid_dim y
      %sy = arith.shli %by, %c5 : index
      %sz = arith.shli %bz, %c10 : index
      %stx = arith.shli %tx, %c12 : index
      %sty = arith.shli %ty, %c16 : index
      %v1 = arith.ori %bx, %sy : index
      %v2 = arith.ori %v1, %sz : index
      %v3 = arith.ori %v2, %stx : index
      %v = arith.ori %v3, %sty : index
      %x0 = arith.muli %bx, %dx : index
      %col = arith.addi %x0, %tx : index
      %planes = arith.muli %bz, %gy : index
      %block_row = arith.addi %planes, %by : index
      %y0 = arith.muli %block_row, %dy : index
      %row = arith.addi %y0, %ty : index
      %width = arith.muli %gx, %dx : index
      %at = arith.muli %row, %width : index
      %i = arith.addi %at, %col : index
      %value = arith.index_cast %v : index to i32
      memref.store %value, %out[%i] : memref<?xi32>
      gpu.return
    }
    // One Jacobi step on a rows x cols grid: the border copied, the interior 0.5 * itself plus
    // 0.125 * its four neighbours (the sample's stencil; its border test is `x == 0 || x >=
    // cols - 1`, the same for all threads of a block but the grid's first and last).
    gpu.func @jacobi(%in: memref<?x?xf32>, %out: memref<?x?xf32>) kernel {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %half = arith.constant 0.5 : f32
      %eighth = arith.constant 0.125 : f32
      %rows = memref.dim %in, %c0 : memref<?x?xf32>
      %cols = memref.dim %in, %c1 : memref<?x?xf32>
      %col = gpu.global_id x
      %row = gpu.global_id y
      %last_row = arith.subi %rows, %c1 : index
      %last_col = arith.subi %cols, %c1 : index
      %top = arith.cmpi eq, %row, %c0 : index
      %bottom = arith.cmpi uge, %row, %last_row : index
      %left = arith.cmpi eq, %col, %c0 : index
      %right = arith.cmpi uge, %col, %last_col : index
      %vertical = arith.ori %top, %bottom : i1
      %horizontal = arith.ori %left, %right : i1
      %border = arith.ori %vertical, %horizontal : i1
      %centre = memref.load %in[%row, %col] : memref<?x?xf32>
      %value = scf.if %border -> f32 {
        scf.yield %centre : f32
      } else {
        %up_row = arith.subi %row, %c1 : index
        %down_row = arith.addi %row, %c1 : index
        %left_col = arith.subi %col, %c1 : index
        %right_col = arith.addi %col, %c1 : index
        %up = memref.load %in[%up_row, %col] : memref<?x?xf32>
        %down = memref.load %in[%down_row, %col] : memref<?x?xf32>
        %west = memref.load %in[%row, %left_col] : memref<?x?xf32>
        %east = memref.load %in[%row, %right_col] : memref<?x?xf32>
        %ud = arith.addf %up, %down : f32
        %we = arith.addf %west, %east : f32
        %around = arith.addf %ud, %we : f32
        %scaled = arith.mulf %around, %eighth : f32
        %kept = arith.mulf %centre, %half : f32
        %next = arith.addf %kept, %scaled : f32
        scf.yield %next : f32
      }
      memref.store %value, %out[%row, %col] : memref<?x?xf32>
      gpu.return
    }
    // Declares 8 x 4 blocks: on the host, a launch of that size runs thread loops of that
    // constant size, any other launch loops of its own. Each block swaps its elements in pairs
    // across x through workgroup memory: out[b, y, x] = in[b, y, x ^ 1]. Only thread and block
    // ids (not gpu.block_dim, which the declaration lets MLIR fold): any block of even width up
    // to 32 x 32 is a valid launch.
    gpu.func @declared_size_swap(%in: memref<?x32x32xf32>, %out: memref<?x32x32xf32>)
        workgroup(%tile: memref<32x32xf32, #gpu.address_space<workgroup>>) kernel
        attributes {known_block_size = array<i32: 8, 4, 1>} {
      %c1 = arith.constant 1 : index
      %x = gpu.thread_id x
      %y = gpu.thread_id y
      %b = gpu.block_id x
      %value = memref.load %in[%b, %y, %x] : memref<?x32x32xf32>
      memref.store %value, %tile[%y, %x] : memref<32x32xf32, #gpu.address_space<workgroup>>
      gpu.barrier
      %pair = arith.xori %x, %c1 : index
      %swapped = memref.load %tile[%y, %pair] : memref<32x32xf32, #gpu.address_space<workgroup>>
      memref.store %swapped, %out[%b, %y, %x] : memref<?x32x32xf32>
      gpu.return
    }

    // One thread of each block does a region's work: every thread writes tile[l] = 3 l + b (l
    // its linear id in the block), then the thread whose linear id is %chosen, if any, stores
    // the block's sum of the tile at out[b]. The host runs that region's thread loop from the
    // chosen thread only, or not at all when no thread of a row has the id.
    gpu.func @one_thread_works(%out: memref<?xi32>, %chosen: index)
        workgroup(%tile: memref<1024xi32, #gpu.address_space<workgroup>>) kernel {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c3 = arith.constant 3 : index
      %x = gpu.thread_id x
      %y = gpu.thread_id y
      %z = gpu.thread_id z
      %b = gpu.block_id x
      %width = gpu.block_dim x
      %height = gpu.block_dim y
      %depth = gpu.block_dim z
      %plane = arith.muli %width, %height : index
      %threads = arith.muli %plane, %depth : index
      %rows_before = arith.muli %z, %height : index
      %row_index = arith.addi %rows_before, %y : index
      %row = arith.muli %row_index, %width : index
      %linear = arith.addi %row, %x : index
      %three_l = arith.muli %linear, %c3 : index
      %value = arith.addi %three_l, %b : index
      %value32 = arith.index_cast %value : index to i32
      memref.store %value32, %tile[%linear] : memref<1024xi32, #gpu.address_space<workgroup>>
      gpu.barrier
      %is_chosen = arith.cmpi eq, %linear, %chosen : index
      scf.if %is_chosen {
        %zero = arith.constant 0 : i32
        %sum = scf.for %k = %c0 to %threads step %c1 iter_args(%acc = %zero) -> (i32) {
          %slot = memref.load %tile[%k] : memref<1024xi32, #gpu.address_space<workgroup>>
          %next = arith.addi %acc, %slot : i32
          scf.yield %next : i32
        }
        memref.store %sum, %out[%b] : memref<?xi32>
      }
      gpu.return
    }
  }
}
