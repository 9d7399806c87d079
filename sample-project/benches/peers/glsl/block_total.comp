// block_total.mlir in GLSL: out[block] = the sum of the block's 256 elements with the algorithm
// the SPIR-V targets' lowering of gpu.all_reduce uses (kernels.cl's block_total): every value
// stored in shared memory, a barrier, invocation 0 adds them up, a barrier, every invocation
// reads the sum.
#version 450
layout(local_size_x = 256) in;
layout(std430, binding = 0) readonly buffer In { float values[]; };
layout(std430, binding = 1) writeonly buffer Out { float partial[]; };
layout(push_constant) uniform Scalars { uint n; };

shared float slots[256];
shared float total;

void main() {
  uint i = gl_GlobalInvocationID.x;
  uint thread = gl_LocalInvocationID.x;
  slots[thread] = i < n ? values[i] : 0.0;
  barrier();
  if (thread == 0) {
    float sum = slots[0];
    for (uint k = 1; k < gl_WorkGroupSize.x; k++) {
      sum = sum + slots[k];
    }
    total = sum;
  }
  barrier();
  float reduced = total;
  if (thread == 0) {
    partial[gl_WorkGroupID.x] = reduced;
  }
}
