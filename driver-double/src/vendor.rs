//! Which driver the double is being: CUDA's or HIP's entry points (both in one library).

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Vendor {
    Cuda,
    Hip,
}
