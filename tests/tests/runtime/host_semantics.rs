//! GPU semantics on the host target: barriers, workgroup memory private to each block and shared
//! by its threads, multi-dimensional grids, dynamic shared memory, and launch configurations a
//! GPU would reject; and memref arguments of every rank and layout, which also run on a GPU with
//! `--ignored` (`scripts/gpu-tests.sh`).

use crate::kernels::{barriers, mma, semantics, subgroup_reduce, subgroups};
use gpu_embed::{Device, DeviceBuffer, ErrorKind, LaunchConfig};

/// This module's tests again, under valgrind's memcheck: no invalid access.
#[test]
fn memcheck() {
    crate::rerun::memcheck_module(module_path!());
}

fn config(grid: [u32; 3], block: [u32; 3], shared_mem_bytes: u32) -> LaunchConfig {
    LaunchConfig {
        grid,
        block,
        shared_mem_bytes,
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
    let host = crate::host();
    let input: Vec<f32> = (0..4096).map(|i| i as f32).collect();
    let x = DeviceBuffer::from_slice(&host, &input).unwrap();
    let y = DeviceBuffer::<f32>::alloc(&host, input.len()).unwrap();
    // SAFETY: 16 blocks of 256 threads, each reading and writing its own 256 elements.
    unsafe { semantics::reverse(&host, &config([16, 1, 1], [256, 1, 1], 0), &x, &y) }.unwrap();
    assert_eq!(y.to_vec().unwrap(), reversed_blocks(&input));

    // The same kernel without its barrier is wrong: the test can tell the difference, and the
    // checked object reports the race.
    let z = DeviceBuffer::from_slice(&host, &vec![0.0f32; input.len()]).unwrap();
    // SAFETY: the same grid: each block of 256 threads reads and writes only its own 256
    // elements (in an order the missing barrier leaves racing, which changes values, not
    // addresses).
    let wrong = unsafe {
        semantics::reverse_without_barrier(&host, &config([16, 1, 1], [256, 1, 1], 0), &x, &z)
    };
    if crate::CHECKED {
        let error = wrong.unwrap_err();
        assert!(error.message().contains("workgroup memory race"), "{error}");
    } else {
        wrong.unwrap();
        assert_ne!(z.to_vec().unwrap(), reversed_blocks(&input));
    }
}

#[test]
fn each_block_has_its_own_workgroup_memory() {
    let host = crate::host();
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
    // A small grid (a block per call of the entry point) and one of 675 blocks, which the host
    // runs in chunks of consecutive blocks that cross rows and planes of the grid.
    for grid in [[3u32, 2, 2], [15, 9, 5]] {
        ids_are_right(grid, [4, 3, 2]);
    }
}

fn ids_are_right(grid: [u32; 3], block: [u32; 3]) {
    let host = crate::host();
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
    assert_eq!(got, want, "grid {grid:?}");
}

#[test]
fn a_slice_of_a_buffer_is_a_1d_memref_argument() {
    let host = crate::host();
    let input: Vec<f32> = (0..1024).map(|i| i as f32).collect();
    let x = DeviceBuffer::from_slice(&host, &input).unwrap();
    let y = DeviceBuffer::from_slice(&host, &vec![-1.0f32; 1024]).unwrap();
    // SAFETY: one block of 256 threads reading and writing 256 elements of each slice.
    unsafe {
        semantics::reverse(
            &host,
            &config([1, 1, 1], [256, 1, 1], 0),
            x.slice(256..512).unwrap(),
            y.slice(512..768).unwrap(),
        )
    }
    .unwrap();
    let got = y.to_vec().unwrap();
    let want: Vec<f32> = (256..512).rev().map(|i| i as f32).collect();
    assert_eq!(&got[512..768], want.as_slice());
    assert!(got[..512].iter().chain(&got[768..]).all(|&v| v == -1.0));
}

#[test]
fn dynamic_shared_memory_is_sized_at_launch() {
    let host = crate::host();
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

/// More dynamic shared memory than a block gets without asking (48 KiB on NVIDIA GPUs): the
/// launch opts the kernel in itself (`cuFuncSetAttribute`), up to the device's opt-in limit;
/// one byte more is refused before the driver sees it.
#[test]
#[ignore = "needs a GPU; run scripts/gpu-tests.sh on a GPU machine"]
fn dynamic_shared_memory_beyond_the_default_is_opted_into() {
    let device = Device::default_gpu().expect("a GPU");
    let limits = device.limits().clone();
    let optin = u32::try_from(limits.shared_memory_per_block_optin).unwrap();
    assert!(
        limits.shared_memory_per_block_optin > limits.shared_memory_per_block,
        "{limits:?}"
    );
    // What the kernel declares itself counts against the limit too (LLVM's NVPTX back end
    // gives the dynamic shared memory's symbol one static byte).
    let declared = semantics::BINARY
        .kernel(&device, "reverse_dynamic")
        .unwrap()
        .attributes()
        .static_shared_bytes;
    let most = optin - u32::try_from(declared).unwrap();
    let input: Vec<f32> = (0..1024).map(|i| i as f32).collect();
    let x = DeviceBuffer::from_slice(&device, &input).unwrap();
    let y = DeviceBuffer::<f32>::alloc(&device, 1024).unwrap();
    // SAFETY: one block of 1024 threads over 1024 elements; the kernel uses 4 KiB of the
    // shared memory asked for.
    unsafe {
        semantics::reverse_dynamic(
            &device,
            &config([1, 1, 1], [1024, 1, 1], most),
            &x,
            &y,
            1024,
        )
    }
    .unwrap();
    assert_eq!(
        y.to_vec().unwrap(),
        input.iter().rev().copied().collect::<Vec<_>>()
    );
    // SAFETY: refused before the kernel runs.
    let error = unsafe {
        semantics::reverse_dynamic(
            &device,
            &config([1, 1, 1], [1024, 1, 1], optin + 1),
            &x,
            &y,
            1024,
        )
    }
    .unwrap_err();
    assert!(
        error.to_string().contains("shared_memory_per_block_optin"),
        "{error}"
    );
}

#[test]
fn launch_configurations_a_gpu_rejects_are_errors() {
    let host = crate::host();
    let x = DeviceBuffer::<f32>::alloc(&host, 256).unwrap();
    let bad = [
        (config([0, 1, 1], [256, 1, 1], 0), "zero dimension"),
        (config([1, 1, 1], [0, 1, 1], 0), "zero dimension"),
        (config([1, 1, 1], [64, 32, 1], 0), "2048 threads"),
        (
            config([1, 1, 1], [1, 1, 128], 0),
            "block z of 128; the device allows at most 64 (max_block)",
        ),
        (
            config([1, 1, 1], [256, 1, 1], 64 * 1024 + 1),
            "65537 bytes of dynamic shared memory; the device allows at most 65536 per block",
        ),
        // The host's ids fit a non-negative i32 (what its compiled kernels assume).
        (
            config([1 << 31, 1, 1], [1, 1, 1], 0),
            "grid x of 2147483648 blocks; the device allows at most 2147483647 (max_grid)",
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
    use crate::kernels::_2d_kernels;
    let host = crate::host();
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

/// Each check on the host in every test run, and on the first GPU with `--ignored`
/// (`scripts/gpu-tests.sh`).
#[macro_export]
macro_rules! on_every_device {
    ($($check:ident),*) => {
        $(mod $check {
            #[test]
            fn host() {
                super::$check(&$crate::host());
            }

            #[test]
            #[ignore = "needs a GPU; run scripts/gpu-tests.sh on a GPU machine"]
            fn gpu() {
                super::$check(&gpu_embed::Device::default_gpu().expect("a GPU"));
            }
        })*
    };
}

mod memrefs {
    use super::config;
    use crate::kernels::memrefs;
    use gpu_embed::{Device, DeviceBuffer, ErrorKind};

    fn tagged(x: f32, i: usize, j: usize, k: usize) -> f32 {
        2.0 * x + (100 * i + 10 * j + k) as f32
    }

    crate::on_every_device!(
        a_rank_3_view_reaches_every_element_by_its_indices,
        strided_and_offset_views_touch_only_their_elements,
        static_shapes_and_rank_0
    );

    fn a_rank_3_view_reaches_every_element_by_its_indices(host: &Device) {
        let (di, dj, dk) = (3, 4, 5);
        let input: Vec<f32> = (0..di * dj * dk).map(|v| v as f32).collect();
        let buffer = DeviceBuffer::from_slice(host, &input).unwrap();
        let view = buffer.view([di, dj, dk]).unwrap();
        let launch = config([1, 1, 1], [dk as u32, dj as u32, di as u32], 0);
        // SAFETY: one thread per element of the view.
        unsafe { memrefs::tag3(host, &launch, view) }.unwrap();
        let got = buffer.to_vec().unwrap();
        for i in 0..di {
            for j in 0..dj {
                for k in 0..dk {
                    let at = (i * dj + j) * dk + k;
                    assert_eq!(got[at], tagged(input[at], i, j, k), "[{i}][{j}][{k}]");
                }
            }
        }
    }

    fn strided_and_offset_views_touch_only_their_elements(host: &Device) {
        // A 6 x 8 matrix; the view is rows 1..4, columns 2, 4 and 6.
        let input: Vec<f32> = (0..48).map(|v| v as f32).collect();
        let buffer = DeviceBuffer::from_slice(host, &input).unwrap();
        let view = buffer.strided_view(8 + 2, [3, 3], [8, 2]).unwrap();
        // SAFETY: one thread per element of the view.
        unsafe { memrefs::scale_strided(host, &config([1, 1, 1], [3, 3, 1], 0), view, 10.0) }
            .unwrap();
        let got = buffer.to_vec().unwrap();
        for (at, (&got, &was)) in got.iter().zip(&input).enumerate() {
            let (row, col) = (at / 8, at % 8);
            let inside = (1..4).contains(&row) && [2, 4, 6].contains(&col);
            assert_eq!(got, if inside { was * 10.0 } else { was }, "[{row}][{col}]");
        }

        // A static unit stride takes rows of any pitch: rows 2 and 4, columns 1..5.
        let buffer = DeviceBuffer::from_slice(host, &input).unwrap();
        let rows = buffer.strided_view(2 * 8 + 1, [2, 4], [16, 1]).unwrap();
        // SAFETY: as above.
        unsafe { memrefs::bump_rows(host, &config([1, 1, 1], [4, 2, 1], 0), rows) }.unwrap();
        let got = buffer.to_vec().unwrap();
        for (at, (&got, &was)) in got.iter().zip(&input).enumerate() {
            let (row, col) = (at / 8, at % 8);
            let inside = [2, 4].contains(&row) && (1..5).contains(&col);
            assert_eq!(got, if inside { was + 1.0 } else { was }, "[{row}][{col}]");
        }
    }

    fn static_shapes_and_rank_0(host: &Device) {
        let buffer = DeviceBuffer::<i32>::alloc(host, 32).unwrap();
        // SAFETY: one thread per element of the 4 x 8 matrix.
        unsafe {
            memrefs::fixed(
                host,
                &config([1, 1, 1], [8, 4, 1], 0),
                buffer.view([4, 8]).unwrap(),
            )
        }
        .unwrap();
        assert_eq!(buffer.to_vec().unwrap(), (0..32).collect::<Vec<i32>>());

        let cell = DeviceBuffer::<f64>::alloc(host, 1).unwrap();
        // SAFETY: one thread writes the one element.
        unsafe { memrefs::store0(host, &config([1, 1, 1], [1, 1, 1], 0), &cell, 2.5) }.unwrap();
        assert_eq!(cell.to_vec().unwrap(), [2.5]);
    }

    #[test]
    fn views_the_kernel_cannot_take_are_errors_before_launch() {
        let host = crate::host();
        let buffer = DeviceBuffer::from_slice(&host, &[1.0f32; 60]).unwrap();
        let one = config([1, 1, 1], [1, 1, 1], 0);
        // Larger than the buffer.
        let error = buffer.view([4, 4, 4]).unwrap_err();
        assert_eq!(error.kind(), ErrorKind::InvalidArgument);
        assert!(
            error.message().contains("buffer holds 60 elements"),
            "{error}"
        );
        assert!(
            buffer.strided_view(50, [2, 2], [8, 1]).is_ok(),
            "its last element is 59"
        );
        assert!(buffer.strided_view(51, [2, 2], [8, 1]).is_err());
        // Not contiguous, for a kernel whose memref has the identity layout.
        let gappy = buffer.strided_view(0, [2, 3, 4], [30, 10, 1]).unwrap();
        // SAFETY: the launch is refused before the kernel runs.
        let error = unsafe { memrefs::tag3(&host, &one, gappy) }.unwrap_err();
        assert!(error.message().contains("contiguous row-major"), "{error}");
        // A stride the memref type fixes at 1.
        let columns = buffer.strided_view(0, [2, 3], [10, 2]).unwrap();
        // SAFETY: as above.
        let error = unsafe { memrefs::bump_rows(&host, &one, columns) }.unwrap_err();
        assert!(
            error.message().contains("dimension 1 has stride 2"),
            "{error}"
        );
        // A static size that differs.
        let ints = DeviceBuffer::<i32>::alloc(&host, 32).unwrap();
        // SAFETY: as above.
        let error = unsafe { memrefs::fixed(&host, &one, ints.view([8, 4]).unwrap()) }.unwrap_err();
        assert!(
            error
                .message()
                .contains("dimension 0 has size 8, the kernel's memref type fixes it at 4"),
            "{error}"
        );
        // Rank 0 needs an element.
        let empty = DeviceBuffer::<f64>::alloc(&host, 0).unwrap();
        // SAFETY: as above.
        assert!(unsafe { memrefs::store0(&host, &one, &empty, 1.0) }.is_err());
    }
}

/// Streams: copies, fills and launches queued in order, events that order one stream after
/// another. On the host, a stream's queue runs when something needs it, so an ordering the
/// program did not ask for is visible, not hidden by timing.
mod streams {
    use super::config;
    use crate::kernels::semantics;
    use gpu_embed::{f16, Device, DeviceBuffer, PinnedBuffer};

    crate::on_every_device!(
        slices_are_copied_and_filled_like_buffers,
        page_locked_copies_are_waited_for_before_the_host_sees_them,
        an_event_orders_one_stream_after_another,
        a_copy_then_a_kernel_on_one_stream_see_each_others_data,
        queued_fills_write_every_pattern,
        events_recorded_on_streams_time_their_work
    );

    fn slices_are_copied_and_filled_like_buffers(device: &Device) {
        let stream = device.create_stream().unwrap();
        let x = DeviceBuffer::<u16>::alloc(device, 40).unwrap();
        stream
            .copy_to_device(&x.slice(10..20).unwrap(), &[7u16; 10])
            .unwrap();
        stream.fill(&x.slice(0..5).unwrap(), 3).unwrap();
        stream
            .copy(&x.slice(30..40).unwrap(), &x.slice(10..20).unwrap())
            .unwrap();
        let mut middle = [0u16; 10];
        stream
            .copy_to_host(&mut middle, &x.slice(30..40).unwrap())
            .unwrap();
        assert_eq!(middle, [7; 10]);
        let all = x.to_vec().unwrap();
        let want: Vec<u16> = (0..40)
            .map(|i| match i {
                0..5 => 3,
                10..20 | 30..40 => 7,
                _ => 0,
            })
            .collect();
        assert_eq!(all, want);
        // Lengths must match, and a copy needs contiguous elements.
        assert!(stream
            .copy_to_device(&x.slice(0..3).unwrap(), &[1, 2])
            .is_err());
        let every_other = x.strided_view(0, [5], [2]).unwrap();
        let error = stream.fill(&every_other, 1).unwrap_err();
        assert!(error.message().contains("contiguous"), "{error}");
    }

    fn page_locked_copies_are_waited_for_before_the_host_sees_them(device: &Device) {
        let stream = device.create_stream().unwrap();
        let data: Vec<i32> = (0..4096).collect();
        let staging = PinnedBuffer::from_slice(device, &data).unwrap();
        let on_device = DeviceBuffer::<i32>::alloc(device, data.len()).unwrap();
        stream.copy_pinned_to_device(&on_device, &staging).unwrap();
        let mut back = PinnedBuffer::<i32>::alloc(device, data.len()).unwrap();
        stream.copy_device_to_pinned(&mut back, &on_device).unwrap();
        // Nothing waited for the stream: reading the pinned memory does.
        assert_eq!(back.as_slice().unwrap(), data.as_slice());

        // The program's own memory, page-locked while registered: the scoped form, and the
        // unsafe one whose slice is dropped.
        let mut mine = vec![0i32; data.len()];
        device
            .with_registered(&mut mine, |registered| {
                stream.copy_device_to_pinned(registered, &on_device)
            })
            .unwrap()
            .unwrap();
        assert_eq!(mine, data);
        let mut mine = vec![0i32; data.len()];
        {
            // SAFETY: the slice is dropped at the end of this block, not leaked.
            let mut registered = unsafe { device.register(&mut mine) }.unwrap();
            stream
                .copy_device_to_pinned(&mut registered, &on_device)
                .unwrap();
        }
        assert_eq!(mine, data);

        // Freed only after the copy that reads it.
        let doomed = PinnedBuffer::from_slice(device, &vec![5i32; data.len()]).unwrap();
        stream.copy_pinned_to_device(&on_device, &doomed).unwrap();
        drop(doomed);
        assert!(on_device.to_vec().unwrap().iter().all(|&v| v == 5));
        let short = PinnedBuffer::<i32>::alloc(device, 3).unwrap();
        assert!(stream.copy_pinned_to_device(&on_device, &short).is_err());
    }

    fn an_event_orders_one_stream_after_another(device: &Device) {
        let n = 1 << 16;
        let (first, second) = (
            device.create_stream().unwrap(),
            device.create_stream().unwrap(),
        );
        let x = DeviceBuffer::<u32>::alloc(device, n).unwrap();
        let y = DeviceBuffer::<u32>::alloc(device, n).unwrap();
        let written = device.create_event().unwrap();
        first.fill(&x, 7).unwrap();
        first.record(&written).unwrap();
        second.wait(&written).unwrap();
        second.copy(&y, &x).unwrap();
        second.synchronize().unwrap();
        assert!(y.to_vec().unwrap().iter().all(|&v| v == 7));
    }

    fn a_copy_then_a_kernel_on_one_stream_see_each_others_data(device: &Device) {
        let stream = device.create_stream().unwrap();
        let input: Vec<f32> = (0..1024).map(|i| i as f32).collect();
        let x = DeviceBuffer::<f32>::alloc(device, 1024).unwrap();
        let y = DeviceBuffer::<f32>::alloc(device, 1024).unwrap();
        stream.copy_to_device(&x, &input).unwrap();
        let launch = config([4, 1, 1], [256, 1, 1], 0);
        // SAFETY: 4 blocks of 256 threads over 1024 elements of each buffer.
        unsafe { semantics::reverse(&stream, &launch, &x, &y) }.unwrap();
        let mut out = vec![0.0f32; 1024];
        stream.copy_to_host(&mut out, &y).unwrap();
        let want: Vec<f32> = input
            .chunks(256)
            .flat_map(|block| block.iter().rev().copied())
            .collect();
        assert_eq!(out, want);
    }

    fn queued_fills_write_every_pattern(device: &Device) {
        let stream = device.create_stream().unwrap();
        let bytes = DeviceBuffer::<u8>::alloc(device, 999).unwrap();
        let halves = DeviceBuffer::<f16>::alloc(device, 333).unwrap();
        let words = DeviceBuffer::<i32>::alloc(device, 257).unwrap();
        let longs = DeviceBuffer::<u64>::alloc(device, 65).unwrap();
        stream.fill(&bytes, 0x5a).unwrap();
        stream.fill(&halves, f16::from_f32(0.25)).unwrap();
        stream.fill(&words, -3).unwrap();
        stream.fill(&longs, 0x0102_0304_0506_0708).unwrap();
        stream.synchronize().unwrap();
        assert!(bytes.to_vec().unwrap().iter().all(|&v| v == 0x5a));
        assert!(halves
            .to_vec()
            .unwrap()
            .iter()
            .all(|&v| v == f16::from_f32(0.25)));
        assert!(words.to_vec().unwrap().iter().all(|&v| v == -3));
        assert!(longs
            .to_vec()
            .unwrap()
            .iter()
            .all(|&v| v == 0x0102_0304_0506_0708));
        // A buffer dropped with work still queued is freed after that work.
        let doomed = DeviceBuffer::<u32>::alloc(device, 1 << 20).unwrap();
        stream.fill(&doomed, 9).unwrap();
        drop(doomed);
        stream.synchronize().unwrap();
    }

    fn events_recorded_on_streams_time_their_work(device: &Device) {
        let stream = device.create_stream().unwrap();
        let marks: Vec<_> = (0..3).map(|_| device.create_event().unwrap()).collect();
        let big = DeviceBuffer::<u32>::alloc(device, 1 << 24).unwrap();
        stream.record(&marks[0]).unwrap();
        stream.fill(&big, 1).unwrap();
        stream.record(&marks[1]).unwrap();
        for value in 2..5 {
            stream.fill(&big, value).unwrap();
        }
        stream.record(&marks[2]).unwrap();
        marks[2].synchronize().unwrap();
        assert!(marks.iter().all(|m| m.query().unwrap()));
        let first = marks[0].elapsed_ms(&marks[1]).unwrap();
        let all = marks[0].elapsed_ms(&marks[2]).unwrap();
        assert!(first > 0.0 && all >= first, "{first} ms, then {all} ms");
    }
}

/// Runs a `barriers` kernel over `blocks` blocks of 64 threads.
fn blocks_of_64(blocks: u32) -> LaunchConfig {
    config([blocks, 1, 1], [64, 1, 1], 0)
}

fn input(len: usize) -> Vec<i32> {
    (0..len as i32).map(|i| i * 7 % 101 - 50).collect()
}

#[test]
fn barriers_inside_a_loop_keep_each_threads_values() {
    let host = crate::host();
    let blocks = 40;
    let values = input(blocks * 64);
    let x = DeviceBuffer::from_slice(&host, &values).unwrap();
    let y = DeviceBuffer::<i32>::alloc(&host, values.len()).unwrap();
    for rounds in [0usize, 1, 5] {
        // SAFETY: thread t of block b reads and writes element 64 b + t only.
        unsafe { barriers::loop_barriers(&host, &blocks_of_64(blocks as u32), &x, &y, rounds) }
            .unwrap();
        let mut want = Vec::new();
        for block in values.chunks(64) {
            let mut acc = block.to_vec();
            let mut u = 0i32;
            for r in 0..rounds as i32 {
                let tile = acc.clone();
                for (t, a) in acc.iter_mut().enumerate() {
                    *a = a
                        .wrapping_add(tile[(t + 1) % 64])
                        .wrapping_add(r)
                        .wrapping_add(u);
                }
                u += 3 * r;
            }
            want.extend(acc);
        }
        assert_eq!(y.to_vec().unwrap(), want, "{rounds} rounds");
    }
}

#[test]
fn values_live_across_several_barriers_are_each_threads_own() {
    let host = crate::host();
    let blocks = 33;
    let values = input(blocks * 64);
    let x = DeviceBuffer::from_slice(&host, &values).unwrap();
    let y = DeviceBuffer::<i32>::alloc(&host, values.len()).unwrap();
    // SAFETY: thread t of block b reads and writes element 64 b + t only.
    unsafe { barriers::several_barriers(&host, &blocks_of_64(blocks as u32), &x, &y) }.unwrap();
    let mut want = Vec::new();
    for (block, a) in values.chunks(64).enumerate() {
        let b: Vec<i32> = (0..64).map(|t| a[63 - t]).collect();
        let c: Vec<i32> = (0..64).map(|t| 2 * b[(t + 5) % 64]).collect();
        let u = 7 * block as i32;
        want.extend((0..64).map(|t| a[t] + b[t] + c[t] + u + t as i32 + 3 * a[t]));
    }
    assert_eq!(y.to_vec().unwrap(), want);
}

#[test]
fn a_barrier_under_a_uniform_if_runs_in_the_blocks_that_take_it() {
    let host = crate::host();
    let blocks = 17;
    let values = input(blocks * 64);
    let x = DeviceBuffer::from_slice(&host, &values).unwrap();
    let y = DeviceBuffer::<i32>::alloc(&host, values.len()).unwrap();
    // SAFETY: thread t of block b reads and writes element 64 b + t only.
    unsafe { barriers::uniform_if(&host, &blocks_of_64(blocks as u32), &x, &y) }.unwrap();
    let mut want = Vec::new();
    for (block, x) in values.chunks(64).enumerate() {
        let r: Vec<i32> = (0..64)
            .map(|t| if block % 2 == 0 { x[63 - t] } else { -x[t] })
            .collect();
        want.extend((0..64).map(|t| r[t] + r[(t + 1) % 64]));
    }
    assert_eq!(y.to_vec().unwrap(), want);
}

#[test]
fn a_barrier_only_some_threads_reach_runs_them_as_coroutines() {
    let host = crate::host();
    for n in [1usize, 20, 64] {
        let out = DeviceBuffer::from_slice(&host, &[-1i32; 64]).unwrap();
        // SAFETY: thread t < n writes out[t] only.
        let run = unsafe { barriers::early_exit(&host, &blocks_of_64(1), &out, n) };
        if crate::CHECKED && n < 64 {
            // gpu.barrier wants every thread of the block or none: the check says which did
            // not come (a GPU may hang), where the plain object runs those that did.
            let error = run.unwrap_err();
            assert!(error.message().contains("(it had returned)"), "{error}");
            continue;
        }
        run.unwrap();
        let want: Vec<i32> = (0..64)
            .map(|t| if t < n { (n - 1 - t) as i32 } else { -1 })
            .collect();
        assert_eq!(out.to_vec().unwrap(), want, "{n} active threads");
    }
}

#[test]
fn threads_of_a_block_at_different_barriers_fail_the_launch() {
    let host = crate::host();
    let flag = DeviceBuffer::from_slice(&host, &[0i32; 3]).unwrap();
    // SAFETY: thread 63 of block 2 writes flag[2]; every thread of block b reads flag[b].
    let error = unsafe { barriers::racy_barrier(&host, &blocks_of_64(3), &flag) }
        .expect_err("threads of block 2 reach different barriers");
    assert_eq!(error.kind(), ErrorKind::KernelFault, "{error}");
    let message = error.to_string();
    assert!(
        message.contains("`racy_barrier`") && message.contains("block (2, 0, 0)"),
        "{message}"
    );
}

#[test]
fn thread_loops_stop_early_only_where_the_remaining_threads_do_nothing() {
    let host = crate::host();
    let blocks = 9;
    for k in [0usize, 1, 5, 63, 64, 100] {
        let run = |kernel: &dyn Fn(&DeviceBuffer<i32>)| {
            let out = DeviceBuffer::from_slice(&host, &vec![-1i32; blocks * 64]).unwrap();
            kernel(&out);
            out.to_vec().unwrap()
        };
        let want = |active: &dyn Fn(usize) -> bool, idle: i32| -> Vec<i32> {
            (0..blocks * 64)
                .map(|i| {
                    if active(i % 64) {
                        (i % 64) as i32 + 1
                    } else {
                        idle
                    }
                })
                .collect()
        };
        let config = blocks_of_64(blocks as u32);
        // SAFETY (all three): thread t of block b writes out[64 b + t] only.
        let prefix = run(&|out| {
            unsafe { barriers::guard_prefix(&host, &config, out, k) }.unwrap();
        });
        assert_eq!(prefix, want(&|t| t < k, -1), "guard_prefix, k = {k}");
        let suffix = run(&|out| {
            unsafe { barriers::guard_suffix(&host, &config, out, k) }.unwrap();
        });
        assert_eq!(suffix, want(&|t| t >= k, -1), "guard_suffix, k = {k}");
        let other = DeviceBuffer::from_slice(&host, &vec![-1i32; blocks * 64]).unwrap();
        let stored = run(&|out| {
            unsafe { barriers::guard_then_store(&host, &config, out, &other, k) }.unwrap();
        });
        assert_eq!(stored, want(&|t| t < k, -1), "guard_then_store, k = {k}");
        assert_eq!(
            other.to_vec().unwrap(),
            vec![7; blocks * 64],
            "guard_then_store, k = {k}"
        );
    }
}

/// `gpu.shuffle` as the gpu dialect defines it, for lane `lane` (< `width`) of a subgroup whose
/// values are `values`: (result, valid) for xor, up, down, idx.
fn shuffle_reference(values: &[i32], lane: usize, offset: usize, width: usize) -> [(i32, bool); 4] {
    let pick = |source: Option<usize>| match source.filter(|&s| s < width) {
        Some(s) => (values[s], true),
        None => (values[lane], false),
    };
    [
        pick(Some(lane ^ offset)),
        pick(lane.checked_sub(offset)),
        pick(Some(lane + offset)),
        pick(Some(offset)),
    ]
}

/// What an NVIDIA GPU computes for the same shuffles as MLIR 22's NVVM lowering emits them (PTX
/// `shfl.sync` with clamp `width - 1`, and `32 - width` for `up`, whose clamp is a lower bound):
/// the dialect's definition, except that `up` with `width` below 32 takes only sources from
/// lane `32 - width` on.
fn shuffle_on_nvidia(values: &[i32], lane: usize, offset: usize, width: usize) -> [(i32, bool); 4] {
    let mut modes = shuffle_reference(values, lane, offset, width);
    let source = lane as i64 - offset as i64;
    modes[1] = if source >= (32 - width as i64) % 32 {
        (values[source as usize], true)
    } else {
        (values[lane], false)
    };
    modes
}

#[test]
fn shuffles_match_the_gpu_dialects_definition_in_every_mode_and_width() {
    let host = crate::host();
    // 2-D blocks too: lanes follow the linear thread id (x fastest).
    for block in [[64u32, 1, 1], [16, 4, 1], [8, 8, 1]] {
        let threads = (block[0] * block[1]) as usize;
        let blocks = 3usize;
        for (offset, width) in [(1usize, 32usize), (5, 32), (3, 16), (1, 8), (7, 8)] {
            let out = DeviceBuffer::<i32>::alloc(&host, blocks * threads * 4).unwrap();
            let valid = DeviceBuffer::<i32>::alloc(&host, blocks * threads * 4).unwrap();
            let config = config([blocks as u32, 1, 1], block, 0);
            // SAFETY: thread i writes out[4 i..4 i + 4] and valid[4 i..4 i + 4] only.
            unsafe {
                subgroups::shuffles(&host, &config, &out, &valid, offset as i32, width as i32)
            }
            .unwrap();
            let (out, valid) = (out.to_vec().unwrap(), valid.to_vec().unwrap());
            for b in 0..blocks {
                let values: Vec<i32> = (0..threads)
                    .map(|t| (1000 * b + 10 * t + 1) as i32)
                    .collect();
                for t in 0..threads {
                    let (warp, lane) = (t / 32 * 32, t % 32);
                    if lane >= width {
                        continue; // lanes past `width` are unspecified
                    }
                    let want = shuffle_on_nvidia(&values[warp..], lane, offset, width);
                    if width == 32 {
                        assert_eq!(
                            want,
                            shuffle_reference(&values[warp..], lane, offset, width)
                        );
                    }
                    for (mode, (value, ok)) in want.into_iter().enumerate() {
                        let at = 4 * (b * threads + t) + mode;
                        assert_eq!(
                            (out[at], valid[at] != 0),
                            (value, ok),
                            "block {block:?}, offset {offset}, width {width}, thread {t}, mode {mode}"
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn a_butterfly_sum_gives_every_lane_its_subgroups_sum() {
    let host = crate::host();
    let (blocks, threads) = (5usize, 96usize);
    let x: Vec<f32> = (0..blocks * threads)
        .map(|i| (i % 13) as f32 * 0.5)
        .collect();
    let dx = DeviceBuffer::from_slice(&host, &x).unwrap();
    let out = DeviceBuffer::<f32>::alloc(&host, x.len()).unwrap();
    let lanes = DeviceBuffer::<i32>::alloc(&host, x.len()).unwrap();
    // SAFETY: thread i reads x[i] and writes out[i], lanes[i] only.
    unsafe {
        subgroups::warp_sum(
            &host,
            &config([blocks as u32, 1, 1], [threads as u32, 1, 1], 0),
            &dx,
            &out,
            &lanes,
        )
    }
    .unwrap();
    let (out, lanes) = (out.to_vec().unwrap(), lanes.to_vec().unwrap());
    for (i, warp) in x.chunks(32).enumerate() {
        // Small multiples of 0.5: every order of addition is exact.
        let sum: f32 = warp.iter().sum();
        for lane in 0..32 {
            assert_eq!(out[32 * i + lane], sum, "subgroup {i}, lane {lane}");
            assert_eq!(lanes[32 * i + lane], lane as i32);
        }
    }
}

/// Shuffles only the first subgroup runs (`if (warp == 0)`, in a loop) split into thread
/// loops run by thread state, not coroutines (`compile/host_objects.rs` checks the build): the
/// block sums of several block sizes, against Rust's.
#[test]
fn a_block_sum_whose_second_stage_only_the_first_subgroup_shuffles() {
    let host = crate::host();
    for threads in [32usize, 96, 256, 1024] {
        let blocks = 7usize;
        let x: Vec<f32> = (0..blocks * threads)
            .map(|i| (i % 11) as f32 * 0.25)
            .collect();
        let dx = DeviceBuffer::from_slice(&host, &x).unwrap();
        let out = DeviceBuffer::<f32>::alloc(&host, blocks).unwrap();
        // SAFETY: thread t of block b reads x[b * threads + t]; lane 0 of the first subgroup
        // writes out[b]; blocks are whole subgroups, at most 32 of them.
        unsafe {
            subgroups::warp_then_block(
                &host,
                &config([blocks as u32, 1, 1], [threads as u32, 1, 1], 0),
                &dx,
                &out,
            )
        }
        .unwrap();
        let out = out.to_vec().unwrap();
        for (b, block) in x.chunks(threads).enumerate() {
            // Small multiples of 0.25: every order of addition is exact.
            let sum: f32 = block.iter().sum();
            assert_eq!(out[b], sum, "{threads} threads, block {b}");
        }
    }
}

/// A shuffle half of a subgroup runs is an error naming the block, not values read from lanes
/// that never wrote them.
#[test]
fn a_shuffle_half_a_subgroup_runs_fails_the_launch() {
    let host = crate::host();
    let out = DeviceBuffer::<i32>::alloc(&host, 64).unwrap();
    // SAFETY: thread t writes out[t] at most; 64 threads.
    let launched =
        unsafe { subgroups::split_subgroup(&host, &config([1, 1, 1], [64, 1, 1], 0), &out) };
    let error = launched
        .and_then(|()| host.synchronize())
        .expect_err("half a subgroup at a shuffle");
    assert_eq!(error.kind(), gpu_embed::ErrorKind::KernelFault, "{error}");
    assert!(
        error.message().contains("kernel `split_subgroup`")
            && error.message().contains("block (0, 0, 0)")
            && error
                .message()
                .contains("the threads of one of its subgroups different shuffles"),
        "{error}"
    );
}

#[test]
fn all_reduce_gives_every_operation_over_the_block_even_with_a_partial_subgroup() {
    let host = crate::host();
    for threads in [64usize, 40, 100] {
        let blocks = 4usize;
        let input: Vec<i32> = (0..blocks * threads)
            .map(|i| ((i * 37 + 11) % 23) as i32 - 7 + if i % 7 == 0 { 1 << 20 } else { 0 })
            .collect();
        let din = DeviceBuffer::from_slice(&host, &input).unwrap();
        let out = DeviceBuffer::<i32>::alloc(&host, blocks * 11).unwrap();
        let fout = DeviceBuffer::<f32>::alloc(&host, blocks * 2).unwrap();
        // SAFETY: thread 0 of block b writes out[11 b..11 b + 10] and fout[2 b..2 b + 2].
        unsafe {
            subgroups::all_reduce(
                &host,
                &config([blocks as u32, 1, 1], [threads as u32, 1, 1], 0),
                &din,
                &out,
                &fout,
            )
        }
        .unwrap();
        let (out, fout) = (out.to_vec().unwrap(), fout.to_vec().unwrap());
        for (b, x) in input.chunks(threads).enumerate() {
            let fold = |f: fn(i32, i32) -> i32| x[1..].iter().fold(x[0], |a, &v| f(a, v));
            let want = [
                fold(i32::wrapping_add),
                fold(i32::wrapping_mul),
                fold(i32::min),
                fold(i32::max),
                fold(|a, v| (a as u32).min(v as u32) as i32),
                fold(|a, v| (a as u32).max(v as u32) as i32),
                fold(|a, v| a & v),
                fold(|a, v| a | v),
                fold(|a, v| a ^ v),
            ];
            assert_eq!(
                &out[11 * b..11 * b + 9],
                &want,
                "{threads} threads, block {b}"
            );
            // The region's combiner is neither associative nor commutative, so its result
            // depends on the reduction tree; it always returns one of its inputs, so the result
            // is one of the block's values.
            assert!(
                x.contains(&out[11 * b + 9]),
                "{threads} threads, block {b}: region result"
            );
            let sum: f64 = x.iter().map(|&v| f64::from(v)).sum();
            let max = x.iter().copied().max().unwrap_or_default() as f32;
            assert!(
                (f64::from(fout[2 * b]) - sum).abs() <= sum.abs() * 1e-6 + 1e-3,
                "{threads} threads, block {b}: f32 sum {} against {sum}",
                fout[2 * b]
            );
            assert_eq!(fout[2 * b + 1], max, "{threads} threads, block {b}");
        }
    }
}

const PRINT_CHILD: &str = "GPU_TESTS_PRINT_LINES_CHILD";

/// The launch whose output `kernel_printf_lines_are_whole_and_in_order_per_thread` reads (C's
/// `printf` writes to the process's stdout, which the test harness does not capture).
#[test]
#[ignore = "runs in a child process of kernel_printf_lines_are_whole_and_in_order_per_thread"]
fn print_lines_child() {
    if std::env::var_os(PRINT_CHILD).is_none() {
        return;
    }
    let host = crate::host();
    // SAFETY: the kernel only prints.
    unsafe { semantics::print_lines(&host, &config([3, 1, 1], [16, 1, 1], 0), 2.5) }.unwrap();
    println!("after the launch");
}

#[test]
fn kernel_printf_lines_are_whole_and_in_order_per_thread() {
    let output = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            &crate::rerun::test_name(module_path!(), "print_lines_child"),
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(PRINT_CHILD, "1")
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    let stdout = String::from_utf8_lossy(&output.stdout);
    // The harness's "test print_lines_child ... " has no newline before the kernel prints.
    let lines: Vec<&str> = stdout
        .lines()
        .filter_map(|l| l.find("block ").map(|at| &l[at..]))
        .collect();
    assert_eq!(lines.len(), 3 * 16 * 2, "{stdout}");
    // What the program prints after the launch comes after the kernel's lines.
    let after = stdout
        .find("after the launch")
        .expect("the child's own line");
    assert!(stdout[after..].find("block ").is_none(), "{stdout}");
    for b in 0..3 {
        for t in 0..16 {
            let first = format!("block {b} thread {t}: first x=2.500000");
            let second = format!("block {b} thread {t}: second");
            let at = |line: &str| lines.iter().position(|l| *l == line);
            match (at(&first), at(&second)) {
                (Some(i), Some(j)) => assert!(i < j, "{first:?} after {second:?}:\n{stdout}"),
                _ => panic!("missing or torn lines for block {b} thread {t}:\n{stdout}"),
            }
        }
    }
}

#[test]
fn a_failed_assertion_fails_the_launch_naming_kernel_block_and_thread() {
    let host = crate::host();
    let (blocks, threads) = (4usize, 32usize);
    let mut values: Vec<i32> = (0..(blocks * threads) as i32).collect();
    let run = |values: &[i32]| {
        let x = DeviceBuffer::from_slice(&host, values).unwrap();
        let out = DeviceBuffer::from_slice(&host, &vec![-1i32; values.len()]).unwrap();
        // SAFETY: thread i reads x[i] and writes out[i] only.
        let result = unsafe {
            semantics::check_non_negative(
                &host,
                &config([blocks as u32, 1, 1], [threads as u32, 1, 1], 0),
                &x,
                &out,
            )
        };
        (result, out.to_vec().unwrap())
    };
    let (result, out) = run(&values);
    result.unwrap();
    assert_eq!(out, values);

    values[2 * threads + 5] = -3;
    let (result, out) = run(&values);
    let error = result.expect_err("thread 5 of block 2 fails its assertion");
    assert_eq!(error.kind(), ErrorKind::KernelFault, "{error}");
    let message = error.to_string();
    assert!(
        message.contains(
            "kernel `check_non_negative`: assertion failed in block (2, 0, 0), thread (5, 0, 0): "
        ) && message.contains("semantics.mlir:")
            && message.ends_with(": value is negative"),
        "{message}"
    );
    // The failing thread stopped at the assertion; its neighbours went on.
    assert_eq!(out[2 * threads + 5], -1);
    assert_eq!(out[2 * threads + 4], values[2 * threads + 4]);
}

#[test]
fn subgroup_reduce_gives_each_subgroup_its_reduction() {
    let host = crate::host();
    for threads in [64usize, 96] {
        let blocks = 3usize;
        let x: Vec<i32> = (0..blocks * threads)
            .map(|i| ((i * 53 + 5) % 41) as i32 - 20 + if i % 11 == 0 { 1 << 24 } else { 0 })
            .collect();
        let dx = DeviceBuffer::from_slice(&host, &x).unwrap();
        let out = DeviceBuffer::<i32>::alloc(&host, x.len() * 6).unwrap();
        // SAFETY: thread i reads x[i] and writes out[6 i..6 i + 6] only.
        unsafe {
            subgroup_reduce::reduce_subgroup(
                &host,
                &config([blocks as u32, 1, 1], [threads as u32, 1, 1], 0),
                &dx,
                &out,
            )
        }
        .unwrap();
        let out = out.to_vec().unwrap();
        for (warp, values) in x.chunks(32).enumerate() {
            let fold = |f: fn(i32, i32) -> i32| values[1..].iter().fold(values[0], |a, &v| f(a, v));
            let want = [
                fold(i32::wrapping_add),
                fold(i32::max),
                fold(i32::min),
                fold(|a, v| a & v),
                fold(|a, v| a | v),
                fold(|a, v| a ^ v),
            ];
            for lane in 0..32 {
                let i = 32 * warp + lane;
                assert_eq!(
                    &out[6 * i..6 * i + 6],
                    &want,
                    "{threads} threads, subgroup {warp}, lane {lane}"
                );
            }
        }
    }
}

/// `a b + c` for row-major tiles: `a` is m x k, `b` k x n, `c` m x n, in f64 (exact for the
/// small integers and halves below, whatever the kernel's precision).
fn matmul_reference(a: &[f64], b: &[f64], c: &[f64], (m, n, k): (usize, usize, usize)) -> Vec<f64> {
    let mut d = c.to_vec();
    for i in 0..m {
        for j in 0..n {
            d[i * n + j] += (0..k).map(|l| a[i * k + l] * b[l * n + j]).sum::<f64>();
        }
    }
    d
}

/// Small values every fragment type holds exactly, so any summation order gives the same.
fn exact(i: usize, salt: usize) -> f64 {
    ((i * 7 + salt * 13) % 9) as f64 * 0.5 - 2.0
}

on_every_device!(subgroup_mma_multiplies_each_subgroups_tiles_like_the_tensor_cores);

pub(crate) fn subgroup_mma_multiplies_each_subgroups_tiles_like_the_tensor_cores(device: &Device) {
    use gpu_embed::f16;
    // 2 blocks of 64 threads: 4 subgroups, each with its own 16x16 tiles.
    let (tiles, launch) = (4, config([2, 1, 1], [64, 1, 1], 0));
    let elements = tiles * 256;
    let a: Vec<f64> = (0..elements).map(|i| exact(i, 1)).collect();
    let b: Vec<f64> = (0..elements).map(|i| exact(i, 2)).collect();
    let c: Vec<f64> = (0..elements).map(|i| exact(i, 3)).collect();
    let halves = |v: &[f64]| v.iter().map(|&x| f16::from_f64(x)).collect::<Vec<f16>>();
    let singles = |v: &[f64]| v.iter().map(|&x| x as f32).collect::<Vec<f32>>();
    let da = DeviceBuffer::from_slice(device, &halves(&a)).unwrap();
    let db = DeviceBuffer::from_slice(device, &halves(&b)).unwrap();
    let dc = DeviceBuffer::from_slice(device, &singles(&c)).unwrap();
    let dd = DeviceBuffer::<f32>::alloc(device, elements).unwrap();
    let de = DeviceBuffer::<f32>::alloc(device, elements).unwrap();
    let rows = [tiles * 16, 16];
    // SAFETY: subgroup s reads and writes rows 16 s..16 s + 16 of each matrix only.
    unsafe {
        mma::multiply_f32(
            device,
            &launch,
            da.view(rows).unwrap(),
            db.view(rows).unwrap(),
            dc.view(rows).unwrap(),
            dd.view(rows).unwrap(),
            de.view(rows).unwrap(),
        )
    }
    .unwrap();
    let (d, e) = (dd.to_vec().unwrap(), de.to_vec().unwrap());
    for t in 0..tiles {
        let tile = t * 256..(t + 1) * 256;
        let want = matmul_reference(
            &a[tile.clone()],
            &b[tile.clone()],
            &c[tile.clone()],
            (16, 16, 16),
        );
        for (at, want) in want.iter().enumerate() {
            let c = c[t * 256 + at];
            assert_eq!(d[t * 256 + at] as f64, *want, "f32 tile {t}, element {at}");
            assert_eq!(
                e[t * 256 + at] as f64,
                (2.0 * want).max(c),
                "elementwise, tile {t}, element {at}"
            );
        }
    }

    // All f16, A read transposed: d = a^T b + c.
    let c_small: Vec<f64> = (0..elements).map(|i| exact(i, 4) * 0.25).collect();
    let dc = DeviceBuffer::from_slice(device, &halves(&c_small)).unwrap();
    let dd = DeviceBuffer::<f16>::alloc(device, elements).unwrap();
    // SAFETY: as above.
    unsafe {
        mma::multiply_transposed_f16(
            device,
            &launch,
            da.view(rows).unwrap(),
            db.view(rows).unwrap(),
            dc.view(rows).unwrap(),
            dd.view(rows).unwrap(),
        )
    }
    .unwrap();
    let d = dd.to_vec().unwrap();
    for t in 0..tiles {
        let tile = &a[t * 256..(t + 1) * 256];
        let transposed: Vec<f64> = (0..256).map(|at| tile[(at % 16) * 16 + at / 16]).collect();
        let tile = t * 256..(t + 1) * 256;
        let want = matmul_reference(&transposed, &b[tile.clone()], &c_small[tile], (16, 16, 16));
        for (at, want) in want.iter().enumerate() {
            assert_eq!(
                d[t * 256 + at].to_f64(),
                *want,
                "f16 tile {t}, element {at}"
            );
        }
    }

    // f64, m8n8k4.
    let a: Vec<f64> = (0..tiles * 32).map(|i| exact(i, 5)).collect();
    let b: Vec<f64> = (0..tiles * 32).map(|i| exact(i, 6)).collect();
    let c: Vec<f64> = (0..tiles * 64).map(|i| exact(i, 7)).collect();
    let (da, db, dc) = (
        DeviceBuffer::from_slice(device, &a).unwrap(),
        DeviceBuffer::from_slice(device, &b).unwrap(),
        DeviceBuffer::from_slice(device, &c).unwrap(),
    );
    let dd = DeviceBuffer::<f64>::alloc(device, tiles * 64).unwrap();
    // SAFETY: subgroup s reads and writes its own 8-row (4-row for b) tiles only.
    unsafe {
        mma::multiply_f64(
            device,
            &launch,
            da.view([tiles * 8, 4]).unwrap(),
            db.view([tiles * 4, 8]).unwrap(),
            dc.view([tiles * 8, 8]).unwrap(),
            dd.view([tiles * 8, 8]).unwrap(),
        )
    }
    .unwrap();
    let d = dd.to_vec().unwrap();
    for t in 0..tiles {
        let want = matmul_reference(
            &a[t * 32..(t + 1) * 32],
            &b[t * 32..(t + 1) * 32],
            &c[t * 64..(t + 1) * 64],
            (8, 8, 4),
        );
        assert_eq!(&d[t * 64..(t + 1) * 64], &want[..], "f64 tile {t}");
    }
}

/// Thread loops versioned on a guard that combines comparisons of the thread id (signed and
/// unsigned, `==` and `!=`): blocks where every thread passes run a copy without the test,
/// blocks where only some do keep it; both give each thread its own answer.
#[test]
fn guards_combining_id_comparisons_select_the_same_threads_in_every_block() {
    let host = crate::host();
    let n = 512usize;
    let input: Vec<f32> = (0..n).map(|i| i as f32 + 0.5).collect();
    let x = DeviceBuffer::from_slice(&host, &input).unwrap();
    let y = DeviceBuffer::<f32>::alloc(&host, n).unwrap();
    // (lo, hi, skip) as signed indices: every block inside; edges inside blocks; a skipped
    // thread inside an otherwise passing block; a negative lower bound (a signed test); none.
    let cases: [(isize, isize, isize); 6] = [
        (0, 512, 1000),
        (64, 448, 200),
        (13, 500, 13),
        (-5, 100, 64),
        (300, 200, 0),
        (0, 511, -1),
    ];
    for (lo, hi, skip) in cases {
        // SAFETY: 8 blocks of 64 threads, each reading and writing its own element of 512.
        unsafe {
            semantics::window(
                &host,
                &config([8, 1, 1], [64, 1, 1], 0),
                &x,
                &y,
                lo as usize,
                hi as usize,
                skip as usize,
            )
        }
        .unwrap();
        let want: Vec<f32> = (0..n as isize)
            .map(|i| {
                if i >= lo && i < hi && i != skip {
                    2.0 * input[i as usize]
                } else {
                    -1.0
                }
            })
            .collect();
        assert_same(
            &y.to_vec().unwrap(),
            &want,
            &format!("lo {lo} hi {hi} skip {skip}"),
        );
    }
}

/// The sample's 5-point stencil on a grid whose border columns and rows fall in the first and
/// last blocks only: interior blocks run the copy of the thread loop without the border test.
#[test]
fn a_stencil_treats_the_border_and_the_interior_apart_in_every_block() {
    let host = crate::host();
    let (rows, cols) = (48usize, 80usize);
    let input: Vec<f32> = (0..rows * cols)
        .map(|i| ((i * 7) % 13) as f32 * 0.5)
        .collect();
    let at = |r: usize, c: usize| input[r * cols + c];
    let want: Vec<f32> = (0..rows * cols)
        .map(|i| {
            let (row, col) = (i / cols, i % cols);
            if row == 0 || row >= rows - 1 || col == 0 || col >= cols - 1 {
                at(row, col)
            } else {
                let ud = at(row - 1, col) + at(row + 1, col);
                let we = at(row, col - 1) + at(row, col + 1);
                at(row, col) * 0.5 + (ud + we) * 0.125
            }
        })
        .collect();
    let x = DeviceBuffer::from_slice(&host, &input).unwrap();
    let y = DeviceBuffer::<f32>::alloc(&host, rows * cols).unwrap();
    let (vx, vy) = (x.view([rows, cols]).unwrap(), y.view([rows, cols]).unwrap());
    // SAFETY: a (5, 3) grid of 16 x 16 blocks covers the 48 x 80 grid exactly; every thread
    // reads its element and, inside the border, its four neighbours, and writes its own.
    unsafe { semantics::jacobi(&host, &config([5, 3, 1], [16, 16, 1], 0), vx, vy) }.unwrap();
    assert_same(&y.to_vec().unwrap(), &want, "the stencil");
}

/// A kernel without barriers that declares a two-dimensional block (8 x 4) runs at that size row
/// by row across each range of blocks a worker takes (`entry/blocks.rs`'s rows across blocks):
/// with ranges that start and end inside a row of blocks and cross planes, every thread still
/// runs once with its own ids; at another size, block by block, the same.
#[test]
fn a_declared_two_dimensional_block_runs_each_thread_once_with_its_ids_row_by_row() {
    let host = crate::host();
    // 13 x 11 x 2 blocks: a worker's range of blocks is not a multiple of a row of them.
    let grid = [13u32, 11, 2];
    for block in [[8u32, 4, 1], [4, 8, 1], [8, 1, 1]] {
        let width = (grid[0] * block[0]) as usize;
        let rows = (grid[1] * grid[2] * block[1]) as usize;
        let mut want = vec![-1i32; width * rows];
        for z in 0..grid[2] {
            for y in 0..grid[1] {
                for x in 0..grid[0] {
                    for ty in 0..block[1] {
                        for tx in 0..block[0] {
                            let row = ((z * grid[1] + y) * block[1] + ty) as usize;
                            let col = (x * block[0] + tx) as usize;
                            want[row * width + col] =
                                (x | y << 5 | z << 10 | tx << 12 | ty << 16) as i32;
                        }
                    }
                }
            }
        }
        let out = DeviceBuffer::from_slice(&host, &vec![-1i32; want.len()]).unwrap();
        // SAFETY: each thread writes its own element of the grid of threads, which `out` holds.
        unsafe { semantics::ids_2d(&host, &config(grid, block, 0), &out) }.unwrap();
        assert_eq!(out.to_vec().unwrap(), want, "blocks of {block:?}");
    }
}

/// A kernel that declares its block size (known_block_size 8 x 4) runs thread loops of that
/// constant size when the launch has it, of the launch's size otherwise: each gives every block's
/// elements swapped in pairs across x, through workgroup memory and a barrier, and leaves the
/// rest of each 32 x 32 plane alone.
#[test]
fn a_kernel_declaring_its_block_size_runs_right_at_that_size_and_at_others() {
    let host = crate::host();
    let blocks = 3usize;
    let input: Vec<f32> = (0..blocks * 32 * 32).map(|i| i as f32).collect();
    for block in [[8u32, 4, 1], [16, 2, 1], [4, 6, 1]] {
        let mut want = vec![0.0f32; input.len()];
        for b in 0..blocks {
            for y in 0..block[1] as usize {
                for x in 0..block[0] as usize {
                    want[(b * 32 + y) * 32 + x] = input[(b * 32 + y) * 32 + (x ^ 1)];
                }
            }
        }
        let x = DeviceBuffer::from_slice(&host, &input).unwrap();
        let y = DeviceBuffer::from_slice(&host, &vec![0.0f32; input.len()]).unwrap();
        let (vx, vy) = (
            x.view([blocks, 32, 32]).unwrap(),
            y.view([blocks, 32, 32]).unwrap(),
        );
        // SAFETY: every block is at most 32 x 32 threads of even width, so each thread reads and
        // writes inside its block's 32 x 32 plane, and reads the tile slot its pair wrote.
        unsafe {
            semantics::declared_size_swap(&host, &config([blocks as u32, 1, 1], block, 0), vx, vy)
        }
        .unwrap();
        assert_same(&y.to_vec().unwrap(), &want, &format!("blocks of {block:?}"));
    }
}

/// A region only one thread of a block works in (`if (linear id == chosen)`) runs that thread
/// wherever it is in the block, in whichever row, and none where no thread has the id (the
/// host's thread loop starts at the chosen thread: exit_thread_loops_at_guards.cpp's
/// enterAtMatch).
#[test]
fn a_region_one_chosen_thread_works_in_runs_that_thread_only() {
    let host = crate::host();
    let blocks = 5;
    for (block, chosen) in [
        ([8, 4, 1], 0),
        ([8, 4, 1], 13),
        ([8, 4, 1], 31),
        ([8, 4, 1], 32),
        ([8, 4, 1], usize::MAX),
        ([32, 1, 1], 7),
        ([4, 4, 2], 21),
    ] {
        let threads = block.iter().product::<u32>() as i32;
        let out = DeviceBuffer::from_slice(&host, &[-1i32; 5]).unwrap();
        // SAFETY: every block has at most 1024 threads (the tile's size); the chosen thread of
        // block b writes out[b] only, b < 5.
        unsafe {
            semantics::one_thread_works(&host, &config([blocks, 1, 1], block, 0), &out, chosen)
        }
        .unwrap();
        let want: Vec<i32> = (0..blocks as i32)
            .map(|b| {
                if chosen < threads as usize {
                    (0..threads).map(|l| 3 * l + b).sum()
                } else {
                    -1
                }
            })
            .collect();
        assert_eq!(
            out.to_vec().unwrap(),
            want,
            "blocks of {block:?}, thread {chosen}"
        );
    }
}

/// Fails naming the first element that differs (a whole buffer is too long to read).
fn assert_same(got: &[f32], want: &[f32], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}");
    if let Some(i) = (0..got.len()).find(|&i| got[i] != want[i]) {
        panic!("{what}: element {i} is {}, not {}", got[i], want[i]);
    }
}
