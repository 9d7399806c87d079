// stencil.mlir in GLSL: one Jacobi step of the 5-point stencil; the border is copied.
#version 450
layout(local_size_x = 16, local_size_y = 16) in;
layout(std430, binding = 0) readonly buffer In { float grid[]; };
layout(std430, binding = 1) writeonly buffer Out { float next[]; };
layout(push_constant) uniform Scalars { uint rows; uint cols; };

void main() {
  uint col = gl_GlobalInvocationID.x;
  uint row = gl_GlobalInvocationID.y;
  float centre = grid[row * cols + col];
  float value;
  if (row == 0 || row >= rows - 1 || col == 0 || col >= cols - 1) {
    value = centre;
  } else {
    float ud = grid[(row - 1) * cols + col] + grid[(row + 1) * cols + col];
    float we = grid[row * cols + col - 1] + grid[row * cols + col + 1];
    value = centre * 0.5 + (ud + we) * 0.125;
  }
  next[row * cols + col] = value;
}
