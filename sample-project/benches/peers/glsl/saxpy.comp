// saxpy.mlir in GLSL: y[i] = a * x[i] + y[i]. Blocks of 256.
#version 450
layout(local_size_x = 256) in;
layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) buffer Y { float y[]; };
layout(push_constant) uniform Scalars { float a; uint n; };

void main() {
  uint i = gl_WorkGroupID.x * gl_WorkGroupSize.x + gl_LocalInvocationID.x;
  if (i < n) {
    y[i] = a * x[i] + y[i];
  }
}
