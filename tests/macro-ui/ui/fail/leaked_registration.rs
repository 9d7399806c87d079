// The review's leaked registration: registering the program's own memory without a scope is
// `unsafe`, because leaking the slice would let a queued copy write into freed memory.
fn main() {
    let device = gpu_embed::Device::host();
    let mut mine = vec![0u32; 1024];
    let pinned = device.register(&mut mine).unwrap();
    std::mem::forget(pinned);
    drop(mine);
}
