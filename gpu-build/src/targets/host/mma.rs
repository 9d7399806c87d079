//! Subgroup matrix multiply-accumulate on the host: the NVVM lowering's WMMA intrinsics
//! (`llvm.nvvm.wmma.*`, which `gpu.subgroup_mma_load_matrix` / `_compute` / `_store_matrix`
//! become) as small matrix operations over subgroups of 32 threads, for floating-point fragments
//! (f16 and f32 with m16n16k16, m32n8k16, m8n32k16; f64 with m8n8k4).
//!
//! A fragment is opaque to the kernel: elementwise ops and constants treat its elements alike,
//! and only the WMMA operations know which matrix element each lane holds. So the host picks
//! its own distribution: element `e` of lane `l` is element `(e * 32 + l) mod (rows * cols)` of
//! the fragment's matrix, in row-major order (an f16 A or B fragment holds every element twice,
//! as on NVIDIA). Loads and stores are then lane-local (the layout and stride only say where
//! element `(r, c)` lies in memory). The multiply is an exchange: every lane stores its A and B
//! elements into its subgroup's scratch matrices, the subgroup waits, each lane computes its own
//! D elements `C[i][j] + sum_k A[i][k] * B[k][j]` (in f32, or f64 for f64 fragments, rounded to
//! D's type once), and the subgroup waits again before the scratch is reused. The waits are the
//! subgroup barrier of `subgroup.rs`, so barrier fission treats a multiply like a shuffle.

use super::ir::builder_error;
use super::subgroup::{
    intrinsics, lane_and_subgroup, new_replacement, parameter, replace_calls, replacement_name,
    thread_local_array, wait, MAX_THREADS, SUBGROUP_SIZE,
};
use crate::error::{Error, ErrorKind, Result};
use crate::targets::interface::Job;
use inkwell::builder::Builder;
use inkwell::module::Module;
use inkwell::types::{BasicType, BasicTypeEnum, FloatType};
use inkwell::values::{
    AggregateValue, BasicValue, BasicValueEnum, FloatValue, FunctionValue, GlobalValue, IntValue,
};

/// Subgroups per block at most.
const MAX_SUBGROUPS: u32 = MAX_THREADS / SUBGROUP_SIZE as u32;

/// Which matrix a load reads: `a` (M x K), `b` (K x N), `c` (M x N).
#[derive(Clone, Copy, PartialEq)]
enum Fragment {
    A,
    B,
    C,
}

/// A WMMA intrinsic, from its name (`llvm.nvvm.wmma.m16n16k16.load.a.col.stride.f16.p0`).
#[derive(Clone, Copy)]
enum Wmma {
    Load {
        shape: Shape,
        fragment: Fragment,
        column_major: bool,
    },
    Store {
        shape: Shape,
        column_major: bool,
    },
    Multiply {
        shape: Shape,
        /// Whether C's (and so D's) f16 elements come in pairs (`<2 x half>` members).
        c_is_f16: bool,
    },
}

#[derive(Clone, Copy)]
struct Shape {
    m: u32,
    n: u32,
    k: u32,
}

impl Shape {
    fn parse(text: &str) -> Option<Shape> {
        let rest = text.strip_prefix('m')?;
        let (m, rest) = rest.split_once('n')?;
        let (n, k) = rest.split_once('k')?;
        Some(Shape {
            m: m.parse().ok()?,
            n: n.parse().ok()?,
            k: k.parse().ok()?,
        })
    }

    /// Rows and columns of a fragment's matrix.
    fn of(self, fragment: Fragment) -> (u32, u32) {
        match fragment {
            Fragment::A => (self.m, self.k),
            Fragment::B => (self.k, self.n),
            Fragment::C => (self.m, self.n),
        }
    }
}

fn wmma(name: &str) -> Option<Wmma> {
    let mut parts = name.strip_prefix("llvm.nvvm.wmma.")?.split('.');
    let shape = Shape::parse(parts.next()?)?;
    let rest: Vec<&str> = parts.collect();
    let types: Vec<&str> = rest
        .iter()
        .copied()
        .filter(|p| matches!(*p, "f16" | "f32" | "f64"))
        .collect();
    // Only floating-point fragments: integer, bf16 and tf32 ones are packed into i32 members.
    if types.is_empty()
        || rest.iter().any(|p| {
            matches!(
                *p,
                "s8" | "u8" | "s4" | "u4" | "b1" | "bf16" | "tf32" | "s32"
            )
        })
    {
        return None;
    }
    match *rest.first()? {
        "load" => Some(Wmma::Load {
            shape,
            fragment: match *rest.get(1)? {
                "a" => Fragment::A,
                "b" => Fragment::B,
                "c" => Fragment::C,
                _ => return None,
            },
            column_major: *rest.get(2)? == "col",
        }),
        "store" => Some(Wmma::Store {
            shape,
            column_major: *rest.get(2)? == "col",
        }),
        "mma" => Some(Wmma::Multiply {
            shape,
            c_is_f16: *types.last()? == "f16",
        }),
        _ => None,
    }
}

/// Whether the module uses a WMMA operation this file emulates.
pub(crate) fn uses_mma(module: &Module) -> bool {
    !intrinsics(module, wmma).is_empty()
}

/// Replaces every WMMA load, store and multiply of `module` (see the module docs); `barrier`
/// is the subgroup barrier function.
pub(crate) fn emulate<'ll>(
    job: &Job<'_, 'll>,
    module: &Module<'ll>,
    ids: GlobalValue<'ll>,
    barrier: FunctionValue<'ll>,
) -> Result<()> {
    for (intrinsic, op) in intrinsics(module, wmma) {
        let function = match op {
            Wmma::Load {
                shape,
                fragment,
                column_major,
            } => load_function(job, module, intrinsic, shape, fragment, column_major)?,
            Wmma::Store {
                shape,
                column_major,
            } => store_function(job, module, intrinsic, shape, column_major)?,
            Wmma::Multiply { shape, c_is_f16 } => {
                multiply_function(job, module, intrinsic, shape, c_is_f16, barrier)?
            }
        };
        replace_calls(job, module, ids, intrinsic, |builder, arguments, _| {
            let call = builder
                .build_call(function, &arguments, "")
                .map_err(builder_error)?;
            Ok(call.try_as_basic_value().basic())
        })?;
    }
    Ok(())
}

/// The scalar elements of a fragment value (struct members, vector lanes), in order.
fn elements<'ll>(
    builder: &Builder<'ll>,
    value: BasicValueEnum<'ll>,
) -> Result<Vec<FloatValue<'ll>>> {
    Ok(match value {
        BasicValueEnum::FloatValue(v) => vec![v],
        BasicValueEnum::VectorValue(v) => {
            let i32_type = v.get_type().get_context().i32_type();
            (0..v.get_type().get_size())
                .map(|i| {
                    builder
                        .build_extract_element(v, i32_type.const_int(i as u64, false), "e")
                        .map(|e| e.into_float_value())
                        .map_err(builder_error)
                })
                .collect::<Result<_>>()?
        }
        BasicValueEnum::StructValue(s) => {
            let mut all = Vec::new();
            for i in 0..s.get_type().count_fields() {
                let member = builder
                    .build_extract_value(s, i, "m")
                    .map_err(builder_error)?;
                all.extend(elements(builder, member)?);
            }
            all
        }
        _ => return Err(unexpected("fragment")),
    })
}

/// The scalar element type and count of a fragment type.
fn element_layout(ty: BasicTypeEnum) -> Result<(FloatType, u32)> {
    Ok(match ty {
        BasicTypeEnum::FloatType(f) => (f, 1),
        BasicTypeEnum::VectorType(v) => (v.get_element_type().into_float_type(), v.get_size()),
        BasicTypeEnum::StructType(s) => {
            let mut count = 0;
            let mut element = None;
            for field in s.get_field_types() {
                let (e, n) = element_layout(field)?;
                element = Some(e);
                count += n;
            }
            (element.ok_or_else(|| unexpected("empty fragment"))?, count)
        }
        _ => return Err(unexpected("fragment type")),
    })
}

/// A value of fragment type `ty` from its scalar elements.
fn assemble<'ll>(
    builder: &Builder<'ll>,
    ty: BasicTypeEnum<'ll>,
    elements: &mut impl Iterator<Item = FloatValue<'ll>>,
) -> Result<BasicValueEnum<'ll>> {
    let mut next = || {
        elements
            .next()
            .ok_or_else(|| unexpected("too few fragment elements"))
    };
    Ok(match ty {
        BasicTypeEnum::FloatType(_) => next()?.as_basic_value_enum(),
        BasicTypeEnum::VectorType(v) => {
            let i32_type = v.get_context().i32_type();
            let mut vector = v.get_undef();
            for i in 0..v.get_size() {
                vector = builder
                    .build_insert_element(vector, next()?, i32_type.const_int(i as u64, false), "v")
                    .map_err(builder_error)?;
            }
            vector.as_basic_value_enum()
        }
        BasicTypeEnum::StructType(s) => {
            let mut value = s.get_undef().as_aggregate_value_enum();
            for (i, field) in s.get_field_types().into_iter().enumerate() {
                let member = assemble(builder, field, elements)?;
                value = builder
                    .build_insert_value(value, member, i as u32, "s")
                    .map_err(builder_error)?;
            }
            value.as_basic_value_enum()
        }
        _ => return Err(unexpected("fragment type")),
    })
}

fn unexpected(what: &str) -> Error {
    Error::new(
        ErrorKind::Codegen,
        format!("emulating WMMA on the host: unexpected {what}"),
    )
}

/// The matrix element lane `lane` holds as element `e` of a fragment of `rows` x `cols`:
/// its row and column.
fn position<'ll>(
    builder: &Builder<'ll>,
    lane: IntValue<'ll>,
    e: u32,
    rows: u32,
    cols: u32,
) -> Result<(IntValue<'ll>, IntValue<'ll>)> {
    let i32_type = lane.get_type();
    let constant = |n: u32| i32_type.const_int(n as u64, false);
    let index = builder
        .build_int_add(lane, constant(e * SUBGROUP_SIZE as u32), "index")
        .map_err(builder_error)?;
    let index = builder
        .build_int_unsigned_rem(index, constant(rows * cols), "index")
        .map_err(builder_error)?;
    let row = builder
        .build_int_unsigned_div(index, constant(cols), "row")
        .map_err(builder_error)?;
    let col = builder
        .build_int_unsigned_rem(index, constant(cols), "col")
        .map_err(builder_error)?;
    Ok((row, col))
}

/// `&base[row * stride + col]` (row-major) or `&base[col * stride + row]` (column-major).
fn element_address<'ll>(
    builder: &Builder<'ll>,
    element: FloatType<'ll>,
    base: inkwell::values::PointerValue<'ll>,
    (row, col): (IntValue<'ll>, IntValue<'ll>),
    stride: IntValue<'ll>,
    column_major: bool,
) -> Result<inkwell::values::PointerValue<'ll>> {
    let (major, minor) = if column_major { (col, row) } else { (row, col) };
    let offset = builder
        .build_int_mul(major, stride, "offset")
        .map_err(builder_error)?;
    let offset = builder
        .build_int_add(offset, minor, "offset")
        .map_err(builder_error)?;
    let wide = builder
        .build_int_s_extend(offset, element.get_context().i64_type(), "offset")
        .map_err(builder_error)?;
    // SAFETY: the kernel's WMMA operation addresses these elements (its pointer and stride).
    unsafe { builder.build_gep(element, base, &[wide], "element") }.map_err(builder_error)
}

/// Every lane's elements per fragment must cover the matrix a whole number of times.
fn check_cover(count: u32, rows: u32, cols: u32) -> Result<()> {
    if (count * SUBGROUP_SIZE as u32).is_multiple_of(rows * cols) {
        Ok(())
    } else {
        Err(unexpected("fragment size"))
    }
}

/// `(pointer, stride, linear thread id)` → the lane's fragment, read where the layout puts it.
fn load_function<'ll>(
    job: &Job<'_, 'll>,
    module: &Module<'ll>,
    intrinsic: FunctionValue<'ll>,
    shape: Shape,
    fragment: Fragment,
    column_major: bool,
) -> Result<FunctionValue<'ll>> {
    let ty = intrinsic.get_type();
    let result = ty
        .get_return_type()
        .ok_or_else(|| unexpected("load type"))?;
    let mut parameters = ty.get_param_types();
    parameters.push(job.llvm.i32_type().into());
    let (function, builder) =
        new_replacement(job, module, intrinsic, result.fn_type(&parameters, false));
    let (rows, cols) = shape.of(fragment);
    let (element, count) = element_layout(result)?;
    check_cover(count, rows, cols)?;
    let base = parameter(function, 0)?.into_pointer_value();
    let stride = stride_or_default(function, parameters.len(), rows, cols, column_major)?;
    let linear = parameter(function, parameters.len() as u32 - 1)?.into_int_value();
    let (lane, _) = lane_and_subgroup(&builder, linear)?;
    let mut values = Vec::new();
    for e in 0..count {
        let at = position(&builder, lane, e, rows, cols)?;
        let address = element_address(&builder, element, base, at, stride, column_major)?;
        values.push(
            builder
                .build_load(element, address, "element")
                .map_err(builder_error)?
                .into_float_value(),
        );
    }
    let value = assemble(&builder, result, &mut values.into_iter())?;
    builder.build_return(Some(&value)).map_err(builder_error)?;
    Ok(function)
}

/// The stride parameter (`.stride` intrinsics, which MLIR emits); without one, the matrix is
/// packed.
fn stride_or_default<'ll>(
    function: FunctionValue<'ll>,
    parameters: usize,
    rows: u32,
    cols: u32,
    column_major: bool,
) -> Result<IntValue<'ll>> {
    let before_linear = parameter(function, parameters as u32 - 2)?;
    Ok(match before_linear {
        BasicValueEnum::IntValue(stride) => stride,
        _ => {
            let packed = if column_major { rows } else { cols };
            function
                .get_type()
                .get_context()
                .i32_type()
                .const_int(packed as u64, false)
        }
    })
}

/// `(pointer, D's members..., stride, linear thread id)`: each lane writes its D elements.
fn store_function<'ll>(
    job: &Job<'_, 'll>,
    module: &Module<'ll>,
    intrinsic: FunctionValue<'ll>,
    shape: Shape,
    column_major: bool,
) -> Result<FunctionValue<'ll>> {
    let ty = intrinsic.get_type();
    let mut parameters = ty.get_param_types();
    parameters.push(job.llvm.i32_type().into());
    let void = job.llvm.void_type();
    let (function, builder) =
        new_replacement(job, module, intrinsic, void.fn_type(&parameters, false));
    let (rows, cols) = shape.of(Fragment::C);
    let base = parameter(function, 0)?.into_pointer_value();
    let stride = stride_or_default(function, parameters.len(), rows, cols, column_major)?;
    let linear = parameter(function, parameters.len() as u32 - 1)?.into_int_value();
    let (lane, _) = lane_and_subgroup(&builder, linear)?;
    let mut values = Vec::new();
    for n in 1..parameters.len() as u32 - 1 {
        let member = parameter(function, n)?;
        if member.is_int_value() {
            break; // the stride
        }
        values.extend(elements(&builder, member)?);
    }
    let element = values
        .first()
        .ok_or_else(|| unexpected("store"))?
        .get_type();
    check_cover(values.len() as u32, rows, cols)?;
    // A D fragment holds each element once; a replicated one would store the same twice.
    let once = (rows * cols / SUBGROUP_SIZE as u32) as usize;
    for (e, value) in values.into_iter().take(once).enumerate() {
        let at = position(&builder, lane, e as u32, rows, cols)?;
        let address = element_address(&builder, element, base, at, stride, column_major)?;
        builder.build_store(address, value).map_err(builder_error)?;
    }
    builder.build_return(None).map_err(builder_error)?;
    Ok(function)
}

/// `(A's members..., B's members..., C's members..., linear thread id)` → D: the exchange and
/// multiply of the module docs, with scratch matrices for `MAX_SUBGROUPS` subgroups.
fn multiply_function<'ll>(
    job: &Job<'_, 'll>,
    module: &Module<'ll>,
    intrinsic: FunctionValue<'ll>,
    shape: Shape,
    c_is_f16: bool,
    barrier: FunctionValue<'ll>,
) -> Result<FunctionValue<'ll>> {
    let llvm = job.llvm;
    let i32_type = llvm.i32_type();
    let ty = intrinsic.get_type();
    let result = ty.get_return_type().ok_or_else(|| unexpected("mma type"))?;
    let mut parameters = ty.get_param_types();
    let c_members =
        (shape.m * shape.n / SUBGROUP_SIZE as u32 / if c_is_f16 { 2 } else { 1 }) as usize;
    let ab_members = parameters
        .len()
        .checked_sub(c_members)
        .filter(|n| n % 2 == 0)
        .ok_or_else(|| unexpected("mma operands"))?
        / 2;
    parameters.push(i32_type.into());
    let (function, builder) =
        new_replacement(job, module, intrinsic, result.fn_type(&parameters, false));
    let linear = parameter(function, parameters.len() as u32 - 1)?.into_int_value();
    let (lane, first) = lane_and_subgroup(&builder, linear)?;
    let operand = |range: std::ops::Range<usize>| -> Result<Vec<FloatValue<'ll>>> {
        let mut all = Vec::new();
        for n in range {
            all.extend(elements(&builder, parameter(function, n as u32)?)?);
        }
        Ok(all)
    };
    let a = operand(0..ab_members)?;
    let b = operand(ab_members..2 * ab_members)?;
    let c = operand(2 * ab_members..2 * ab_members + c_members)?;
    let input = a.first().ok_or_else(|| unexpected("mma A"))?.get_type();
    let (d_type, _) = element_layout(result)?;
    let accumulator = if d_type == llvm.f64_type() || input == llvm.f64_type() {
        llvm.f64_type()
    } else {
        llvm.f32_type()
    };
    let (a_size, b_size) = (shape.m * shape.k, shape.k * shape.n);
    check_cover(a.len() as u32, shape.m, shape.k)?;
    check_cover(b.len() as u32, shape.k, shape.n)?;
    check_cover(c.len() as u32, shape.m, shape.n)?;

    // Scratch: per subgroup, A (row-major M x K) then B (row-major K x N).
    let scratch = thread_local_array(
        module,
        input.into(),
        MAX_SUBGROUPS * (a_size + b_size),
        &format!("{}_scratch", replacement_name(intrinsic)),
    );
    let scratch_type = scratch.get_value_type().into_array_type();
    let constant = |n: u32| i32_type.const_int(n as u64, false);
    let subgroup = builder
        .build_int_unsigned_div(first, constant(SUBGROUP_SIZE as u32), "subgroup")
        .map_err(builder_error)?;
    let subgroup_base = builder
        .build_int_mul(subgroup, constant(a_size + b_size), "base")
        .map_err(builder_error)?;
    let slot = |offset: IntValue<'ll>| -> Result<inkwell::values::PointerValue<'ll>> {
        let index = builder
            .build_int_add(subgroup_base, offset, "slot")
            .map_err(builder_error)?;
        let wide = builder
            .build_int_z_extend(index, llvm.i64_type(), "slot")
            .map_err(builder_error)?;
        // SAFETY: subgroup < MAX_SUBGROUPS and offset < a_size + b_size.
        unsafe {
            builder.build_in_bounds_gep(
                scratch_type,
                scratch.as_pointer_value(),
                &[llvm.i64_type().const_zero(), wide],
                "slot",
            )
        }
        .map_err(builder_error)
    };
    let flat = |(row, col): (IntValue<'ll>, IntValue<'ll>), cols: u32, at: u32| {
        let offset = builder
            .build_int_mul(row, constant(cols), "flat")
            .map_err(builder_error)?;
        let offset = builder
            .build_int_add(offset, col, "flat")
            .map_err(builder_error)?;
        builder
            .build_int_add(offset, constant(at), "flat")
            .map_err(builder_error)
    };
    for (values, (rows, cols), at) in [
        (&a, (shape.m, shape.k), 0),
        (&b, (shape.k, shape.n), a_size),
    ] {
        for (e, value) in values.iter().enumerate() {
            let position = position(&builder, lane, e as u32, rows, cols)?;
            builder
                .build_store(slot(flat(position, cols, at)?)?, *value)
                .map_err(builder_error)?;
        }
    }
    wait(&builder, barrier)?;
    let widen = |value: FloatValue<'ll>| -> Result<FloatValue<'ll>> {
        builder
            .build_float_cast(value, accumulator, "wide")
            .map_err(builder_error)
    };
    let mut d = Vec::new();
    for (e, c_value) in c.iter().enumerate() {
        let (row, col) = position(&builder, lane, e as u32, shape.m, shape.n)?;
        let mut sum = widen(*c_value)?;
        for k in 0..shape.k {
            let a_at = flat((row, constant(k)), shape.k, 0)?;
            let b_at = flat((constant(k), col), shape.n, a_size)?;
            let a_value = builder
                .build_load(input, slot(a_at)?, "a")
                .map_err(builder_error)?
                .into_float_value();
            let b_value = builder
                .build_load(input, slot(b_at)?, "b")
                .map_err(builder_error)?
                .into_float_value();
            let product = builder
                .build_float_mul(widen(a_value)?, widen(b_value)?, "product")
                .map_err(builder_error)?;
            sum = builder
                .build_float_add(sum, product, "sum")
                .map_err(builder_error)?;
        }
        d.push(
            builder
                .build_float_cast(sum, d_type, "d")
                .map_err(builder_error)?,
        );
    }
    wait(&builder, barrier)?;
    let value = assemble(&builder, result, &mut d.into_iter())?;
    builder.build_return(Some(&value)).map_err(builder_error)?;
    Ok(function)
}
