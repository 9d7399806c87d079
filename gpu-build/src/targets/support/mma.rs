//! Subgroup matrix multiply-accumulate (`gpu.subgroup_mma_*`, upstream's WMMA programs) for both
//! SPIR-V targets, where MLIR 22 lowers it only to Vulkan's cooperative matrices, which few devices
//! have (lavapipe has none), and not at all for OpenCL. A fragment is opaque to the kernel, and
//! every lane of a subgroup passes the same operands to these ops, so each thread holds a whole
//! fragment in private memory (`memref<MxNxT>` in the Function storage class): a load reads the
//! whole tile, a multiply computes the whole `C + A·B` (products summed in f32, or f64 for f64
//! fragments, rounded to the result's type once, as the host target does), a store writes the tile
//! (every lane the same values, between barriers: the whole block must reach a store, as a shuffle
//! through workgroup memory), constants and elementwise ops work element by element. Correct on any
//! subgroup size, at the cost of each lane doing its subgroup's work; fragments must not be carried
//! through loops or branches (refused by name).

use super::mlir::{op_name, source_position_in, splice_text};
use super::spirv::{failed, ops_with_prefix};
use crate::error::{Error, ErrorKind, Result};
use melior::ir::operation::{OperationLike, OperationRef};
use melior::ir::{BlockLike, RegionLike, Value, ValueLike};
use melior::Context;
use mlir_sys::MlirValue;

/// The memory space MLIR's storage-class maps (Vulkan's and OpenCL's) make `Function`
/// (private to a thread).
const FUNCTION_SPACE: u32 = 6;

/// A fragment type's shape and element type (`!gpu.mma_matrix<16x16xf16, "AOp">`).
fn shape(ty: &str) -> Option<(u64, u64, String)> {
    let inner = ty.strip_prefix("!gpu.mma_matrix<")?.split(',').next()?;
    let mut parts = inner.split('x');
    let rows = parts.next()?.parse().ok()?;
    let cols = parts.next()?.parse().ok()?;
    Some((rows, cols, parts.next()?.trim().to_string()))
}

fn private(rows: u64, cols: u64, element: &str) -> String {
    format!("memref<{rows}x{cols}x{element}, {FUNCTION_SPACE}>")
}

/// Rewrites the subgroup MMA ops of `kernel` (a `gpu.func` of `target`'s SPIR-V copy, found in
/// the kernel file at `kernel_location`); returns whether there were any.
pub(crate) fn emulate_mma<'c: 'a, 'a>(
    context: &'c Context,
    kernel: &impl OperationLike<'c, 'a>,
    kernel_location: &str,
    target: &str,
) -> Result<bool> {
    let ops = ops_with_prefix(kernel, "gpu.subgroup_mma_");
    if ops.is_empty() {
        return Ok(false);
    }
    let body = kernel
        .region(0)
        .ok()
        .and_then(|r| r.first_block())
        .ok_or_else(|| failed("reading a kernel"))?;
    // Each fragment value and the private matrix standing for it.
    let mut fragments: Vec<(MlirValue, MlirValue)> = Vec::new();
    for raw in &ops {
        // SAFETY: a live op of the kernel (each is replaced after all are rewritten).
        let op = unsafe { OperationRef::from_raw(*raw) };
        let name = op_name(&op);
        let fragment_of =
            |fragments: &[(MlirValue, MlirValue)], value: Value| -> Result<MlirValue> {
                fragments
                    .iter()
                    .find(|(f, _)| f.ptr == value.to_raw().ptr)
                    .map(|(_, m)| *m)
                    .ok_or_else(|| {
                        Error::new(
                            ErrorKind::Unsupported,
                            format!(
                            "{}: error: a subgroup matrix fragment that comes through a loop or \
                             branch cannot be built for {target} (each thread holds its fragments \
                             in private memory); keep a fragment's ops in one block",
                            source_position_in(kernel_location, &op)
                        ),
                        )
                    })
            };
        // The private matrix of the op's result, made at the kernel's start.
        let mut result_matrix = None;
        if let Ok(result) = op.result(0) {
            let ty = result.r#type().to_string();
            let (rows, cols, element) =
                shape(&ty).ok_or_else(|| failed("reading a fragment type"))?;
            // At the kernel's start: a Function variable must be in the entry block. Made from
            // text, so that the op has its properties.
            let memref = private(rows, cols, &element);
            let text = format!(
                "func.func @f() -> {memref} {{\n  %m = memref.alloca() : {memref}\n  return %m : {memref}\n}}\n"
            );
            let first = body
                .first_operation()
                .ok_or_else(|| failed("reading a kernel"))?;
            let matrix = splice_text(context, &text, &first, &[])
                .and_then(|values| values.first().copied())
                .ok_or_else(|| failed("a private matrix"))?;
            fragments.push((result.to_raw(), matrix));
            result_matrix = Some((matrix, rows, cols, element));
        }
        let operands: Vec<Value> = (0..op.operand_count())
            .filter_map(|i| op.operand(i).ok())
            .collect();
        let raw_operands: Vec<MlirValue> = operands.iter().map(|o| o.to_raw()).collect();
        // MLIR 22's verifier lets a load or store give more or fewer indices than its memref
        // has dimensions; there is no element to address then.
        let memory_operand = match name.as_str() {
            "gpu.subgroup_mma_load_matrix" => Some((0, operands.len().saturating_sub(1))),
            "gpu.subgroup_mma_store_matrix" => Some((1, operands.len().saturating_sub(2))),
            _ => None,
        };
        if let Some((at, indices)) = memory_operand {
            let memory = operands
                .get(at)
                .ok_or_else(|| failed("reading a matrix op"))?
                .r#type()
                .to_string();
            let rank = rank(&memory);
            if rank != indices {
                return Err(Error::new(
                    ErrorKind::InvalidInput,
                    format!(
                        "{}: error: `{name}` gives {indices} indices into `{memory}`, which has \
                         {rank} dimensions; give one index per dimension",
                        source_position_in(kernel_location, &op)
                    ),
                ));
            }
        }
        let (text, arguments): (String, Vec<MlirValue>) = match name.as_str() {
            "gpu.subgroup_mma_load_matrix" => {
                let (matrix, rows, cols, element) = result_matrix
                    .clone()
                    .ok_or_else(|| failed("a load's result"))?;
                let transpose = op.attribute("transpose").is_ok();
                let lead = lead_dimension(&op)?;
                let source = operands[0];
                let text = load_text(
                    &source.r#type().to_string(),
                    operands.len() - 1,
                    rows,
                    cols,
                    &element,
                    lead,
                    transpose,
                );
                let mut arguments = raw_operands.clone();
                arguments.push(matrix);
                (text, arguments)
            }
            "gpu.subgroup_mma_store_matrix" => {
                let fragment = fragment_of(&fragments, operands[0])?;
                let (rows, cols, element) = shape(&operands[0].r#type().to_string())
                    .ok_or_else(|| failed("reading a fragment type"))?;
                let lead = lead_dimension(&op)?;
                let destination = operands[1];
                let text = store_text(
                    &destination.r#type().to_string(),
                    operands.len() - 2,
                    rows,
                    cols,
                    &element,
                    lead,
                );
                let mut arguments = vec![fragment];
                arguments.extend(&raw_operands[1..]);
                (text, arguments)
            }
            "gpu.subgroup_mma_compute" => {
                let (d, rows, cols, d_element) = result_matrix
                    .clone()
                    .ok_or_else(|| failed("a multiply's result"))?;
                let (_, k, a_element) = shape(&operands[0].r#type().to_string())
                    .ok_or_else(|| failed("reading a fragment type"))?;
                let (_, _, b_element) = shape(&operands[1].r#type().to_string())
                    .ok_or_else(|| failed("reading a fragment type"))?;
                let (_, _, c_element) = shape(&operands[2].r#type().to_string())
                    .ok_or_else(|| failed("reading a fragment type"))?;
                let text = compute_text(
                    rows,
                    cols,
                    k,
                    [&a_element, &b_element, &c_element, &d_element],
                );
                let arguments = vec![
                    fragment_of(&fragments, operands[0])?,
                    fragment_of(&fragments, operands[1])?,
                    fragment_of(&fragments, operands[2])?,
                    d,
                ];
                (text, arguments)
            }
            "gpu.subgroup_mma_constant_matrix" => {
                let (matrix, rows, cols, element) = result_matrix
                    .clone()
                    .ok_or_else(|| failed("a constant's result"))?;
                (
                    fill_text(rows, cols, &element),
                    vec![raw_operands[0], matrix],
                )
            }
            "gpu.subgroup_mma_elementwise" => {
                let (matrix, rows, cols, element) = result_matrix
                    .clone()
                    .ok_or_else(|| failed("an elementwise result"))?;
                let kind = op
                    .attribute("opType")
                    .map(|a| a.to_string())
                    .unwrap_or_default();
                let combine = elementwise(&kind, &element).ok_or_else(|| {
                    Error::new(
                        ErrorKind::Unsupported,
                        format!(
                            "{}: error: `gpu.subgroup_mma_elementwise` {kind} cannot be built \
                             for {target} yet",
                            source_position_in(kernel_location, &op)
                        ),
                    )
                })?;
                let mut arguments = operands
                    .iter()
                    .map(|o| fragment_of(&fragments, *o))
                    .collect::<Result<Vec<_>>>()?;
                let text = elementwise_text(rows, cols, &element, arguments.len(), &combine);
                arguments.push(matrix);
                (text, arguments)
            }
            other => {
                return Err(Error::new(
                    ErrorKind::Unsupported,
                    format!(
                        "{}: error: `{other}` cannot be built for {target}",
                        source_position_in(kernel_location, &op)
                    ),
                ))
            }
        };
        // SAFETY: live values of the kernel, defined before the op (its operands, and private
        // matrices at the kernel's start).
        let arguments: Vec<Value> = arguments
            .iter()
            .map(|&raw| unsafe { Value::from_raw(raw) })
            .collect();
        splice_text(context, &text, &op, &arguments)
            .ok_or_else(|| failed(&format!("splicing the emulation of `{name}`")))?;
    }
    // The fragment ops have no uses left outside themselves: destroy them, users first.
    for raw in ops.iter().rev() {
        // SAFETY: live ops of the kernel whose results (fragments) are used only by the MMA
        // ops destroyed before them.
        unsafe { mlir_sys::mlirOperationDestroy(*raw) };
    }
    Ok(true)
}

/// The number of dimensions of a memref type written as text (`memref<?x16xf16>`: 2).
fn rank(memref: &str) -> usize {
    memref
        .trim_start_matches("memref<")
        .split(',')
        .next()
        .unwrap_or_default()
        .split('x')
        .count()
        .saturating_sub(1)
}

fn lead_dimension(op: &OperationRef) -> Result<u64> {
    op.attribute("leadDimension")
        .ok()
        .and_then(|a| a.to_string().split(':').next()?.trim().parse().ok())
        .ok_or_else(|| failed("reading a leading dimension"))
}

/// Where element `(%r, %c)` of a tile at `%i, %j…` of a memref of type `memory` with
/// `indices` indices lies: its indices as MLIR text lines, ending with `%at…` values.
fn address(memory: &str, indices: usize, lead: u64, transpose: bool) -> (String, String) {
    // The tile's first element, linear in the memref (row-major, static inner sizes).
    let dims: Vec<&str> = memory
        .trim_start_matches("memref<")
        .split(',')
        .next()
        .unwrap_or_default()
        .split('x')
        .collect();
    let sizes: Vec<u64> = dims[..dims.len().saturating_sub(1)]
        .iter()
        .map(|d| d.parse().unwrap_or(0))
        .collect();
    let mut text = String::from("      %lead = arith.constant ");
    text.push_str(&format!("{lead} : index\n"));
    // base = Σ index_d · stride_d (row-major strides of the static sizes).
    text.push_str("      %base0 = arith.constant 0 : index\n");
    for d in 0..indices {
        let stride: u64 = sizes[d + 1..].iter().product();
        text.push_str(&format!(
            "      %stride{d} = arith.constant {stride} : index\n      %term{d} = arith.muli %i{d}, %stride{d} : index\n      %base{} = arith.addi %base{d}, %term{d} : index\n",
            d + 1
        ));
    }
    let (row, col) = if transpose {
        ("%c", "%r")
    } else {
        ("%r", "%c")
    };
    text.push_str(&format!(
        "      %rows = arith.muli {row}, %lead : index\n      %offset = arith.addi %rows, {col} : index\n      %linear = arith.addi %base{indices}, %offset : index\n"
    ));
    // Back to the memref's indices.
    let mut at = Vec::new();
    let mut rest = "%linear".to_string();
    for d in (0..sizes.len()).rev() {
        if d == 0 {
            at.push(rest.clone());
            break;
        }
        text.push_str(&format!(
            "      %size{d} = arith.constant {} : index\n      %at{d} = arith.remui {rest}, %size{d} : index\n      %rest{d} = arith.divui {rest}, %size{d} : index\n",
            sizes[d]
        ));
        at.push(format!("%at{d}"));
        rest = format!("%rest{d}");
    }
    at.reverse();
    (text, at.join(", "))
}

fn indices_parameters(indices: usize) -> String {
    (0..indices).map(|d| format!(", %i{d}: index")).collect()
}

/// Loops over a `rows` x `cols` tile around `inner` (which sees `%r`, `%c`).
fn tile_loops(rows: u64, cols: u64, inner: &str) -> String {
    format!(
        "  %zero = arith.constant 0 : index\n  %one = arith.constant 1 : index\n  %nrows = arith.constant {rows} : index\n  %ncols = arith.constant {cols} : index\n  scf.for %r = %zero to %nrows step %one {{\n    scf.for %c = %zero to %ncols step %one {{\n{inner}    }}\n  }}\n"
    )
}

fn finish(parameters: &str, body: &str) -> String {
    format!(
        "func.func @f({parameters}) -> i32 {{\n{body}  %done = arith.constant 0 : i32\n  return %done : i32\n}}\n"
    )
}

fn load_text(
    memory: &str,
    indices: usize,
    rows: u64,
    cols: u64,
    element: &str,
    lead: u64,
    transpose: bool,
) -> String {
    let fragment = private(rows, cols, element);
    let (address, at) = address(memory, indices, lead, transpose);
    let inner = format!(
        "{address}      %v = memref.load %src[{at}] : {memory}\n      memref.store %v, %frag[%r, %c] : {fragment}\n"
    );
    finish(
        &format!(
            "%src: {memory}{}, %frag: {fragment}",
            indices_parameters(indices)
        ),
        &tile_loops(rows, cols, &inner),
    )
}

fn store_text(
    memory: &str,
    indices: usize,
    rows: u64,
    cols: u64,
    element: &str,
    lead: u64,
) -> String {
    let fragment = private(rows, cols, element);
    let (address, at) = address(memory, indices, lead, false);
    let inner = format!(
        "{address}      %v = memref.load %frag[%r, %c] : {fragment}\n      memref.store %v, %dst[{at}] : {memory}\n"
    );
    // Between barriers: a device's subgroups may be narrower than the fragment's 32 lanes, and
    // no thread may overwrite what another has yet to load (a GPU's subgroup loads, then
    // stores, as one), nor load before every store is done.
    finish(
        &format!(
            "%frag: {fragment}, %dst: {memory}{}",
            indices_parameters(indices)
        ),
        &format!(
            "  gpu.barrier
{}  gpu.barrier
",
            tile_loops(rows, cols, &inner)
        ),
    )
}

/// `value` (of `element`) widened to the accumulation type `acc`: MLIR text defining it, and
/// its name (`value` itself when it already is one).
fn widen(value: &str, element: &str, acc: &str, name: &str) -> (String, String) {
    if element == acc {
        (String::new(), value.to_string())
    } else {
        (
            format!("      {name} = arith.extf {value} : {element} to {acc}\n"),
            name.to_string(),
        )
    }
}

fn compute_text(rows: u64, cols: u64, k: u64, elements: [&str; 4]) -> String {
    let [a, b, c, d] = elements;
    let acc = if [a, b, c, d].contains(&"f64") {
        "f64"
    } else {
        "f32"
    };
    let types = [
        private(rows, k, a),
        private(k, cols, b),
        private(rows, cols, c),
        private(rows, cols, d),
    ];
    let (out_text, out) = if d == acc {
        (String::new(), "%sum".to_string())
    } else {
        (
            format!("      %out = arith.truncf %sum : {acc} to {d}\n"),
            "%out".to_string(),
        )
    };
    let (wc, cw) = widen("%cv", c, acc, "%cw");
    let (wa, aw) = widen("%av", a, acc, "%aw");
    let (wb, bw) = widen("%bv", b, acc, "%bw");
    let inner = format!(
        "      %cv = memref.load %mc[%r, %c] : {tc}\n{wc}      %nk = arith.constant {k} : index\n      %sum = scf.for %q = %zero to %nk step %one iter_args(%s = {cw}) -> ({acc}) {{\n        %av = memref.load %ma[%r, %q] : {ta}\n        %bv = memref.load %mb[%q, %c] : {tb}\n{wa}{wb}        %p = arith.mulf {aw}, {bw} : {acc}\n        %n = arith.addf %s, %p : {acc}\n        scf.yield %n : {acc}\n      }}\n{out_text}      memref.store {out}, %md[%r, %c] : {td}\n",
        tc = types[2],
        ta = types[0],
        tb = types[1],
        td = types[3],
    );
    finish(
        &format!(
            "%ma: {}, %mb: {}, %mc: {}, %md: {}",
            types[0], types[1], types[2], types[3]
        ),
        &tile_loops(rows, cols, &inner),
    )
}

fn fill_text(rows: u64, cols: u64, element: &str) -> String {
    let fragment = private(rows, cols, element);
    finish(
        &format!("%value: {element}, %frag: {fragment}"),
        &tile_loops(
            rows,
            cols,
            &format!("      memref.store %value, %frag[%r, %c] : {fragment}\n"),
        ),
    )
}

/// The MLIR text combining `%x0`, `%x1`… into `%y` for an elementwise `kind`.
fn elementwise(kind: &str, element: &str) -> Option<String> {
    let op = [
        ("addf", "arith.addf"),
        ("mulf", "arith.mulf"),
        ("subf", "arith.subf"),
        ("maxf", "arith.maximumf"),
        ("minf", "arith.minimumf"),
        ("divf", "arith.divf"),
    ]
    .into_iter()
    .find(|(name, _)| kind.contains(name))?
    .1;
    Some(format!("      %y = {op} %x0, %x1 : {element}\n"))
}

fn elementwise_text(rows: u64, cols: u64, element: &str, inputs: usize, combine: &str) -> String {
    let fragment = private(rows, cols, element);
    let mut parameters: Vec<String> = (0..inputs).map(|i| format!("%in{i}: {fragment}")).collect();
    parameters.push(format!("%out: {fragment}"));
    let mut inner = String::new();
    for i in 0..inputs {
        inner.push_str(&format!(
            "      %x{i} = memref.load %in{i}[%r, %c] : {fragment}\n"
        ));
    }
    inner.push_str(combine);
    inner.push_str(&format!(
        "      memref.store %y, %out[%r, %c] : {fragment}\n"
    ));
    finish(&parameters.join(", "), &tile_loops(rows, cols, &inner))
}
