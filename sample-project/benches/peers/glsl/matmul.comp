// matmul.mlir in GLSL: c = a * b with 16 x 16 tiles of a and b in shared memory. The
// multiply-add may be fused, as the MLIR kernel allows (`fastmath<contract>`); GLSL leaves that
// to the driver unless a value is `precise`.
#version 450
layout(local_size_x = 16, local_size_y = 16) in;
layout(std430, binding = 0) readonly buffer A { float a[]; };
layout(std430, binding = 1) readonly buffer B { float b[]; };
layout(std430, binding = 2) writeonly buffer C { float c[]; };
layout(push_constant) uniform Scalars { uint k_size; uint n; };

shared float tile_a[16][16];
shared float tile_b[16][16];

void main() {
  uint tx = gl_LocalInvocationID.x;
  uint ty = gl_LocalInvocationID.y;
  uint row = gl_WorkGroupID.y * 16 + ty;
  uint col = gl_WorkGroupID.x * 16 + tx;
  float sum = 0.0;
  for (uint t = 0; t < k_size / 16; t++) {
    tile_a[ty][tx] = a[row * k_size + t * 16 + tx];
    tile_b[ty][tx] = b[(t * 16 + ty) * n + col];
    barrier();
    for (uint k = 0; k < 16; k++) {
      sum = sum + tile_a[ty][k] * tile_b[k][tx];
    }
    barrier();
  }
  c[row * n + col] = sum;
}
