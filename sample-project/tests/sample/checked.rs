//! The sample's kernels as checked host objects (`sample-checked`, the same files) with every
//! check on (`GPU_EMBED_CHECK=all`, in a process of their own): no report, and the unchecked
//! objects' results, bit for bit; and the leak check, at exit, names the line that allocated a
//! buffer the program never freed.

use crate::rerun::own_process_output;
use gpu_embed::{Device, DeviceBuffer, LaunchConfig};

/// Runs `name`'s body in a child with `checks`; the child's stderr, after asserting it passed.
fn child_stderr(name: &str, checks: &str) -> Option<String> {
    let output = own_process_output(module_path!(), name, &[("GPU_EMBED_CHECK", checks)])?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(
        output.status.success() && stdout.contains("1 passed"),
        "`{name}` failed in its own process ({}):\n{stdout}\n{stderr}",
        output.status
    );
    Some(stderr)
}

#[test]
fn every_kernel_runs_with_every_check_and_its_unchecked_results() {
    if let Some(stderr) = child_stderr(
        "every_kernel_runs_with_every_check_and_its_unchecked_results",
        "all",
    ) {
        // Not a report, not a leak at exit.
        assert!(!stderr.contains("gpu-embed check"), "{stderr}");
        return;
    }
    let host = Device::host();
    // saxpy over 4096 elements.
    let n = 4096;
    let x: Vec<f32> = (0..n).map(|i| (i % 1000) as f32).collect();
    let y0: Vec<f32> = (0..n).map(|i| (i % 7) as f32).collect();
    let config = LaunchConfig::for_elements(n, 256);
    let saxpy = |checked: bool| {
        let dx = DeviceBuffer::from_slice(&host, &x).unwrap();
        let dy = DeviceBuffer::from_slice(&host, &y0).unwrap();
        let (px, py) = (dx.device_ptr(), dy.device_ptr());
        // SAFETY: saxpy touches x[i] and y[i] for i < n; both buffers hold n elements.
        unsafe {
            if checked {
                sample_checked::saxpy::saxpy(&host, &config, 2.5, px, py, n as i64)
            } else {
                sample_project::saxpy::saxpy(&host, &config, 2.5, px, py, n as i64)
            }
        }
        .unwrap();
        dy.to_vec().unwrap()
    };
    assert_eq!(saxpy(true), saxpy(false), "saxpy");
    // The block reduction: 16 blocks of 256.
    let values: Vec<f32> = (0..n).map(|i| (i % 100) as f32 * 0.25).collect();
    let block_sum = |checked: bool| {
        let dvalues = DeviceBuffer::from_slice(&host, &values).unwrap();
        let partial = DeviceBuffer::<f32>::alloc(&host, n / 256).unwrap();
        // SAFETY: block_sum reads in[i] for i < n and writes out[block] for each block.
        unsafe {
            if checked {
                sample_checked::reduce::block_sum(&host, &config, &dvalues, &partial, n)
            } else {
                sample_project::reduce::block_sum(&host, &config, &dvalues, &partial, n)
            }
        }
        .unwrap();
        partial.to_vec().unwrap()
    };
    assert_eq!(block_sum(true), block_sum(false), "block_sum");
    // The tiled matmul, 64 x 64, and the stencil over a 64 x 64 grid.
    let size = 64;
    let a: Vec<f32> = (0..size * size).map(|i| (i % 7) as f32 - 3.0).collect();
    let b: Vec<f32> = (0..size * size).map(|i| (i % 5) as f32 - 2.0).collect();
    let tiles = LaunchConfig {
        grid: [(size / 16) as u32, (size / 16) as u32, 1],
        block: [16, 16, 1],
        shared_mem_bytes: 0,
    };
    let matmul = |checked: bool| {
        let (da, db) = (
            DeviceBuffer::from_slice(&host, &a).unwrap(),
            DeviceBuffer::from_slice(&host, &b).unwrap(),
        );
        let dc = DeviceBuffer::<f32>::alloc(&host, size * size).unwrap();
        let (va, vb, vc) = (
            da.view([size, size]).unwrap(),
            db.view([size, size]).unwrap(),
            dc.view([size, size]).unwrap(),
        );
        // SAFETY: every thread reads below size x size and writes its own element of c.
        unsafe {
            if checked {
                sample_checked::matmul::matmul(&host, &tiles, va, vb, vc)
            } else {
                sample_project::matmul::matmul(&host, &tiles, va, vb, vc)
            }
        }
        .unwrap();
        dc.to_vec().unwrap()
    };
    assert_eq!(matmul(true), matmul(false), "matmul");
    let stencil = |checked: bool| {
        let din = DeviceBuffer::from_slice(&host, &a).unwrap();
        let dout = DeviceBuffer::<f32>::alloc(&host, size * size).unwrap();
        let (vin, vout) = (
            din.view([size, size]).unwrap(),
            dout.view([size, size]).unwrap(),
        );
        // SAFETY: every thread reads its element and its neighbours inside the grid and writes
        // its own element.
        unsafe {
            if checked {
                sample_checked::stencil::jacobi(&host, &tiles, vin, vout)
            } else {
                sample_project::stencil::jacobi(&host, &tiles, vin, vout)
            }
        }
        .unwrap();
        dout.to_vec().unwrap()
    };
    assert_eq!(stencil(true), stencil(false), "stencil");
}

/// The line of the allocation the leak test forgets (the one that starts `let leaked =`).
fn leaked_at() -> usize {
    include_str!("checked.rs")
        .lines()
        .position(|line| line.trim_start().starts_with("let leaked ="))
        .map_or(0, |index| index + 1)
}

#[test]
fn a_buffer_never_freed_is_reported_at_exit_at_the_line_that_allocated_it() {
    let name = "a_buffer_never_freed_is_reported_at_exit_at_the_line_that_allocated_it";
    if let Some(stderr) = child_stderr(name, "leaks") {
        let leaks: Vec<&str> = stderr
            .lines()
            .filter(|line| line.starts_with("gpu-embed check: "))
            .collect();
        assert_eq!(leaks.len(), 1, "{stderr}");
        let origin = format!(
            "allocated at sample-project/tests/sample/checked.rs:{}:",
            leaked_at()
        );
        assert!(
            leaks[0].contains("leak: 64 bytes of device memory at 0x")
                && leaks[0].contains(&origin),
            "{stderr}"
        );
        return;
    }
    let host = Device::host();
    // A checked launch: the leak check reports when the process exits.
    let x = DeviceBuffer::from_slice(&host, &[1.0f32; 256]).unwrap();
    let y = DeviceBuffer::<f32>::alloc(&host, 256).unwrap();
    let leaked = DeviceBuffer::<f32>::alloc(&host, 16).unwrap();
    let config = LaunchConfig::for_elements(256, 256);
    // SAFETY: saxpy touches x[i] and y[i] for i < 256; both buffers hold 256 elements.
    unsafe {
        sample_checked::saxpy::saxpy(&host, &config, 2.0, x.device_ptr(), y.device_ptr(), 256)
    }
    .unwrap();
    assert_eq!(y.to_vec().unwrap(), vec![2.0; 256]);
    std::mem::forget(leaked);
}
