// Kernels for the Vulkan target (`tests/runtime/vulkan.rs` runs them on every Vulkan device, lavapipe
// here, against the host target and plain Rust): what SPIR-V needs is supplied by the pipeline,
// so these are ordinary target-neutral kernels with a `known_block_size`. Between them they use
// workgroup memory, barriers, subgroup reductions, 2-D memrefs with a static inner size, and
// 8-, 16- and 64-bit types (capabilities from use).
module attributes {gpu.container_module} {
  gpu.module @vk {
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

    // out[i] = the sum of x over i's 32 lanes, by a butterfly of xor shuffles: MLIR lowers
    // gpu.shuffle at a width of 32 only, so devices whose subgroups are not 32 wide refuse it.
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
  }
}
