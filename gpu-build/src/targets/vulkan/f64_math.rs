//! f64 math on Vulkan (issue 39). GLSL.std.450 has `exp`, `log`, `sin`, `cos`, `pow` and their
//! kin for 16- and 32-bit floats only; it has `Sqrt`, `Floor`, `Fma`, … for f64 too, but MLIR
//! 22's `convert-math-to-spirv` refuses every math op on f64. So this pass, on the Vulkan copy:
//! - replaces each scalar f64 `math` op GLSL has for f64 by that `spirv.GL` op, which the
//!   conversion then leaves as it is ([`GLSL_F64`]);
//! - replaces each scalar `math.{exp,exp2,log,log2,log10,sin,cos,tan,powf}` on f64 by its
//!   implementation in f64/i64 arithmetic and those GLSL ops (Vulkan's `Float64` and `Int64`),
//!   spliced in place with the op's location.
//!
//! The algorithms are fdlibm's (Sun Microsystems, freely redistributable; as in musl):
//! - `exp`: Cody–Waite reduction by ln 2 (`ln2_hi` with 32 bits, so `k·ln2_hi` is exact), a
//!   degree-13 Taylor polynomial on |r| ≤ ln2/2, and the scale 2^k applied in two halves so that
//!   subnormal results are reached;
//! - `log`: x = m·2^e with m in [√½, √2), ln m = 2·atanh(s), s = (m−1)/(m+1) carried with its
//!   rounding error, the atanh series to s^23, and the sum kept as a double-double (hi + lo) so
//!   that `log2`, `log10` and `pow` get a logarithm good to ~2^-60 relative;
//! - `pow`: exp(y·ln|x|) with the product and the exponential's reduction in double-double, and
//!   C99's special cases (negative bases with integer exponents, zeros, infinities, NaNs);
//! - `sin`, `cos`, `tan`: fdlibm's three-step reduction by π/2 (π/2 in 33-bit pieces: exact for
//!   |x| < 2^20·π/2 ≈ 1.6e6; larger arguments lose accuracy — no Payne–Hanek) and its
//!   `__kernel_sin`/`__kernel_cos` minimax polynomials; `tan` is their quotient.
//!
//! Accuracy, against glibc's libm over 20,000 inputs (magnitudes 1e-300 to 1e5 of both signs,
//! subnormals, zeros, infinities, NaN; `tests/runtime/vulkan.rs`, bounds in
//! `gpu_tests::spirv_checks::F64_MATH`), measured on lavapipe: at most 1 ulp for every function
//! but `tan` (2 ulps). Every product and sum here is decorated `NoContraction` (a driver that
//! fused them broke the error-free steps: 400 ulps in `exp2`), and GLSL's `Fma` is not relied on
//! to be fused (Dekker's product instead).

// fdlibm's coefficients, digit for digit as published (their last digits round to the same f64).
#![allow(clippy::excessive_precision)]

use crate::error::Result;
use crate::targets::support::mlir::{op_name, splice_text};
use crate::targets::support::spirv::failed;
use melior::ir::operation::{OperationLike, OperationRef, WalkOrder, WalkResult};
use melior::ir::{Module, ValueLike};
use melior::Context;

/// MLIR text of one function, with fresh SSA names.
#[derive(Default)]
struct Text {
    lines: Vec<String>,
    next: usize,
}

impl Text {
    fn op(&mut self, rhs: String) -> String {
        let name = format!("%v{}", self.next);
        self.next += 1;
        self.lines.push(format!("  {name} = {rhs}"));
        name
    }
    fn f(&mut self, value: f64) -> String {
        self.op(format!("arith.constant 0x{:016X} : f64", value.to_bits()))
    }
    fn i(&mut self, value: i64) -> String {
        self.op(format!("arith.constant {value} : i64"))
    }
    /// A SPIR-V float instruction decorated `NoContraction`: the error-free transformations
    /// (two-sum, Dekker's product, Cody–Waite) need each product and sum rounded on its own,
    /// and a Vulkan driver may otherwise fuse a multiply and an add.
    fn bin(&mut self, op: &str, a: &str, b: &str) -> String {
        self.op(format!("spirv.{op} {a}, {b} {{no_contraction}} : f64"))
    }
    fn add(&mut self, a: &str, b: &str) -> String {
        self.bin("FAdd", a, b)
    }
    fn sub(&mut self, a: &str, b: &str) -> String {
        self.bin("FSub", a, b)
    }
    fn mul(&mut self, a: &str, b: &str) -> String {
        self.bin("FMul", a, b)
    }
    fn div(&mut self, a: &str, b: &str) -> String {
        self.bin("FDiv", a, b)
    }
    fn fma(&mut self, a: &str, b: &str, c: &str) -> String {
        self.op(format!("spirv.GL.Fma {a}, {b}, {c} : f64"))
    }
    fn floor(&mut self, a: &str) -> String {
        self.op(format!("spirv.GL.Floor {a} : f64"))
    }
    fn abs(&mut self, a: &str) -> String {
        self.op(format!("spirv.GL.FAbs {a} : f64"))
    }
    fn neg(&mut self, a: &str) -> String {
        self.op(format!("arith.negf {a} : f64"))
    }
    fn cmp(&mut self, predicate: &str, a: &str, b: &str) -> String {
        self.op(format!("arith.cmpf {predicate}, {a}, {b} : f64"))
    }
    fn int(&mut self, op: &str, a: &str, b: &str) -> String {
        self.op(format!("arith.{op} {a}, {b} : i64"))
    }
    fn bool(&mut self, op: &str, a: &str, b: &str) -> String {
        self.op(format!("arith.{op} {a}, {b} : i1"))
    }
    fn select(&mut self, condition: &str, a: &str, b: &str) -> String {
        self.op(format!("arith.select {condition}, {a}, {b} : f64"))
    }
    fn select_int(&mut self, condition: &str, a: &str, b: &str) -> String {
        self.op(format!("arith.select {condition}, {a}, {b} : i64"))
    }
    fn bits(&mut self, a: &str) -> String {
        self.op(format!("arith.bitcast {a} : f64 to i64"))
    }
    fn bits_as_double(&mut self, a: &str) -> String {
        self.op(format!("arith.bitcast {a} : i64 to f64"))
    }
    fn as_int_bits(&mut self, a: &str) -> String {
        self.op(format!("arith.fptosi {a} : f64 to i64"))
    }
    fn as_double(&mut self, a: &str) -> String {
        self.op(format!("arith.sitofp {a} : i64 to f64"))
    }
    /// The halves of `a` (Veltkamp's split): a = hi + lo, each of at most 26 significant bits.
    fn split(&mut self, a: &str) -> (String, String) {
        let factor = self.f(134_217_729.0);
        let c = self.mul(&factor, a);
        let c_a = self.sub(&c, a);
        let hi = self.sub(&c, &c_a);
        let lo = self.sub(a, &hi);
        (hi, lo)
    }

    /// a·b as p + e exactly (Dekker's product). GLSL's `Fma` may be computed unfused, so the
    /// error of a product cannot come from it.
    fn two_prod(&mut self, a: &str, b: &str) -> (String, String) {
        let p = self.mul(a, b);
        let (a_hi, a_lo) = self.split(a);
        let (b_hi, b_lo) = self.split(b);
        let hh = self.mul(&a_hi, &b_hi);
        let e = self.sub(&hh, &p);
        let hl = self.mul(&a_hi, &b_lo);
        let e = self.add(&e, &hl);
        let lh = self.mul(&a_lo, &b_hi);
        let e = self.add(&e, &lh);
        let ll = self.mul(&a_lo, &b_lo);
        let e = self.add(&e, &ll);
        (p, e)
    }

    /// c[0] + x·(c[1] + x·(… + x·c[n])).
    fn horner(&mut self, x: &str, coefficients: &[f64]) -> String {
        let mut acc = self.f(coefficients[coefficients.len() - 1]);
        for &c in coefficients.iter().rev().skip(1) {
            let c = self.f(c);
            acc = self.fma(&acc, x, &c);
        }
        acc
    }
    /// x is NaN.
    fn is_nan(&mut self, x: &str) -> String {
        self.cmp("une", x, x)
    }

    /// 2^k for an integer `k` (as i64) of a normal result: the exponent field set directly.
    fn two_to(&mut self, k: &str) -> String {
        let bias = self.i(1023);
        let biased = self.int("addi", k, &bias);
        let shift = self.i(52);
        let field = self.int("shli", &biased, &shift);
        self.bits_as_double(&field)
    }

    /// e^(hi + lo), |lo| at most a few ulps of `hi`.
    fn exp_dd(&mut self, hi: &str, lo: &str) -> String {
        let log2e = self.f(std::f64::consts::LOG2_E);
        let half = self.f(0.5);
        let scaled = self.fma(hi, &log2e, &half);
        let k = self.floor(&scaled);
        // k only matters where the result is finite and not zero: |hi| < 746.
        let limit = self.f(800.0);
        let magnitude = self.abs(hi);
        let in_range = self.cmp("olt", &magnitude, &limit);
        let zero = self.f(0.0);
        let k = self.select(&in_range, &k, &zero);
        let ln2_hi = self.f(f64::from_bits(0x3FE6_2E42_FEE0_0000));
        let ln2_lo = self.f(f64::from_bits(0x3DEA_39EF_3579_3C76));
        let k_ln2_hi = self.mul(&k, &ln2_hi);
        let r_hi = self.sub(hi, &k_ln2_hi);
        let k_ln2_lo = self.mul(&k, &ln2_lo);
        let r_mid = self.sub(&r_hi, &k_ln2_lo);
        let r = self.add(&r_mid, lo);
        // e^r = Σ r^n / n!, n ≤ 13, on |r| ≤ 0.35.
        let mut factorial = 1.0f64;
        let mut coefficients = vec![1.0];
        for n in 1..=13 {
            factorial *= n as f64;
            coefficients.push(1.0 / factorial);
        }
        let p = self.horner(&r, &coefficients);
        let ki = self.as_int_bits(&k);
        let one = self.i(1);
        let k1 = self.int("shrsi", &ki, &one);
        let k2 = self.int("subi", &ki, &k1);
        let s1 = self.two_to(&k1);
        let s2 = self.two_to(&k2);
        let scaled = self.mul(&p, &s1);
        let value = self.mul(&scaled, &s2);
        let overflow_at = self.f(709.782_712_893_384);
        let underflow_at = self.f(-745.133_219_101_941_2);
        let infinity = self.f(f64::INFINITY);
        let over = self.cmp("ogt", hi, &overflow_at);
        let under = self.cmp("olt", hi, &underflow_at);
        let value = self.select(&over, &infinity, &value);
        let value = self.select(&under, &zero, &value);
        let nan = self.is_nan(hi);
        self.select(&nan, hi, &value)
    }

    /// ln x as a double-double (hi, lo), for finite x > 0 (subnormals too).
    fn log_dd(&mut self, x: &str) -> (String, String) {
        let smallest_normal = self.f(f64::MIN_POSITIVE);
        let subnormal = self.cmp("olt", x, &smallest_normal);
        let two_54 = self.f(2f64.powi(54));
        let lifted = self.mul(x, &two_54);
        let xs = self.select(&subnormal, &lifted, x);
        let minus_54 = self.i(-54);
        let zero_i = self.i(0);
        let adjust = self.select_int(&subnormal, &minus_54, &zero_i);
        let b = self.bits(&xs);
        let c52 = self.i(52);
        let shifted = self.int("shrui", &b, &c52);
        let mask = self.i(0x7ff);
        let field = self.int("andi", &shifted, &mask);
        let bias = self.i(1023);
        let e = self.int("subi", &field, &bias);
        let e = self.int("addi", &e, &adjust);
        let mantissa_mask = self.i(0x000F_FFFF_FFFF_FFFF);
        let one_bits = self.i(0x3FF0_0000_0000_0000);
        let mantissa = self.int("andi", &b, &mantissa_mask);
        let m_bits = self.int("ori", &mantissa, &one_bits);
        let m = self.bits_as_double(&m_bits);
        let sqrt2 = self.f(std::f64::consts::SQRT_2);
        let big = self.cmp("ogt", &m, &sqrt2);
        let half = self.f(0.5);
        let halved = self.mul(&m, &half);
        let m = self.select(&big, &halved, &m);
        let one_i = self.i(1);
        let e_up = self.int("addi", &e, &one_i);
        let e = self.select_int(&big, &e_up, &e);
        let ef = self.as_double(&e);
        let one = self.f(1.0);
        let two = self.f(2.0);
        // f exact (Sterbenz); t = 2 + f with its rounding error (two-sum, |2| ≥ |f|).
        let f = self.sub(&m, &one);
        let t = self.add(&two, &f);
        let two_minus_t = self.sub(&two, &t);
        let t_err = self.add(&two_minus_t, &f);
        let s = self.div(&f, &t);
        // s's error: f = s·t + rem exactly.
        let (st, st_err) = self.two_prod(&s, &t);
        let rem = self.sub(&f, &st);
        let rem = self.sub(&rem, &st_err);
        let s_terr = self.mul(&s, &t_err);
        let rem = self.sub(&rem, &s_terr);
        let s_lo = self.div(&rem, &t);
        let z = self.mul(&s, &s);
        // 2·atanh(s) − 2s = s·z·(2/3 + 2/5·z + … + 2/23·z^10).
        let coefficients: Vec<f64> = (0..=10).map(|n| 2.0 / (2 * n + 3) as f64).collect();
        let p = self.horner(&z, &coefficients);
        let sz = self.mul(&s, &z);
        let tail = self.mul(&sz, &p);
        let ln2_hi = self.f(f64::from_bits(0x3FE6_2E42_FEE0_0000));
        let ln2_lo = self.f(f64::from_bits(0x3DEA_39EF_3579_3C76));
        let a = self.mul(&ef, &ln2_hi);
        let b2 = self.add(&s, &s);
        // Two-sum of a and 2s.
        let h = self.add(&a, &b2);
        let bb = self.sub(&h, &a);
        let h_bb = self.sub(&h, &bb);
        let a_err = self.sub(&a, &h_bb);
        let b_err = self.sub(&b2, &bb);
        let err = self.add(&a_err, &b_err);
        let two_slo = self.add(&s_lo, &s_lo);
        let small = self.add(&two_slo, &tail);
        let e_lo = self.mul(&ef, &ln2_lo);
        let small = self.add(&e_lo, &small);
        let lo = self.add(&err, &small);
        let hi = self.add(&h, &lo);
        let hi_h = self.sub(&hi, &h);
        let lo = self.sub(&lo, &hi_h);
        (hi, lo)
    }

    /// ln x with its special cases: NaN below 0, −∞ at 0, +∞ at +∞.
    fn log_special(&mut self, x: &str, value: &str) -> String {
        let zero = self.f(0.0);
        let infinity = self.f(f64::INFINITY);
        let minus_infinity = self.f(f64::NEG_INFINITY);
        let nan = self.f(f64::NAN);
        let at_zero = self.cmp("oeq", x, &zero);
        let negative = self.cmp("olt", x, &zero);
        let at_infinity = self.cmp("oeq", x, &infinity);
        let value = self.select(&at_infinity, &infinity, value);
        let value = self.select(&at_zero, &minus_infinity, &value);
        let value = self.select(&negative, &nan, &value);
        let is_nan = self.is_nan(x);
        self.select(&is_nan, x, &value)
    }

    /// (hi, lo) · (c_hi + c_lo), rounded.
    fn times_dd(&mut self, hi: &str, lo: &str, c: f64, c_lo: f64) -> String {
        let c_hi = self.f(c);
        let c_lo = self.f(c_lo);
        let (p, p_err) = self.two_prod(hi, &c_hi);
        let cross = self.mul(hi, &c_lo);
        let low = self.mul(lo, &c_hi);
        let q = self.add(&cross, &low);
        let q = self.add(&p_err, &q);
        self.add(&p, &q)
    }

    /// x reduced by π/2: (y0, y1, quadrant as i64 in 0..4).
    fn reduce_pio2(&mut self, x: &str) -> (String, String, String) {
        let inv_pio2 = self.f(f64::from_bits(0x3FE4_5F30_6DC9_C883));
        let half = self.f(0.5);
        let scaled = self.fma(x, &inv_pio2, &half);
        let n = self.floor(&scaled);
        // fdlibm's pio2_1 (33 bits), then (pio2_2, pio2_2t) and (pio2_3, pio2_3t): its second
        // and third iterations, always taken.
        let pio2_1 = self.f(f64::from_bits(0x3FF9_21FB_5440_0000));
        let pieces = [
            (0x3DD0_B461_1A60_0000u64, 0x3BA3_198A_2E03_7073u64),
            (0x3BA3_198A_2E00_0000, 0x397B_839A_2520_49C1),
        ];
        let n_pio2_1 = self.mul(&n, &pio2_1);
        let mut r = self.sub(x, &n_pio2_1);
        let mut w = String::new();
        for (piece, tail) in &pieces {
            let t = r.clone();
            let piece = self.f(f64::from_bits(*piece));
            let tail = self.f(f64::from_bits(*tail));
            let w1 = self.mul(&n, &piece);
            r = self.sub(&t, &w1);
            let t_r = self.sub(&t, &r);
            let lost = self.sub(&t_r, &w1);
            let n_tail = self.mul(&n, &tail);
            w = self.sub(&n_tail, &lost);
        }
        let y0 = self.sub(&r, &w);
        let r_y0 = self.sub(&r, &y0);
        let y1 = self.sub(&r_y0, &w);
        // n mod 4, exactly, before converting (n may be huge).
        let quarter = self.f(0.25);
        let four = self.f(4.0);
        let n4 = self.mul(&n, &quarter);
        let whole = self.floor(&n4);
        let whole4 = self.mul(&whole, &four);
        let q = self.sub(&n, &whole4);
        let finite = self.cmp("olt", &q, &four);
        let zero = self.f(0.0);
        let q = self.select(&finite, &q, &zero);
        let q = self.as_int_bits(&q);
        (y0, y1, q)
    }

    /// fdlibm's `__kernel_sin(x, y)` on |x + y| ≤ π/4.
    fn kernel_sin(&mut self, x: &str, y: &str) -> String {
        let s = [
            -1.666_666_666_666_663_243_48e-1,
            8.333_333_333_322_489_461_24e-3,
            -1.984_126_982_985_794_931_34e-4,
            2.755_731_370_707_006_767_89e-6,
            -2.505_076_025_340_686_341_95e-8,
            1.589_690_995_211_550_102_21e-10,
        ];
        let z = self.mul(x, x);
        let v = self.mul(&z, x);
        let r = self.horner(&z, &s[1..]);
        let half = self.f(0.5);
        let half_y = self.mul(&half, y);
        let v_r = self.mul(&v, &r);
        let inner = self.sub(&half_y, &v_r);
        let z_inner = self.mul(&z, &inner);
        let minus_y = self.sub(&z_inner, y);
        let s1 = self.f(s[0]);
        let v_s1 = self.mul(&v, &s1);
        let all = self.sub(&minus_y, &v_s1);
        self.sub(x, &all)
    }

    /// fdlibm's `__kernel_cos(x, y)` on |x + y| ≤ π/4.
    fn kernel_cos(&mut self, x: &str, y: &str) -> String {
        let c = [
            4.166_666_666_666_660_190_37e-2,
            -1.388_888_888_887_410_957_49e-3,
            2.480_158_728_947_672_941_78e-5,
            -2.755_731_435_139_066_330_35e-7,
            2.087_572_321_298_174_827_90e-9,
            -1.135_964_755_778_819_482_65e-11,
        ];
        let z = self.mul(x, x);
        let p = self.horner(&z, &c);
        let r = self.mul(&z, &p);
        let half = self.f(0.5);
        let one = self.f(1.0);
        let hz = self.mul(&half, &z);
        let w = self.sub(&one, &hz);
        let one_w = self.sub(&one, &w);
        let lost = self.sub(&one_w, &hz);
        let z_r = self.mul(&z, &r);
        let x_y = self.mul(x, y);
        let corr = self.sub(&z_r, &x_y);
        let total = self.add(&lost, &corr);
        self.add(&w, &total)
    }

    /// Quadrant `q` of (`a`, `b`, −`a`, −`b`).
    fn by_quadrant(&mut self, q: &str, values: [&str; 4]) -> String {
        let mut value = values[3].to_string();
        for (k, v) in values.iter().enumerate().take(3).rev() {
            let k = self.i(k as i64);
            let here = self.op(format!("arith.cmpi eq, {q}, {k} : i64"));
            value = self.select(&here, v, &value);
        }
        value
    }

    /// pow(x, y) with C99's special cases.
    fn pow(&mut self, x: &str, y: &str) -> String {
        let ax = self.abs(x);
        let (hi, lo) = self.log_dd(&ax);
        let (p, p_err) = self.two_prod(y, &hi);
        let y_lo = self.mul(y, &lo);
        let p_lo = self.add(&p_err, &y_lo);
        // An infinite or NaN product has no error term.
        let infinity = self.f(f64::INFINITY);
        let zero = self.f(0.0);
        let one = self.f(1.0);
        let p_mag = self.abs(&p);
        let p_finite = self.cmp("olt", &p_mag, &infinity);
        let p_lo = self.select(&p_finite, &p_lo, &zero);
        let value = self.exp_dd(&p, &p_lo);
        // |x| = 0 or ∞, and y = ±∞.
        let y_negative = self.cmp("olt", y, &zero);
        let y_mag = self.abs(y);
        let y_infinite = self.cmp("oeq", &y_mag, &infinity);
        let x_zero = self.cmp("oeq", &ax, &zero);
        let x_infinite = self.cmp("oeq", &ax, &infinity);
        let at_zero = self.select(&y_negative, &infinity, &zero);
        let value = self.select(&x_zero, &at_zero, &value);
        let at_infinity = self.select(&y_negative, &zero, &infinity);
        let value = self.select(&x_infinite, &at_infinity, &value);
        let above_one = self.cmp("ogt", &ax, &one);
        let grows = self.bool("xori", &above_one, &y_negative);
        let x_one = self.cmp("oeq", &ax, &one);
        let limit = self.select(&grows, &infinity, &zero);
        let limit = self.select(&x_one, &one, &limit);
        let value = self.select(&y_infinite, &limit, &value);
        // Negative bases: the sign of odd integer powers, NaN for finite non-integer ones.
        let y_floor = self.floor(y);
        let y_integer = self.cmp("oeq", &y_floor, y);
        let half = self.f(0.5);
        let y_half = self.mul(y, &half);
        let y_half_floor = self.floor(&y_half);
        let half_integer = self.cmp("oeq", &y_half_floor, &y_half);
        let two_53 = self.f(2f64.powi(53));
        let small = self.cmp("olt", &y_mag, &two_53);
        let odd = self.op(format!("arith.xori {y_integer}, {half_integer} : i1"));
        let odd = self.bool("andi", &odd, &small);
        let x_bits = self.bits(x);
        let zero_i = self.i(0);
        let x_sign = self.op(format!("arith.cmpi slt, {x_bits}, {zero_i} : i64"));
        let flip = self.bool("andi", &x_sign, &odd);
        let negated = self.neg(&value);
        let value = self.select(&flip, &negated, &value);
        let x_negative = self.cmp("olt", x, &zero);
        let x_finite = self.cmp("olt", &ax, &infinity);
        let true_ = self.op("arith.constant true".to_string());
        let not_integer = self.bool("xori", &y_integer, &true_);
        let bad = self.bool("andi", &x_negative, &x_finite);
        let bad = self.bool("andi", &bad, &not_integer);
        let nan = self.f(f64::NAN);
        let value = self.select(&bad, &nan, &value);
        // NaNs, then pow(x, 0) = pow(1, y) = 1 whatever the other is.
        let x_nan = self.is_nan(x);
        let y_nan = self.is_nan(y);
        let any_nan = self.bool("ori", &x_nan, &y_nan);
        let sum = self.add(x, y);
        let value = self.select(&any_nan, &sum, &value);
        let y_zero = self.cmp("oeq", y, &zero);
        let x_is_one = self.cmp("oeq", x, &one);
        let trivial = self.bool("ori", &y_zero, &x_is_one);
        self.select(&trivial, &one, &value)
    }
}

/// The math ops GLSL.std.450 has for f64, and theirs.
const GLSL_F64: [(&str, &str); 8] = [
    ("math.sqrt", "spirv.GL.Sqrt"),
    ("math.rsqrt", "spirv.GL.InverseSqrt"),
    ("math.absf", "spirv.GL.FAbs"),
    ("math.floor", "spirv.GL.Floor"),
    ("math.ceil", "spirv.GL.Ceil"),
    ("math.trunc", "spirv.GL.Trunc"),
    ("math.roundeven", "spirv.GL.RoundEven"),
    ("math.fma", "spirv.GL.Fma"),
];

/// The function replacing `name` on f64, as MLIR text (`func.func @f(%x: f64[, %y: f64[, %z:
/// f64]])`).
fn implementation(name: &str) -> Option<String> {
    let mut t = Text::default();
    let x = "%x";
    let operands = match name {
        "math.powf" => 2,
        "math.fma" => 3,
        _ => 1,
    };
    let result = match name {
        "math.exp" => {
            let zero = t.f(0.0);
            t.exp_dd(x, &zero)
        }
        "math.exp2" => {
            let (ln2, ln2_lo) = (
                std::f64::consts::LN_2,
                f64::from_bits(0x3C7A_BC9E_3B39_803F),
            );
            let c = t.f(ln2);
            let (p, p_err) = t.two_prod(x, &c);
            let c_lo = t.f(ln2_lo);
            let x_lo = t.mul(x, &c_lo);
            let lo = t.add(&p_err, &x_lo);
            let infinity = t.f(f64::INFINITY);
            let zero = t.f(0.0);
            let magnitude = t.abs(&p);
            let finite = t.cmp("olt", &magnitude, &infinity);
            let lo = t.select(&finite, &lo, &zero);
            t.exp_dd(&p, &lo)
        }
        "math.log" | "math.log2" | "math.log10" => {
            let (hi, lo) = t.log_dd(x);
            let value = match name {
                "math.log" => hi,
                "math.log2" => t.times_dd(
                    &hi,
                    &lo,
                    std::f64::consts::LOG2_E,
                    f64::from_bits(0x3C77_77D0_FFDA_0D24),
                ),
                _ => t.times_dd(
                    &hi,
                    &lo,
                    std::f64::consts::LOG10_E,
                    f64::from_bits(0x3C69_5355_BAAA_FAD3),
                ),
            };
            t.log_special(x, &value)
        }
        "math.sin" | "math.cos" | "math.tan" => {
            let (y0, y1, q) = t.reduce_pio2(x);
            let s = t.kernel_sin(&y0, &y1);
            let c = t.kernel_cos(&y0, &y1);
            let minus_s = t.neg(&s);
            let minus_c = t.neg(&c);
            match name {
                "math.sin" => t.by_quadrant(&q, [&s, &c, &minus_s, &minus_c]),
                "math.cos" => t.by_quadrant(&q, [&c, &minus_s, &minus_c, &s]),
                _ => {
                    let numerator = t.by_quadrant(&q, [&s, &c, &minus_s, &minus_c]);
                    let denominator = t.by_quadrant(&q, [&c, &minus_s, &minus_c, &s]);
                    t.div(&numerator, &denominator)
                }
            }
        }
        "math.powf" => t.pow(x, "%y"),
        _ => {
            let (_, glsl) = GLSL_F64.iter().find(|(math, _)| *math == name)?;
            let arguments = ["%x", "%y", "%z"][..operands].join(", ");
            t.op(format!("{glsl} {arguments} : f64"))
        }
    };
    let parameters = ["%x: f64", "%y: f64", "%z: f64"][..operands].join(", ");
    Some(format!(
        "func.func @f({parameters}) -> f64 {{\n{}\n  return {result} : f64\n}}\n",
        t.lines.join("\n")
    ))
}

/// Replaces every scalar f64 math function of `module` (the Vulkan copy) that GLSL lacks by its
/// implementation; leaves the others for the conversion (which lowers or refuses them).
pub(super) fn implement_f64_math(context: &Context, module: &Module) -> Result<()> {
    let mut found = Vec::new();
    module.as_operation().walk(WalkOrder::PreOrder, |op| {
        let name = op_name(&op);
        let on_f64 = op.result(0).is_ok_and(|r| r.r#type().to_string() == "f64");
        if on_f64 && implementation(&name).is_some() {
            found.push((name, op.to_raw()));
        }
        WalkResult::Advance
    });
    for (name, raw) in found {
        let text = implementation(&name).ok_or_else(|| failed("implementing f64 math"))?;
        // SAFETY: a live op of `module`, found above and replaced once.
        let op = unsafe { OperationRef::from_raw(raw) };
        let arguments: Vec<_> = (0..op.operand_count())
            .filter_map(|i| op.operand(i).ok())
            .collect();
        let result = op.result(0).map_err(|_| failed("reading a math op"))?;
        let value = splice_text(context, &text, &op, &arguments)
            .and_then(|values| values.first().copied())
            .ok_or_else(|| failed(&format!("splicing the f64 implementation of `{name}`")))?;
        // SAFETY: the implementation now sits before the op, in its block, and returns an f64
        // like the op: every use stays dominated and well typed; the op has no uses left when
        // it is destroyed, and is not visited again.
        unsafe {
            mlir_sys::mlirValueReplaceAllUsesOfWith(result.to_raw(), value);
            mlir_sys::mlirOperationDestroy(raw);
        }
    }
    Ok(())
}
