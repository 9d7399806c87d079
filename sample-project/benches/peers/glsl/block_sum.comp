// reduce.mlir in GLSL: out[block] = the sum of the block's 256 elements, a tree in shared memory.
#version 450
layout(local_size_x = 256) in;
layout(std430, binding = 0) readonly buffer In { float values[]; };
layout(std430, binding = 1) writeonly buffer Out { float partial[]; };
layout(push_constant) uniform Scalars { uint n; };

shared float tile[256];

void main() {
  uint block = gl_WorkGroupID.x;
  uint thread = gl_LocalInvocationID.x;
  uint i = block * 256 + thread;
  tile[thread] = i < n ? values[i] : 0.0;
  for (uint step = 0; step < 8; step++) {
    barrier();
    uint stride = 128 >> step;
    if (thread < stride) {
      tile[thread] = tile[thread] + tile[thread + stride];
    }
  }
  barrier();
  if (thread == 0) {
    partial[block] = tile[0];
  }
}
