//! The checks of `kernels/vulkan.mlir`'s kernels (and `kernels/llvm_dialect.mlir`'s) that the
//! SPIR-V targets' tests share
//! (`tests/runtime/vulkan.rs` on Vulkan devices, `tests/runtime/opencl.rs` on OpenCL devices,
//! both also on the host): each launches one kernel through its stub on `device` and checks the
//! result against plain Rust.

use crate::vk;
use gpu_embed::{f16, Device, DeviceBuffer, LaunchConfig, Result};

fn block(x: u32) -> LaunchConfig {
    LaunchConfig {
        grid: [1, 1, 1],
        block: [x, 1, 1],
        shared_mem_bytes: 0,
    }
}

/// `scale`: `x[i] *= 2.5` over 1000 elements, blocks of 128 (the kernel's `known_block_size`).
pub fn check_scale(device: &Device) -> Result<()> {
    let n = 1000;
    let data: Vec<f32> = (0..n).map(|i| i as f32 - 7.0).collect();
    let x = DeviceBuffer::from_slice(device, &data)?;
    // SAFETY: the kernel updates x[i] for i < n; x holds n elements.
    unsafe { vk::scale(device, &LaunchConfig::for_elements(n, 128), &x, 2.5, n)? };
    let want: Vec<f32> = data.iter().map(|v| v * 2.5).collect();
    assert_eq!(x.to_vec()?, want);
    Ok(())
}

/// `any_block`, a kernel without a `known_block_size`, at block sizes from 1 to the device's
/// largest, in one, two and three dimensions, over grids of as many dimensions; each thread
/// writes its linear index tagged with the block's size.
pub fn check_any_block(device: &Device) -> Result<()> {
    let largest = device.limits().max_threads_per_block.min(1024);
    let shapes = [
        ([1, 1, 1], [5, 1, 1]),
        ([7, 1, 1], [3, 2, 1]),
        ([64, 1, 1], [4, 1, 1]),
        ([256, 1, 1], [2, 1, 1]),
        ([largest, 1, 1], [2, 1, 1]),
        ([8, 4, 1], [3, 1, 2]),
        ([4, 3, 2], [2, 2, 2]),
        // The first size again: its pipeline is made once and reused.
        ([1, 1, 1], [5, 1, 1]),
    ];
    for (block, grid) in shapes {
        let threads = block.iter().product::<u32>() as usize;
        let n = threads * grid.iter().product::<u32>() as usize;
        // One element more than the threads: the kernel must leave it alone.
        let out = DeviceBuffer::from_slice(device, &vec![-1i32; n + 1])?;
        let config = LaunchConfig {
            grid,
            block,
            shared_mem_bytes: 0,
        };
        // SAFETY: the kernel writes out[i] for i < n; out holds n + 1 elements.
        unsafe { vk::any_block(device, &config, &out, n)? };
        let mut want: Vec<i32> = (0..n).map(|i| (i + 1000 * threads) as i32).collect();
        want.push(-1);
        assert_eq!(out.to_vec()?, want, "block {block:?}, grid {grid:?}");
    }
    Ok(())
}

/// The f64 functions `f64_math` computes, each with its reference (the host's libm through
/// Rust's std) and the most ulps it may differ by: the Vulkan target's own implementations
/// (`gpu-build/src/targets/vulkan/f64_math.rs`) are held to these, as are the other targets'.
pub const F64_MATH: [(&str, fn(f64, f64) -> f64, u64); 9] = [
    ("exp", |x, _| x.exp(), 1),
    ("exp2", |x, _| x.exp2(), 1),
    ("log", |x, _| x.ln(), 1),
    ("log2", |x, _| x.log2(), 1),
    ("log10", |x, _| x.log10(), 1),
    ("sin", |x, _| x.sin(), 1),
    ("cos", |x, _| x.cos(), 1),
    ("tan", |x, _| x.tan(), 2),
    ("pow", f64::powf, 1),
];

/// Units in the last place between `a` and `b`: 0 when both are NaN or equal (±0 too), the
/// distance along the ordered f64 line otherwise (a NaN against a number: `u64::MAX`).
pub fn ulps(a: f64, b: f64) -> u64 {
    if (a.is_nan() && b.is_nan()) || a == b {
        return 0;
    }
    if a.is_nan() || b.is_nan() {
        return u64::MAX;
    }
    let ordered = |v: f64| {
        let bits = v.to_bits() as i64;
        if bits < 0 {
            i64::MIN - bits
        } else {
            bits
        }
    };
    ordered(a).abs_diff(ordered(b))
}

/// Inputs for `f64_math`: magnitudes from 1e-300 to 1e5 of both signs (sin, cos and tan are
/// held to their bounds below 1.6e6), subnormals, zeros, infinities, NaN, integers; exponents
/// from -30 to 30, integers among them (negative bases), and special ones.
pub fn f64_math_inputs() -> (Vec<f64>, Vec<f64>) {
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state >> 11) as f64 / (1u64 << 53) as f64
    };
    let special = [
        0.0,
        -0.0,
        1.0,
        -1.0,
        0.5,
        2.0,
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::NAN,
        f64::MIN_POSITIVE,
        5e-324,
        -2.5e-310,
        709.7,
        -745.0,
        std::f64::consts::FRAC_PI_4,
        std::f64::consts::PI,
        1e5,
    ];
    let mut x: Vec<f64> = special.to_vec();
    let mut y: Vec<f64> = special.iter().map(|_| 3.0).collect();
    y[..6].copy_from_slice(&[0.0, f64::NAN, f64::INFINITY, -3.0, -0.5, 0.5]);
    for i in 0..20_000 {
        let magnitude = 10f64.powf(next() * 305.0 - 300.0);
        let small = next() * 50.0 - 25.0;
        let value = match i % 3 {
            0 => magnitude,
            1 => small,
            _ => next() * 2e5 - 1e5,
        };
        x.push(if next() < 0.5 { -value } else { value });
        let exponent = next() * 60.0 - 30.0;
        y.push(if i % 4 == 0 {
            exponent.round()
        } else {
            exponent
        });
    }
    (x, y)
}

/// `f64_math` against the host's libm: returns each function's largest ulp distance; panics
/// when one exceeds its bound in [`F64_MATH`].
pub fn check_f64_math(device: &Device) -> Result<Vec<(&'static str, u64)>> {
    let (x, y) = f64_math_inputs();
    let n = x.len();
    let dx = DeviceBuffer::from_slice(device, &x)?;
    let dy = DeviceBuffer::from_slice(device, &y)?;
    let out = DeviceBuffer::<f64>::alloc(device, 9 * n)?;
    // SAFETY: thread i reads x[i], y[i] and writes out[9i..9i+9]; the buffers hold that.
    unsafe {
        crate::f64_math::f64_math(
            device,
            &LaunchConfig::for_elements(n, 64),
            &dx,
            &dy,
            &out,
            n,
        )?
    };
    let got = out.to_vec()?;
    let mut worst = Vec::new();
    for (j, (name, reference, bound)) in F64_MATH.iter().enumerate() {
        let (mut max, mut at) = (0, 0);
        for i in 0..n {
            let distance = ulps(got[9 * i + j], reference(x[i], y[i]));
            if distance > max {
                (max, at) = (distance, i);
            }
        }
        assert!(
            max <= *bound,
            "{name} on {}: {max} ulps at x = {:e}, y = {:e}: got {:e}, want {:e}",
            device.name(),
            x[at],
            y[at],
            got[9 * at + j],
            reference(x[at], y[at])
        );
        worst.push((*name, max));
    }
    Ok(worst)
}

/// `shift_rows`: a 2-D memref with a static inner size.
pub fn check_shift_rows(device: &Device) -> Result<()> {
    let (rows, cols) = (7usize, 300usize);
    let values: Vec<i32> = (0..rows * cols).map(|i| i as i32 - 50).collect();
    let a = DeviceBuffer::from_slice(device, &values)?;
    let b = DeviceBuffer::<i32>::alloc(device, rows * cols)?;
    let config = LaunchConfig {
        grid: [cols.div_ceil(64) as u32, rows as u32, 1],
        ..block(64)
    };
    // SAFETY: the kernel writes y[r][c] for r < rows, c < 300; both views cover the buffers.
    unsafe {
        vk::shift_rows(
            device,
            &config,
            a.view([rows, cols])?,
            b.view([rows, cols])?,
            7,
            rows,
        )?
    };
    let want: Vec<i32> = values.iter().map(|v| v + 7).collect();
    assert_eq!(b.to_vec()?, want);
    Ok(())
}

/// `tag_dims`: a 3-D memref whose sizes all come at launch, read with `memref.dim`, over one
/// block larger than the memref in each dimension (the kernel guards with the sizes it reads).
pub fn check_tag_dims(device: &Device) -> Result<()> {
    let (d0, d1, d2) = (3usize, 4usize, 5usize);
    let x = DeviceBuffer::from_slice(device, &vec![-1i32; d0 * d1 * d2])?;
    let config = LaunchConfig {
        grid: [1, 1, 1],
        block: [8, 8, 4],
        shared_mem_bytes: 0,
    };
    // SAFETY: each thread writes at most x[i][j][k] for i < d0, j < d1, k < d2; the view covers
    // the buffer.
    unsafe { vk::tag_dims(device, &config, x.view([d0, d1, d2])?)? };
    let sizes = (100 * d0 + 10 * d1 + d2) as i32;
    let want: Vec<i32> = (0..d0 * d1 * d2).map(|i| 1000 * i as i32 + sizes).collect();
    assert_eq!(x.to_vec()?, want);
    Ok(())
}

/// `block_max`: each block's maximum through workgroup memory and barriers.
pub fn check_block_max(device: &Device) -> Result<()> {
    let blocks = 50;
    let values: Vec<i32> = (0..blocks * 64)
        .map(|i| ((i as i64 * 7919) % 10007) as i32 - 5000)
        .collect();
    let input = DeviceBuffer::from_slice(device, &values)?;
    let out = DeviceBuffer::<i32>::alloc(device, blocks)?;
    let config = LaunchConfig {
        grid: [blocks as u32, 1, 1],
        ..block(64)
    };
    // SAFETY: block b reads in[64 b ..][..64] and writes out[b].
    unsafe { vk::block_max(device, &config, &input, &out)? };
    let want: Vec<i32> = values
        .chunks(64)
        .map(|c| *c.iter().max().unwrap())
        .collect();
    assert_eq!(out.to_vec()?, want);
    Ok(())
}

/// `subgroup_sum`: each thread gets its subgroup's sum, over the subgroup size the kernel runs
/// with (the driver's per-kernel figure where it has one, else the device's).
pub fn check_subgroup_sum(device: &Device) -> Result<()> {
    let n = 256;
    let data: Vec<i32> = (0..n).map(|i| (i % 13) as i32 - 3).collect();
    let x = DeviceBuffer::from_slice(device, &data)?;
    let out = DeviceBuffer::<i32>::alloc(device, n)?;
    // SAFETY: thread i reads x[i] and writes out[i]; both hold n = 4 * 64 elements.
    unsafe { vk::subgroup_sum(device, &LaunchConfig::for_elements(n, 64), &x, &out)? };
    let width = vk::BINARY
        .kernel(device, "subgroup_sum")?
        .attributes()
        .subgroup_size
        .unwrap_or(device.limits().warp_size) as usize;
    let want: Vec<i32> = (0..n)
        .map(|i| data[i / width * width..][..width].iter().sum())
        .collect();
    assert_eq!(out.to_vec()?, want, "subgroups of {width}");
    Ok(())
}

/// `widths`: 8-bit, half and 64-bit values.
pub fn check_widths(device: &Device) -> Result<()> {
    let n = 100;
    let a: Vec<i8> = (0..n).map(|i| (i as i32 * 37 % 256 - 128) as i8).collect();
    let b: Vec<f16> = (0..n)
        .map(|i| f16::from_f32(i as f32 * 1.75 - 40.0))
        .collect();
    let k = 1i64 << 40;
    let (da, db) = (
        DeviceBuffer::from_slice(device, &a)?,
        DeviceBuffer::from_slice(device, &b)?,
    );
    let dc = DeviceBuffer::<i64>::alloc(device, n)?;
    // SAFETY: thread i < n reads a[i], b[i] and writes c[i]; each holds n elements.
    unsafe {
        vk::widths(
            device,
            &LaunchConfig::for_elements(n, 32),
            &da,
            &db,
            &dc,
            k,
            n,
        )?
    };
    let want: Vec<i64> = a
        .iter()
        .zip(&b)
        .map(|(x, y)| i64::from(*x) + y.to_f32() as i64 + k)
        .collect();
    assert_eq!(dc.to_vec()?, want);
    Ok(())
}

/// Runs `vk::reductions` (every `gpu.all_reduce` operation over blocks of 320 threads) on
/// `device` and checks each block's results against plain Rust: integers exactly, the float sum
/// within the rounding of 320 additions in any order, the float maximum exactly.
pub fn check_reductions(device: &Device) -> Result<()> {
    const BLOCK: usize = 320;
    let blocks = 3;
    let n = BLOCK * blocks;
    // Signed values around 0 (min and max differ signed and unsigned), mostly 1 and -1 so the
    // product stays informative, a few 2s and 3s.
    let ints: Vec<i32> = (0..n)
        .map(|i| match i % 37 {
            0 => 3,
            5 => 2,
            11 => -7,
            k if k % 2 == 0 => 1,
            _ => -1,
        } + if i % 101 == 0 { 1000 } else { 0 })
        .collect();
    let floats: Vec<f32> = (0..n)
        .map(|i| ((i * 7919) % 1000) as f32 / 8.0 - 60.0)
        .collect();
    let (din, dfin) = (
        DeviceBuffer::from_slice(device, &ints)?,
        DeviceBuffer::from_slice(device, &floats)?,
    );
    let dout = DeviceBuffer::<i32>::alloc(device, 10 * blocks)?;
    let dfout = DeviceBuffer::<f32>::alloc(device, 2 * blocks)?;
    let config = LaunchConfig {
        grid: [blocks as u32, 1, 1],
        block: [BLOCK as u32, 1, 1],
        shared_mem_bytes: 0,
    };
    // SAFETY: block b reads in[320 b ..][..320] and fin likewise, and writes out[10 b ..][..10]
    // and fout[2 b ..][..2]; every buffer holds that many elements.
    unsafe { vk::reductions(device, &config, &din, &dfin, &dout, &dfout)? };
    let (out, fout) = (dout.to_vec()?, dfout.to_vec()?);
    for b in 0..blocks {
        let x = &ints[b * BLOCK..][..BLOCK];
        let u = || x.iter().map(|&v| v as u32);
        let want = [
            x.iter().fold(0i32, |a, &v| a.wrapping_add(v)),
            x.iter().fold(1i32, |a, &v| a.wrapping_mul(v)),
            *x.iter().min().unwrap(),
            *x.iter().max().unwrap(),
            u().min().unwrap() as i32,
            u().max().unwrap() as i32,
            x.iter().fold(-1i32, |a, &v| a & v),
            x.iter().fold(0i32, |a, &v| a | v),
            x.iter().fold(0i32, |a, &v| a ^ v),
            u().min().unwrap() as i32,
        ];
        assert_eq!(&out[10 * b..][..10], want, "block {b} on {}", device.name());
        let f = &floats[b * BLOCK..][..BLOCK];
        let sum: f64 = f.iter().map(|&v| f64::from(v)).sum();
        let max = f.iter().copied().fold(f32::MIN, f32::max);
        assert!(
            (f64::from(fout[2 * b]) - sum).abs() <= 1e-3 * sum.abs().max(1.0),
            "block {b} on {}: sum {} against {sum}",
            device.name(),
            fout[2 * b]
        );
        assert_eq!(fout[2 * b + 1], max, "block {b} on {}", device.name());
    }
    Ok(())
}

/// `reductions_in_one_chunk` over 3 blocks of 16 x 4 x 2 threads against the CPU: a declared
/// block of at most one chunk, which the SPIR-V lowering reduces with no loop around its
/// barriers (`targets/support/all_reduce.rs`).
pub fn check_reductions_in_one_chunk(device: &Device) -> Result<()> {
    const BLOCK: usize = 128;
    let blocks = 3;
    let n = BLOCK * blocks;
    let ints: Vec<i32> = (0..n as i32)
        .map(|i| (i * 7919) % 201 - 100 + if i % 53 == 0 { -1000 } else { 0 })
        .collect();
    let floats: Vec<f32> = (0..n)
        .map(|i| ((i * 104_729) % 1000) as f32 / 8.0 - 60.0)
        .collect();
    let (din, dfin) = (
        DeviceBuffer::from_slice(device, &ints)?,
        DeviceBuffer::from_slice(device, &floats)?,
    );
    let dout = DeviceBuffer::<i32>::alloc(device, 3 * blocks)?;
    let dfout = DeviceBuffer::<f32>::alloc(device, blocks)?;
    let config = LaunchConfig {
        grid: [blocks as u32, 1, 1],
        block: [16, 4, 2],
        shared_mem_bytes: 0,
    };
    // SAFETY: block b reads in[128 b ..][..128] and fin likewise, and writes out[3 b ..][..3]
    // and fout[b]; every buffer holds that many elements.
    unsafe { vk::reductions_in_one_chunk(device, &config, &din, &dfin, &dout, &dfout)? };
    let (out, fout) = (dout.to_vec()?, dfout.to_vec()?);
    for b in 0..blocks {
        let x = &ints[b * BLOCK..][..BLOCK];
        let want = [
            x.iter().fold(0i32, |a, &v| a.wrapping_add(v)),
            *x.iter().min().unwrap(),
            x.iter().map(|&v| v as u32).min().unwrap() as i32,
        ];
        assert_eq!(&out[3 * b..][..3], want, "block {b} on {}", device.name());
        let max = floats[b * BLOCK..][..BLOCK]
            .iter()
            .copied()
            .fold(f32::MIN, f32::max);
        assert_eq!(fout[b], max, "block {b} on {}", device.name());
    }
    Ok(())
}

/// `atomics`: every `memref.atomic_rmw` kind the LLVM targets lower too and a generic atomic,
/// on global and workgroup memory, over 1000 values in blocks of 64. Besides the folded results
/// (against plain Rust), the values the atomics returned prove each was one indivisible step:
/// in each block, the tickets of one workgroup bin are 0, 1, 2, … (no two threads read the same
/// count), and the exchanged values are the initial one and every thread's, each once.
pub fn check_atomics(device: &Device) -> Result<()> {
    let n = 1000usize;
    let values: Vec<i32> = (0..n)
        .map(|g| ((g as i64 * 7919) % 2001) as i32 - 1000)
        .collect();
    let mut ints = vec![0i32; 27];
    ints[17] = -1;
    ints[20] = i32::MIN;
    ints[21] = i32::MAX;
    ints[23] = -1;
    ints[24] = 1;
    ints[26] = 12345;
    let floats0 = [
        0.0f32,
        f32::NEG_INFINITY,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::INFINITY,
    ];
    let input = DeviceBuffer::from_slice(device, &values)?;
    let d_ints = DeviceBuffer::from_slice(device, &ints)?;
    let d_floats = DeviceBuffer::from_slice(device, &floats0)?;
    let olds = DeviceBuffer::from_slice(device, &vec![-7i32; 2 * n])?;
    // SAFETY: thread g < n reads in[g] and writes olds[g] and olds[n + g]; the atomics reach
    // ints[0..27] and floats[0..5]; every buffer holds that.
    unsafe {
        vk::atomics(
            device,
            &LaunchConfig::for_elements(n, 64),
            &input,
            &d_ints,
            &d_floats,
            &olds,
            n,
        )?
    };
    let (got, got_floats, got_olds) = (d_ints.to_vec()?, d_floats.to_vec()?, olds.to_vec()?);
    let mut want = ints.clone();
    for &v in &values {
        want[(v & 15) as usize] += 1;
        want[16] = want[16].wrapping_add(v);
        want[17] &= v;
        want[18] |= v;
        want[19] ^= v;
        want[20] = want[20].max(v);
        want[21] = want[21].min(v);
        want[22] = (want[22] as u32).max(v as u32) as i32;
        want[23] = (want[23] as u32).min(v as u32) as i32;
        want[24] = want[24].wrapping_mul(v | 1);
        want[25] = want[25].wrapping_add(v.wrapping_mul(v));
    }
    want[26] = got[26];
    assert_eq!(got, want, "ints on {}", device.name());
    let quarters: Vec<f32> = values.iter().map(|&v| v as f32 * 0.25).collect();
    let max = quarters.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let min = quarters.iter().copied().fold(f32::INFINITY, f32::min);
    let want_floats = [quarters.iter().sum::<f32>(), max, min, max, min];
    assert_eq!(got_floats, want_floats, "floats on {}", device.name());
    for (block, chunk) in values.chunks(64).enumerate() {
        for bin in 0..16 {
            let mut tickets: Vec<i32> = (0..chunk.len())
                .filter(|&t| chunk[t] & 15 == bin)
                .map(|t| got_olds[64 * block + t])
                .collect();
            tickets.sort_unstable();
            let count = tickets.len() as i32;
            assert_eq!(
                tickets,
                (0..count).collect::<Vec<_>>(),
                "block {block}, bin {bin}"
            );
        }
    }
    let mut exchanged: Vec<i32> = got_olds[n..].to_vec();
    exchanged.push(got[26]);
    exchanged.sort_unstable();
    let mut all: Vec<i32> = (1..=n as i32).collect();
    all.push(12345);
    all.sort_unstable();
    assert_eq!(exchanged, all, "exchanges on {}", device.name());
    Ok(())
}

/// `float_products` (`kernels/spirv_atomics.mlir`): a float product and a generic atomic on
/// floats over 1000 threads, against plain Rust: the product exactly; the generic atomic's sum
/// by its invariants (it depends on the order the threads come in): at least every thread's
/// g / 8, at most the sum of them all, and a sum of distinct eighths.
pub fn check_float_products(device: &Device) -> Result<()> {
    let n = 1000usize;
    let out = DeviceBuffer::from_slice(device, &[1.0f32, 0.0])?;
    // SAFETY: the kernel's atomics reach out[0] and out[1]; the buffer holds two floats.
    unsafe {
        crate::spirv_atomics::float_products(device, &LaunchConfig::for_elements(n, 64), &out, n)?
    };
    let got = out.to_vec()?;
    let negatives = (0..n).filter(|g| g % 7 == 0).count() as i32;
    let doublings = (0..n).filter(|g| g % 97 == 0).count() as i32;
    let product = (-1f32).powi(negatives) * 2f32.powi(doublings);
    assert_eq!(got[0], product, "product on {}", device.name());
    let largest = (n - 1) as f32 / 8.0;
    let everything: f32 = (0..n).map(|g| g as f32 / 8.0).sum();
    assert!(
        got[1] >= largest && got[1] <= everything && (got[1] * 8.0).fract() == 0.0,
        "generic atomic on {}: {} (at least {largest}, at most {everything})",
        device.name(),
        got[1]
    );
    Ok(())
}

/// `wide_atomics` over 1000 threads: 64-bit integer atomics on global and workgroup memory and
/// an f64 add, each against plain Rust (every result is exact in any order) for `threads`
/// threads: another count must fail the check.
pub fn check_wide_atomics(device: &Device, threads: u64) -> Result<()> {
    let n = 1000u64;
    let out = DeviceBuffer::from_slice(device, &[0i64, i64::MIN, -1, 0])?;
    let sum = DeviceBuffer::from_slice(device, &[0.0f64])?;
    // SAFETY: the kernel's atomics reach out[0..4] and sum[0], which the buffers hold.
    unsafe {
        crate::spirv_atomics::wide_atomics(
            device,
            &LaunchConfig::for_elements(n as usize, 64),
            &out,
            &sum,
            n as usize,
        )?
    };
    let tagged: i64 = (0..threads).map(|g| ((g << 32) + 1) as i64).sum();
    let largest = (((threads - 1) << 33) - 5) as i64;
    let smallest = !(threads - 1) as i64;
    assert_eq!(
        out.to_vec()?,
        [tagged, largest, smallest, tagged],
        "on {}",
        device.name()
    );
    let halves: f64 = (0..threads).map(|g| g as f64 / 2.0).sum();
    assert_eq!(sum.to_vec()?, [halves], "on {}", device.name());
    Ok(())
}

/// `shuffle_sum`: sums over 32 lanes by `xor` shuffles, in blocks of 64. lavapipe's subgroups
/// are 8 wide: the 32-lane shuffles go through workgroup memory there, and through the
/// subgroup's own shuffle where subgroups have 32 lanes or more.
pub fn check_shuffle_sum(device: &Device) -> Result<()> {
    let n = 128;
    let data: Vec<i32> = (0..n).map(|i| (i * 7 % 19) as i32 - 9).collect();
    let x = DeviceBuffer::from_slice(device, &data)?;
    let out = DeviceBuffer::<i32>::alloc(device, n)?;
    // SAFETY: thread i reads x[i] and writes out[i]; both hold n = 2 * 64 elements.
    unsafe { vk::shuffle_sum(device, &LaunchConfig::for_elements(n, 64), &x, &out)? };
    let want: Vec<i32> = (0..n)
        .map(|i| data[i / 32 * 32..][..32].iter().sum())
        .collect();
    assert_eq!(out.to_vec()?, want, "on {}", device.name());
    Ok(())
}

/// `shuffle_modes`: blocks of 4 threads, shuffles of width 4: every lane takes part (MLIR's
/// rule: the first `width` lanes). On the host the `up` column is not compared: the host
/// follows MLIR's NVVM lowering, which for a width below 32 lets `up` read only from lanes
/// 32 - width and above.
pub fn check_shuffle_modes(device: &Device) -> Result<()> {
    let n = 64;
    let data: Vec<i32> = (0..n as i32).map(|i| i * 3 + 1).collect();
    let x = DeviceBuffer::from_slice(device, &data)?;
    let out = DeviceBuffer::<i32>::alloc(device, 4 * n)?;
    // SAFETY: thread i reads x[i] and writes out[4i..4i+4]; the buffers hold that.
    unsafe {
        crate::vk_shuffle::shuffle_modes(device, &LaunchConfig::for_elements(n, 4), &x, &out)?
    };
    let got = out.to_vec()?;
    let host = device.vendor() == gpu_embed::Vendor::Host;
    for i in 0..n {
        let (lane, segment) = (i % 4, i - i % 4);
        let at = |lane: usize| data[segment + lane];
        let up = if lane >= 1 { at(lane - 1) } else { -1000 };
        let down = if lane + 1 < 4 { at(lane + 1) } else { -1000 };
        let want = [
            at(lane ^ 1),
            if host { got[4 * i + 1] } else { up },
            down,
            at(1),
        ];
        assert_eq!(
            got[4 * i..4 * i + 4],
            want,
            "thread {i} on {}",
            device.name()
        );
    }
    Ok(())
}

/// `llvm_dialect.mlir`'s kernels, each equal to plain Rust: the two saxpys (over `!llvm.ptr<1>`
/// and generic pointers: an intrinsic, GEP chains, a loop) with `a`, and `pairs` (GEPs into
/// structs, `fabs`, `maxnum` and `frem`, a select and a branch carrying pointers, pointer
/// arithmetic through integers). The
/// saxpys are compared against `a = 1.5`: another `a` must fail the check.
pub fn check_llvm_kernels(device: &Device, a: f32) -> Result<()> {
    use crate::llvm_kernels;
    let n = 1000usize;
    let x: Vec<f32> = (0..n).map(|i| (i % 17) as f32 * 0.5).collect();
    let y: Vec<f32> = (0..n).map(|i| (i % 5) as f32 - 2.0).collect();
    let want: Vec<f32> = (0..n)
        .map(|i| (0..i % 4).fold(1.5f32.mul_add(x[i], y[i]), |acc, j| acc + x[j]))
        .collect();
    let config = LaunchConfig::for_elements(n, 64);
    for generic in [false, true] {
        let (dx, dy) = (
            DeviceBuffer::from_slice(device, &x)?,
            DeviceBuffer::from_slice(device, &y)?,
        );
        let (px, py) = (dx.device_ptr(), dy.device_ptr());
        // SAFETY: the kernels read x[j] for j <= i < n and update y[i] for i < n; both buffers
        // hold n elements.
        unsafe {
            if generic {
                llvm_kernels::saxpy_generic(device, &config, a, px, py, n as i64)?
            } else {
                llvm_kernels::saxpy_global(device, &config, a, px, py, n as i64)?
            }
        };
        assert_eq!(dy.to_vec()?, want, "generic pointers: {generic}");
    }
    let pairs: Vec<f32> = (0..2 * n).map(|k| (k % 13) as f32 - 6.0).collect();
    let want: Vec<f32> = (0..n)
        .map(|i| {
            let larger = pairs[2 * i].abs().max(pairs[2 * i + 1]);
            (larger + if i % 2 == 1 { x[i] } else { y[i] }) % 7.0
        })
        .collect();
    let (dpairs, dx, dy) = (
        DeviceBuffer::from_slice(device, &pairs)?,
        DeviceBuffer::from_slice(device, &x)?,
        DeviceBuffer::from_slice(device, &y)?,
    );
    let out = DeviceBuffer::from_slice(device, &vec![0.0f32; n])?;
    // SAFETY: thread i < n reads pairs[2i], pairs[2i + 1] (2n elements), x[i] or y[i] (n each)
    // and writes out[i] (n).
    unsafe {
        llvm_kernels::pairs(
            device,
            &config,
            dpairs.device_ptr(),
            dx.device_ptr(),
            dy.device_ptr(),
            out.device_ptr(),
            n as i32,
        )?
    };
    assert_eq!(out.to_vec()?, want, "pairs");
    Ok(())
}

/// `llvm_walk.mlir`'s `walk` (a pointer carried around a loop, vector loads and stores, an 8-bit
/// load) equal to plain Rust.
pub fn check_llvm_walk(device: &Device) -> Result<()> {
    let vectors: Vec<f32> = (0..4 * 37).map(|k| (k % 9) as f32 - 4.0).collect();
    let mut sums = [0.0f32; 4];
    for (k, value) in vectors.iter().enumerate() {
        sums[k % 4] += value;
    }
    let (dvectors, dbytes) = (
        DeviceBuffer::from_slice(device, &vectors)?,
        DeviceBuffer::from_slice(device, &[-7i8, 0, 0, 0])?,
    );
    let out = DeviceBuffer::from_slice(device, &[0.0f32; 8])?;
    let one = LaunchConfig {
        grid: [1, 1, 1],
        block: [1, 1, 1],
        shared_mem_bytes: 0,
    };
    // SAFETY: one thread reads the 37 vectors (148 floats, 16-byte aligned as device
    // allocations are) and bytes[0], and writes out[0..5] of 8.
    unsafe {
        crate::llvm_walk::walk(
            device,
            &one,
            dvectors.device_ptr(),
            dbytes.device_ptr(),
            out.device_ptr(),
            37,
        )?
    };
    let got = out.to_vec()?;
    assert_eq!(got[..5], [sums[0], sums[1], sums[2], sums[3], -7.0], "walk");
    Ok(())
}
