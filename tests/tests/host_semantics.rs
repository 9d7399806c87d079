//! GPU semantics on the host target: barriers, workgroup memory private to each block and shared
//! by its threads, multi-dimensional grids, dynamic shared memory, and launch configurations a
//! GPU would reject.

use gpu_embed::{Device, DeviceBuffer, ErrorKind, LaunchConfig};
use gpu_tests::semantics;

fn config(grid: [u32; 3], block: [u32; 3], shared_mem_bytes: u32) -> LaunchConfig<'static> {
    LaunchConfig {
        grid,
        block,
        shared_mem_bytes,
        stream: None,
    }
}

fn reversed_blocks(input: &[f32]) -> Vec<f32> {
    input
        .chunks(256)
        .flat_map(|block| block.iter().rev().copied())
        .collect()
}

#[test]
fn barriers_make_every_threads_write_visible_to_the_block() {
    let host = Device::host();
    let input: Vec<f32> = (0..4096).map(|i| i as f32).collect();
    let x = DeviceBuffer::from_slice(&host, &input).unwrap();
    let y = DeviceBuffer::<f32>::alloc(&host, input.len()).unwrap();
    // SAFETY: 16 blocks of 256 threads, each reading and writing its own 256 elements.
    unsafe { semantics::reverse(&host, &config([16, 1, 1], [256, 1, 1], 0), &x, &y) }.unwrap();
    assert_eq!(y.to_vec().unwrap(), reversed_blocks(&input));

    // The same kernel without its barrier is wrong: the test can tell the difference.
    let z = DeviceBuffer::from_slice(&host, &vec![0.0f32; input.len()]).unwrap();
    // SAFETY: as above.
    unsafe {
        semantics::reverse_without_barrier(&host, &config([16, 1, 1], [256, 1, 1], 0), &x, &z)
    }
    .unwrap();
    assert_ne!(z.to_vec().unwrap(), reversed_blocks(&input));
}

#[test]
fn each_block_has_its_own_workgroup_memory() {
    let host = Device::host();
    let blocks = 64;
    let out = DeviceBuffer::<i32>::alloc(&host, blocks * 64).unwrap();
    // SAFETY: thread t of block b writes out[64 b + t] only.
    unsafe {
        semantics::isolation(
            &host,
            &config([blocks as u32, 1, 1], [64, 1, 1], 0),
            &out,
            50,
        )
    }
    .unwrap();
    let want: Vec<i32> = (0..blocks as i32).flat_map(|b| [b; 64]).collect();
    assert_eq!(
        out.to_vec().unwrap(),
        want,
        "-1 marks a thread that saw another block's value"
    );
}

#[test]
fn every_id_is_right_in_a_three_dimensional_grid() {
    let host = Device::host();
    let (grid, block) = ([3u32, 2, 2], [4u32, 3, 2]);
    let threads = (grid.iter().product::<u32>() * block.iter().product::<u32>()) as usize;
    let out = DeviceBuffer::<i64>::alloc(&host, threads).unwrap();
    // SAFETY: every thread writes its own linear index.
    unsafe { semantics::ids(&host, &config(grid, block, 0), &out) }.unwrap();
    let got = out.to_vec().unwrap();
    let mut want = Vec::new();
    for bz in 0..grid[2] {
        for by in 0..grid[1] {
            for bx in 0..grid[0] {
                for tz in 0..block[2] {
                    for ty in 0..block[1] {
                        for tx in 0..block[0] {
                            let fields = [
                                tx, ty, tz, bx, by, bz, block[0], block[1], block[2], grid[0],
                                grid[1], grid[2],
                            ];
                            want.push(
                                fields
                                    .iter()
                                    .fold(0i64, |packed, f| packed * 16 + i64::from(*f)),
                            );
                        }
                    }
                }
            }
        }
    }
    assert_eq!(got, want);
}

#[test]
fn dynamic_shared_memory_is_sized_at_launch() {
    let host = Device::host();
    let input: Vec<f32> = (0..128).map(|i| i as f32 * 0.5).collect();
    let x = DeviceBuffer::from_slice(&host, &input).unwrap();
    let y = DeviceBuffer::<f32>::alloc(&host, 128).unwrap();
    // SAFETY: one block of 128 threads over 128 elements and 512 bytes of shared memory.
    unsafe { semantics::reverse_dynamic(&host, &config([1, 1, 1], [128, 1, 1], 512), &x, &y, 128) }
        .unwrap();
    assert_eq!(
        y.to_vec().unwrap(),
        input.iter().rev().copied().collect::<Vec<_>>()
    );
}

#[test]
fn launch_configurations_a_gpu_rejects_are_errors() {
    let host = Device::host();
    let x = DeviceBuffer::<f32>::alloc(&host, 256).unwrap();
    let bad = [
        (config([0, 1, 1], [256, 1, 1], 0), "zero dimension"),
        (config([1, 1, 1], [0, 1, 1], 0), "zero dimension"),
        (config([1, 1, 1], [64, 32, 1], 0), "2048 threads"),
        (
            config([1, 1, 1], [256, 1, 1], 64 * 1024 + 1),
            "dynamic shared memory",
        ),
    ];
    for (config, why) in bad {
        // SAFETY: rejected before the kernel runs.
        let error = unsafe { semantics::reverse(&host, &config, &x, &x) }.unwrap_err();
        assert_eq!(error.kind(), ErrorKind::InvalidArgument, "{error}");
        assert!(error.message().contains(why), "{error}");
    }
}

/// Names with `-`, `.`, a leading digit or a keyword get stubs the macro can name, and each stub
/// launches its own kernel.
#[test]
fn kernels_whose_names_rust_cannot_hold_launch_through_their_stubs() {
    use gpu_tests::_2d_kernels;
    let host = Device::host();
    let config = config([1, 1, 1], [32, 1, 1], 0);
    // SAFETY (each stub): one block of 32 threads, each writing its own element of a
    // 32-element buffer.
    type Stub<'a> = Box<dyn Fn(&DeviceBuffer<f32>) -> gpu_embed::Result<()> + 'a>;
    let stubs: [(Stub, f32); 3] = [
        (
            Box::new(|out| unsafe { _2d_kernels::_2d(&host, &config, out) }),
            2.0,
        ),
        (
            Box::new(|out| unsafe { _2d_kernels::weird_name_v2(&host, &config, out) }),
            3.0,
        ),
        (
            Box::new(|out| unsafe { _2d_kernels::fn_(&host, &config, out) }),
            4.0,
        ),
    ];
    for (stub, value) in stubs {
        let out = DeviceBuffer::from_slice(&host, &[0.0f32; 32]).unwrap();
        stub(&out).unwrap();
        assert_eq!(out.to_vec().unwrap(), vec![value; 32]);
    }
    assert_eq!(_2d_kernels::BINARY.kernels(), ["2d", "weird-name.v2", "fn"]);
}
