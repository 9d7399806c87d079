// The benchmark's kernels in OpenCL C for PoCL, written to match sample-project/kernels/*.mlir
// line for line: the same work-group sizes, the same memory accesses, the same arithmetic.

// saxpy.mlir: y[i] = a * x[i] + y[i], rounded twice as the MLIR kernel's llvm.fmul and
// llvm.fadd are (no `contract` flag): not contracted into one fused multiply-add.
#pragma OPENCL FP_CONTRACT OFF
kernel void saxpy(float a, global const float *x, global float *y, long n) {
  size_t i = get_group_id(0) * get_local_size(0) + get_local_id(0);
  if (i < (ulong)n) {
    y[i] = a * x[i] + y[i];
  }
}
#pragma OPENCL FP_CONTRACT ON

// reduce.mlir: out[block] = the sum of the block's 256 elements, a tree in local memory.
kernel void block_sum(global const float *in, global float *out, ulong n) {
  local float tile[256];
  size_t block = get_group_id(0);
  size_t thread = get_local_id(0);
  size_t i = block * 256 + thread;
  tile[thread] = i < n ? in[i] : 0.0f;
  for (uint step = 0; step < 8; step++) {
    barrier(CLK_LOCAL_MEM_FENCE);
    size_t stride = 128 >> step;
    if (thread < stride) {
      tile[thread] = tile[thread] + tile[thread + stride];
    }
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  if (thread == 0) {
    out[block] = tile[0];
  }
}

// matmul.mlir: c = a * b with 16 x 16 tiles of a and b in local memory. OpenCL C may contract
// `sum + x * y` into one fused multiply-add (FP_CONTRACT is on by default), which the MLIR
// kernel allows too (`fastmath<contract>`).
kernel void matmul(global const float *a, global const float *b, global float *c, ulong k_size,
                   ulong n) {
  local float tile_a[16][16];
  local float tile_b[16][16];
  size_t tx = get_local_id(0);
  size_t ty = get_local_id(1);
  size_t row = get_group_id(1) * 16 + ty;
  size_t col = get_group_id(0) * 16 + tx;
  float sum = 0.0f;
  for (size_t t = 0; t < k_size / 16; t++) {
    tile_a[ty][tx] = a[row * k_size + t * 16 + tx];
    tile_b[ty][tx] = b[(t * 16 + ty) * n + col];
    barrier(CLK_LOCAL_MEM_FENCE);
    for (size_t k = 0; k < 16; k++) {
      sum = sum + tile_a[ty][k] * tile_b[k][tx];
    }
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  c[row * n + col] = sum;
}

// stencil.mlir: one Jacobi step of the 5-point stencil; the border is copied.
kernel void jacobi(global const float *in, global float *out, ulong rows, ulong cols) {
  size_t col = get_global_id(0);
  size_t row = get_global_id(1);
  float centre = in[row * cols + col];
  float value;
  if (row == 0 || row >= rows - 1 || col == 0 || col >= cols - 1) {
    value = centre;
  } else {
    float ud = in[(row - 1) * cols + col] + in[(row + 1) * cols + col];
    float we = in[row * cols + col - 1] + in[row * cols + col + 1];
    value = centre * 0.5f + (ud + we) * 0.125f;
  }
  out[row * cols + col] = value;
}

// block_total.mlir: out[block] = the sum of the block's 256 elements with gpu.all_reduce. PoCL
// 3.1 has no work_group_reduce_add (OpenCL C 2.0's collectives do not link), so this is the
// reduction as the host target runs gpu.all_reduce: every value stored in local memory, a
// barrier, work-item 0 adds them up, a barrier, every work-item reads the sum.
kernel void block_total(global const float *in, global float *out, ulong n) {
  local float slots[256];
  local float total[1];
  size_t i = get_global_id(0);
  size_t thread = get_local_id(0);
  float value = i < n ? in[i] : 0.0f;
  slots[thread] = value;
  barrier(CLK_LOCAL_MEM_FENCE);
  if (thread == 0) {
    float sum = slots[0];
    for (size_t k = 1; k < get_local_size(0); k++) {
      sum = sum + slots[k];
    }
    total[0] = sum;
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  float reduced = total[0];
  if (thread == 0) {
    out[get_group_id(0)] = reduced;
  }
}

// block_total.mlir's empty kernel.
kernel void nothing(void) {}
