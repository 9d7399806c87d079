//! The checked host run (`GPU_EMBED_CHECK`, the sample's kernels as compiled by `sample-checked`)
//! against the same kernels unchecked and against Oclgrind, the OpenCL interpreter that finds
//! the same classes of bug (`--data-races --uninitialized`: here `OCLGRIND_DATA_RACES=1
//! OCLGRIND_UNINITIALIZED=1`, through its ICD library), on the benchmark's OpenCL C twins
//! (`peers/kernels.cl`), in one run, with the same inputs: saxpy over 2^16 floats, the block
//! reduction over 2^16, the tiled matmul 64 x 64, the 5-point stencil 256 x 256 (sizes
//! Oclgrind finishes in seconds). The checked kernels run twice: with the default checks, and
//! with every check (`gpu_embed::choose_checks("all")`: uninitialized reads and races in global
//! memory too, whose shadow Oclgrind's two options keep). Every result is checked against Rust
//! first.
//!
//!     cargo bench -p sample-project --bench checked_vs_oclgrind
//!
//! One line per kernel for scripts: `ratio KERNEL checked/unchecked Rx all/unchecked Rx
//! all/oclgrind Rx`. The host rows are medians of 11 rounds; Oclgrind's, of 3.

#[path = "peers/opencl.rs"]
mod opencl;

use gpu_embed::{Device, DeviceBuffer, LaunchConfig};
use opencl::{arg, OpenCl};
use std::time::{Duration, Instant};

const ROUNDS: usize = 11;
const OCLGRIND_ROUNDS: usize = 3;
const N: usize = 1 << 16;
const MATMUL_N: usize = 64;
const GRID: usize = 256;
/// Debian's `oclgrind` package: its runtime as an ICD, which it does not register.
const OCLGRIND_ICD: &str = "/usr/lib/oclgrind/liboclgrind-rt-icd.so";

fn median(rounds: usize, mut run: impl FnMut()) -> Duration {
    run();
    let mut times: Vec<Duration> = (0..rounds)
        .map(|_| {
            let start = Instant::now();
            run();
            start.elapsed()
        })
        .collect();
    times.sort();
    times[times.len() / 2]
}

fn check(what: &str, got: &[f32], want: &[f32], tolerance: f32) {
    assert_eq!(got.len(), want.len(), "{what}");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() <= tolerance * w.abs().max(1.0),
            "{what}: element {i} is {g}, want {w}"
        );
    }
}

/// How the host runs a kernel.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    Unchecked,
    /// The checked object with the default checks.
    Checked,
    /// The checked object with every check.
    AllChecks,
}

impl Mode {
    /// Chooses the mode's checks; whether it runs the checked object.
    fn checked(self) -> bool {
        let checks = if self == Mode::AllChecks {
            "all"
        } else {
            "default"
        };
        gpu_embed::choose_checks(checks).unwrap();
        self != Mode::Unchecked
    }
}

/// One kernel's four times.
struct Row {
    name: &'static str,
    unchecked: Duration,
    checked: Duration,
    all_checks: Duration,
    oclgrind: Option<Duration>,
}

fn main() {
    // Before anything loads the OpenCL loader: Oclgrind alone, with its checks on.
    let oclgrind = if std::path::Path::new(OCLGRIND_ICD).exists() {
        std::env::set_var("OCL_ICD_VENDORS", OCLGRIND_ICD);
        std::env::set_var("OCLGRIND_DATA_RACES", "1");
        std::env::set_var("OCLGRIND_UNINITIALIZED", "1");
        OpenCl::platform(
            "Oclgrind",
            "Oclgrind",
            "no Oclgrind platform from its ICD library",
        )
    } else {
        Err(format!(
            "{OCLGRIND_ICD} is missing (scripts/setup.sh installs Debian's oclgrind)"
        ))
    };
    let oclgrind = match oclgrind {
        Ok(oclgrind) => {
            println!(
                "Oclgrind: {} (data races, uninitialized values)",
                oclgrind.name
            );
            Some(oclgrind)
        }
        Err(why) => {
            println!("Oclgrind: skipped: {why}");
            None
        }
    };
    // Device memory allocated while the uninitialized-read check is on is watched (the
    // default-check runs ignore that).
    gpu_embed::choose_checks("all").unwrap();
    let host = Device::host();
    let rows = [
        saxpy(&host, oclgrind.as_ref()),
        block_sum(&host, oclgrind.as_ref()),
        matmul(&host, oclgrind.as_ref()),
        stencil(&host, oclgrind.as_ref()),
    ];
    println!(
        "{:<12} {:>11} {:>11} {:>11} {:>13} {:>16} {:>12} {:>14}",
        "kernel",
        "unchecked",
        "checked",
        "all checks",
        "oclgrind",
        "checked/unchecked",
        "all/unchecked",
        "oclgrind/all"
    );
    let ms = |d: Duration| format!("{:.3}ms", d.as_secs_f64() * 1e3);
    let ratio = |a: Duration, b: Duration| a.as_secs_f64() / b.as_secs_f64();
    for row in &rows {
        println!(
            "{:<12} {:>11} {:>11} {:>11} {:>13} {:>15.1}x {:>11.1}x {:>14}",
            row.name,
            ms(row.unchecked),
            ms(row.checked),
            ms(row.all_checks),
            row.oclgrind.map_or("-".to_string(), ms),
            ratio(row.checked, row.unchecked),
            ratio(row.all_checks, row.unchecked),
            row.oclgrind.map_or("-".to_string(), |o| format!(
                "{:.0}x",
                ratio(o, row.all_checks)
            )),
        );
    }
    let geomean = |of: fn(&Row) -> Duration| {
        let logs: f64 = rows.iter().map(|r| ratio(of(r), r.unchecked).ln()).sum();
        (logs / rows.len() as f64).exp()
    };
    println!(
        "geometric mean checked/unchecked: {:.1}x, all checks/unchecked: {:.1}x",
        geomean(|r| r.checked),
        geomean(|r| r.all_checks)
    );
    for row in &rows {
        let oclgrind = row.oclgrind.map_or("-".to_string(), |o| {
            format!("{:.5}x", ratio(row.all_checks, o))
        });
        println!(
            "ratio {} checked/unchecked {:.2}x all/unchecked {:.2}x all/oclgrind {oclgrind}",
            row.name,
            ratio(row.checked, row.unchecked),
            ratio(row.all_checks, row.unchecked)
        );
    }
}

fn saxpy(host: &Device, oclgrind: Option<&OpenCl>) -> Row {
    let a = 2.5f32;
    let x: Vec<f32> = (0..N).map(|i| (i % 1000) as f32).collect();
    let y0 = vec![1.0f32; N];
    let want: Vec<f32> = x.iter().map(|&x| a * x + 1.0).collect();
    let dx = DeviceBuffer::from_slice(host, &x).unwrap();
    let mut dy = DeviceBuffer::from_slice(host, &y0).unwrap();
    let config = LaunchConfig::for_elements(N, 256);
    let (px, py) = (dx.device_ptr(), dy.device_ptr());
    let mut timed = |mode: Mode| {
        let checked = mode.checked();
        dy.copy_from(&y0).unwrap();
        let time = median(ROUNDS, || {
            // SAFETY: saxpy touches x[i] and y[i] for i < n; both buffers hold n elements.
            unsafe {
                if checked {
                    sample_checked::saxpy::saxpy(host, &config, a, px, py, N as i64)
                } else {
                    sample_project::saxpy::saxpy(host, &config, a, px, py, N as i64)
                }
            }
            .unwrap();
            host.synchronize().unwrap();
        });
        dy.copy_from(&y0).unwrap();
        // SAFETY: as above.
        unsafe { sample_checked::saxpy::saxpy(host, &config, a, px, py, N as i64) }.unwrap();
        check("saxpy", &dy.to_vec().unwrap(), &want, 1e-6);
        time
    };
    let (unchecked, checked) = (timed(Mode::Unchecked), timed(Mode::Checked));
    let all_checks = timed(Mode::AllChecks);
    let oclgrind = oclgrind.map(|cl| {
        let (cx, mut cy) = (cl.buffer(&x), cl.buffer(&y0));
        let kernel = cl.kernel("saxpy");
        arg(&kernel, 0, &a);
        arg(&kernel, 1, &cx);
        arg(&kernel, 2, &cy);
        arg(&kernel, 3, &(N as i64));
        let time = median(OCLGRIND_ROUNDS, || {
            cl.enqueue(&kernel, &[N], &[256]);
            cl.finish();
        });
        cl.write(&mut cy, &y0);
        cl.enqueue(&kernel, &[N], &[256]);
        cl.finish();
        let mut out = vec![0.0; N];
        cl.read(&cy, &mut out);
        check("saxpy on Oclgrind", &out, &want, 1e-6);
        time
    });
    Row {
        name: "saxpy",
        unchecked,
        checked,
        all_checks,
        oclgrind,
    }
}

fn block_sum(host: &Device, oclgrind: Option<&OpenCl>) -> Row {
    let blocks = N / 256;
    let values: Vec<f32> = (0..N).map(|i| (i % 100) as f32 * 0.25).collect();
    let want: Vec<f32> = values.chunks(256).map(|c| c.iter().sum()).collect();
    let dvalues = DeviceBuffer::from_slice(host, &values).unwrap();
    let partial = DeviceBuffer::<f32>::alloc(host, blocks).unwrap();
    let config = LaunchConfig::for_elements(N, 256);
    let timed = |mode: Mode| {
        let checked = mode.checked();
        let time = median(ROUNDS, || {
            // SAFETY: block_sum reads in[i] for i < n and writes out[block] for each block.
            unsafe {
                if checked {
                    sample_checked::reduce::block_sum(host, &config, &dvalues, &partial, N)
                } else {
                    sample_project::reduce::block_sum(host, &config, &dvalues, &partial, N)
                }
            }
            .unwrap();
            host.synchronize().unwrap();
        });
        check("block_sum", &partial.to_vec().unwrap(), &want, 1e-5);
        time
    };
    let (unchecked, checked) = (timed(Mode::Unchecked), timed(Mode::Checked));
    let all_checks = timed(Mode::AllChecks);
    let oclgrind = oclgrind.map(|cl| {
        let (cin, cout) = (cl.buffer(&values), cl.buffer(&vec![0.0; blocks]));
        let kernel = cl.kernel("block_sum");
        arg(&kernel, 0, &cin);
        arg(&kernel, 1, &cout);
        arg(&kernel, 2, &(N as u64));
        let time = median(OCLGRIND_ROUNDS, || {
            cl.enqueue(&kernel, &[N], &[256]);
            cl.finish();
        });
        let mut out = vec![0.0; blocks];
        cl.read(&cout, &mut out);
        check("block_sum on Oclgrind", &out, &want, 1e-5);
        time
    });
    Row {
        name: "block_sum",
        unchecked,
        checked,
        all_checks,
        oclgrind,
    }
}

fn matmul(host: &Device, oclgrind: Option<&OpenCl>) -> Row {
    let n = MATMUL_N;
    let a: Vec<f32> = (0..n * n).map(|i| (i % 7) as f32 - 3.0).collect();
    let b: Vec<f32> = (0..n * n).map(|i| (i % 5) as f32 - 2.0).collect();
    let want: Vec<f32> = sample_project::matmul_reference(&a, &b, n)
        .into_iter()
        .map(|v| v as f32)
        .collect();
    let (da, db) = (
        DeviceBuffer::from_slice(host, &a).unwrap(),
        DeviceBuffer::from_slice(host, &b).unwrap(),
    );
    let dc = DeviceBuffer::<f32>::alloc(host, n * n).unwrap();
    let tiles = (n / 16) as u32;
    let config = LaunchConfig {
        grid: [tiles, tiles, 1],
        block: [16, 16, 1],
        shared_mem_bytes: 0,
    };
    let timed = |mode: Mode| {
        let checked = mode.checked();
        let time = median(ROUNDS, || {
            let (va, vb, vc) = (
                da.view([n, n]).unwrap(),
                db.view([n, n]).unwrap(),
                dc.view([n, n]).unwrap(),
            );
            // SAFETY: every thread reads below n x n and writes its own element of c.
            unsafe {
                if checked {
                    sample_checked::matmul::matmul(host, &config, va, vb, vc)
                } else {
                    sample_project::matmul::matmul(host, &config, va, vb, vc)
                }
            }
            .unwrap();
            host.synchronize().unwrap();
        });
        check("matmul", &dc.to_vec().unwrap(), &want, 0.0);
        time
    };
    let (unchecked, checked) = (timed(Mode::Unchecked), timed(Mode::Checked));
    let all_checks = timed(Mode::AllChecks);
    let oclgrind = oclgrind.map(|cl| {
        let (ca, cb, cc) = (cl.buffer(&a), cl.buffer(&b), cl.buffer(&vec![0.0; n * n]));
        let kernel = cl.kernel("matmul");
        arg(&kernel, 0, &ca);
        arg(&kernel, 1, &cb);
        arg(&kernel, 2, &cc);
        arg(&kernel, 3, &(n as u64));
        arg(&kernel, 4, &(n as u64));
        let time = median(OCLGRIND_ROUNDS, || {
            cl.enqueue(&kernel, &[n, n], &[16, 16]);
            cl.finish();
        });
        let mut out = vec![0.0; n * n];
        cl.read(&cc, &mut out);
        check("matmul on Oclgrind", &out, &want, 0.0);
        time
    });
    Row {
        name: "matmul",
        unchecked,
        checked,
        all_checks,
        oclgrind,
    }
}

fn stencil(host: &Device, oclgrind: Option<&OpenCl>) -> Row {
    let (rows, cols) = (GRID, GRID);
    let input: Vec<f32> = (0..rows * cols)
        .map(|i| ((i * 7) % 13) as f32 * 0.5)
        .collect();
    let din = DeviceBuffer::from_slice(host, &input).unwrap();
    let dout = DeviceBuffer::<f32>::alloc(host, rows * cols).unwrap();
    let config = LaunchConfig {
        grid: [(cols / 16) as u32, (rows / 16) as u32, 1],
        block: [16, 16, 1],
        shared_mem_bytes: 0,
    };
    let timed = |mode: Mode| {
        let checked = mode.checked();
        median(ROUNDS, || {
            let (vin, vout) = (
                din.view([rows, cols]).unwrap(),
                dout.view([rows, cols]).unwrap(),
            );
            // SAFETY: every thread reads its element and its neighbours inside the grid and
            // writes its own element.
            unsafe {
                if checked {
                    sample_checked::stencil::jacobi(host, &config, vin, vout)
                } else {
                    sample_project::stencil::jacobi(host, &config, vin, vout)
                }
            }
            .unwrap();
            host.synchronize().unwrap();
        })
    };
    let unchecked = timed(Mode::Unchecked);
    let want = dout.to_vec().unwrap();
    let checked = timed(Mode::Checked);
    check("stencil, checked", &dout.to_vec().unwrap(), &want, 0.0);
    let all_checks = timed(Mode::AllChecks);
    check("stencil, all checks", &dout.to_vec().unwrap(), &want, 0.0);
    let oclgrind = oclgrind.map(|cl| {
        let (cin, cout) = (cl.buffer(&input), cl.buffer(&vec![0.0; rows * cols]));
        let kernel = cl.kernel("jacobi");
        arg(&kernel, 0, &cin);
        arg(&kernel, 1, &cout);
        arg(&kernel, 2, &(rows as u64));
        arg(&kernel, 3, &(cols as u64));
        let time = median(OCLGRIND_ROUNDS, || {
            cl.enqueue(&kernel, &[cols, rows], &[16, 16]);
            cl.finish();
        });
        let mut out = vec![0.0; rows * cols];
        cl.read(&cout, &mut out);
        check("stencil on Oclgrind", &out, &want, 1e-6);
        time
    });
    Row {
        name: "stencil",
        unchecked,
        checked,
        all_checks,
        oclgrind,
    }
}
