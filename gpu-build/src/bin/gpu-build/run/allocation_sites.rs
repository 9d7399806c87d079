//! `gpu-build run --check`: the leak check names the `gpu.alloc` that made each leaked buffer.
//! Before each `gpu.alloc` of the host code goes a call of the runtime's
//! `mgpuCheckAllocationSite(n)`, and the runtime is given the ops' `file:line:col` by number
//! (`gpu_embed::mgpu::set_allocation_sites`).

use melior::dialect::{arith, func};
use melior::ir::attribute::{
    FlatSymbolRefAttribute, IntegerAttribute, StringAttribute, TypeAttribute,
};
use melior::ir::block::BlockLike;
use melior::ir::operation::{OperationLike, OperationRef, WalkOrder, WalkResult};
use melior::ir::r#type::{FunctionType, IntegerType};
use melior::ir::{Identifier, Location, Module, Region};
use melior::Context;

/// The runtime's function (`gpu_embed::mgpu::mgpuCheckAllocationSite`).
const SITE_FUNCTION: &str = "mgpuCheckAllocationSite";

/// Puts the site calls before the `gpu.alloc`s of `module` and tells the runtime where they are.
pub fn name_allocation_sites(context: &Context, module: &Module) -> Result<(), String> {
    let mut allocations = Vec::new();
    module.as_operation().walk(WalkOrder::PreOrder, |op| {
        if op.name().as_string_ref().as_str() == Ok("gpu.alloc") {
            allocations.push(op.to_raw());
        }
        WalkResult::Advance
    });
    if allocations.is_empty() {
        return Ok(());
    }
    let i64_type = IntegerType::new(context, 64).into();
    let mut sites = Vec::new();
    for raw in allocations {
        // SAFETY: an op of the module found above; nothing was erased since.
        let op = unsafe { OperationRef::from_raw(raw) };
        let block = op.block().ok_or("a gpu.alloc outside a block")?;
        let location = op.location();
        let number = IntegerAttribute::new(i64_type, sites.len() as i64);
        let constant =
            block.insert_operation_before(op, arith::constant(context, number.into(), location));
        let value = constant.result(0).map_err(|e| e.to_string())?;
        block.insert_operation_before(
            op,
            func::call(
                context,
                FlatSymbolRefAttribute::new(context, SITE_FUNCTION),
                &[value.into()],
                &[],
                location,
            ),
        );
        sites.push(format!("{} (gpu.alloc)", position(&location.to_string())));
    }
    let signature = FunctionType::new(context, &[i64_type], &[]);
    module.body().append_operation(func::func(
        context,
        StringAttribute::new(context, SITE_FUNCTION),
        TypeAttribute::new(signature.into()),
        Region::new(),
        &[(
            Identifier::new(context, "sym_visibility"),
            StringAttribute::new(context, "private").into(),
        )],
        Location::unknown(context),
    ));
    gpu_embed::mgpu::set_allocation_sites(sites);
    Ok(())
}

/// `file:line:col` of a location's text (`loc("file":line:col)`).
fn position(location: &str) -> String {
    location
        .trim_start_matches("loc(")
        .trim_end_matches(')')
        .replace('"', "")
}
