// A module one of whose kernels the SPIR-V targets refuse (an atomic on 16-bit values): they
// build the other and record why (`tests/runtime/refused.rs` launches both on every device).
module attributes {gpu.container_module} {
  gpu.module @partly {
    // counts[0] += 1 for each thread, atomically, on 16-bit values.
    gpu.func @count(%counts: memref<?xi16>) kernel {
      %c0 = arith.constant 0 : index
      %one = arith.constant 1 : i16
      %old = memref.atomic_rmw addi %one, %counts[%c0] : (i16, memref<?xi16>) -> i16
      gpu.return
    }

    // out[i] = i for i < n.
    gpu.func @fill(%out: memref<?xi64>, %n: index) kernel {
      %i = gpu.global_id x
      %inside = arith.cmpi ult, %i, %n : index
      scf.if %inside {
        %v = arith.index_cast %i : index to i64
        memref.store %v, %out[%i] : memref<?xi64>
      }
      gpu.return
    }
  }
}
