//! A Vulkan object's workgroup size as specialization constants, so that one SPIR-V module runs
//! at any block size (issue 39): what GLSL's `layout(local_size_x_id = …)` compiles to.
//!
//! MLIR lowers `gpu.block_dim` of a kernel without a known size to a load of an `Input`
//! variable decorated `BuiltIn WorkgroupSize`, which Vulkan forbids (that built-in must decorate
//! a constant), and its serializer cannot decorate a constant as a built-in. So this pass edits
//! the serialized words: three `OpSpecConstant`s (`SpecId`s [`WORKGROUP_SIZE_SPEC_IDS`]) make an
//! `OpSpecConstantComposite` decorated `BuiltIn WorkgroupSize`, every load of the variable becomes
//! that composite, and the variable goes. The built-in applies to every entry point of the
//! module and takes precedence over their `LocalSize` modes, so the runtime specializes every
//! pipeline with its launch's block size (a kernel's `known_block_size` then only restricts
//! which sizes it accepts, and lets the compiler fold `gpu.block_dim`).

use crate::error::{Error, ErrorKind, Result};
use gpu_manifest::targets::vulkan::WORKGROUP_SIZE_SPEC_IDS;
use rspirv::binary::Assemble;
use rspirv::dr::{self, Instruction, Operand};
use rspirv::spirv::{BuiltIn, Decoration, Op, Word};
use std::collections::HashMap;

fn internal(what: &str) -> Error {
    Error::new(
        ErrorKind::Lowering,
        format!("internal error: making the Vulkan workgroup size specializable: {what}"),
    )
}

/// `words` (a serialized module) with its workgroup size made specialization constants.
pub(super) fn specializable(words: &[u8]) -> Result<Vec<u8>> {
    let mut module = dr::load_bytes(words).map_err(|e| internal(&e.to_string()))?;
    let generator = words
        .get(8..12)
        .map_or(0, |w| u32::from_ne_bytes([w[0], w[1], w[2], w[3]]));
    let decorated = |instruction: &Instruction, decoration: Decoration| {
        instruction.class.opcode == Op::Decorate
            && instruction.operands.get(1) == Some(&Operand::Decoration(decoration))
    };
    if module.annotations.iter().any(|a| {
        decorated(a, Decoration::SpecId)
            && matches!(a.operands.get(2), Some(Operand::LiteralBit32(id))
                if WORKGROUP_SIZE_SPEC_IDS.contains(id))
    }) {
        return Err(Error::new(
            ErrorKind::Unsupported,
            format!(
                "the module declares a specialization constant with one of the ids gpu-build \
                 gives the workgroup size ({WORKGROUP_SIZE_SPEC_IDS:?}); renumber it"
            ),
        ));
    }
    let variables: Vec<Word> = module
        .annotations
        .iter()
        .filter(|a| {
            decorated(a, Decoration::BuiltIn)
                && a.operands.get(2) == Some(&Operand::BuiltIn(BuiltIn::WorkgroupSize))
        })
        .filter_map(|a| a.operands[0].id_ref_any())
        .collect();
    let mut bound = module.header.as_ref().map_or(1, |h| h.bound);
    let mut fresh = || {
        bound += 1;
        bound - 1
    };
    // The composite's type: the variable's (`vector<3xi32>`, `index` being 32 bits), else made.
    let pointee = |id: Word| {
        module
            .types_global_values
            .iter()
            .find(|i| i.result_id == Some(id))
            .cloned()
    };
    let vector = match variables.first() {
        Some(&variable) => {
            let pointer = pointee(variable)
                .and_then(|v| v.result_type)
                .and_then(pointee)
                .ok_or_else(|| internal("the built-in variable has no pointer type"))?;
            pointer
                .operands
                .get(1)
                .and_then(Operand::id_ref_any)
                .ok_or_else(|| internal("the built-in's pointer type has no pointee"))?
        }
        None => 0,
    };
    let mut new_types = Vec::new();
    let (scalar, vector) = if vector != 0 {
        let component = pointee(vector)
            .filter(|v| v.class.opcode == Op::TypeVector)
            .and_then(|v| v.operands.first().and_then(Operand::id_ref_any))
            .ok_or_else(|| internal("the built-in is not a vector"))?;
        (component, vector)
    } else {
        let existing = |op: Op, operands: &[Operand]| {
            module
                .types_global_values
                .iter()
                .find(|i| i.class.opcode == op && i.operands == operands)
                .and_then(|i| i.result_id)
        };
        let int = [Operand::LiteralBit32(32), Operand::LiteralBit32(0)];
        let scalar = existing(Op::TypeInt, &int).unwrap_or_else(|| {
            let id = fresh();
            new_types.push(Instruction::new(Op::TypeInt, None, Some(id), int.to_vec()));
            id
        });
        let v3 = [Operand::IdRef(scalar), Operand::LiteralBit32(3)];
        let vector = existing(Op::TypeVector, &v3).unwrap_or_else(|| {
            let id = fresh();
            new_types.push(Instruction::new(
                Op::TypeVector,
                None,
                Some(id),
                v3.to_vec(),
            ));
            id
        });
        (scalar, vector)
    };
    let components: Vec<Word> = (0..3).map(|_| fresh()).collect();
    let composite = fresh();
    module.types_global_values.extend(new_types);
    for (&id, spec_id) in components.iter().zip(WORKGROUP_SIZE_SPEC_IDS) {
        module.types_global_values.push(Instruction::new(
            Op::SpecConstant,
            Some(scalar),
            Some(id),
            vec![Operand::LiteralBit32(1)],
        ));
        module.annotations.push(Instruction::new(
            Op::Decorate,
            None,
            None,
            vec![
                Operand::IdRef(id),
                Operand::Decoration(Decoration::SpecId),
                Operand::LiteralBit32(spec_id),
            ],
        ));
    }
    module.types_global_values.push(Instruction::new(
        Op::SpecConstantComposite,
        Some(vector),
        Some(composite),
        components.iter().map(|&id| Operand::IdRef(id)).collect(),
    ));
    module.annotations.push(Instruction::new(
        Op::Decorate,
        None,
        None,
        vec![
            Operand::IdRef(composite),
            Operand::Decoration(Decoration::BuiltIn),
            Operand::BuiltIn(BuiltIn::WorkgroupSize),
        ],
    ));

    // Every load of the variable becomes the composite.
    let mut loaded: HashMap<Word, Word> = HashMap::new();
    for function in &mut module.functions {
        for block in &mut function.blocks {
            block.instructions.retain(|i| {
                let load = i.class.opcode == Op::Load
                    && matches!(i.operands.first(), Some(Operand::IdRef(p)) if variables.contains(p));
                if let (true, Some(result)) = (load, i.result_id) {
                    loaded.insert(result, composite);
                }
                !load
            });
        }
    }
    let is_variable =
        |operand: &Operand| matches!(operand, Operand::IdRef(id) if variables.contains(id));
    module
        .types_global_values
        .retain(|i| !i.result_id.is_some_and(|id| variables.contains(&id)));
    module
        .annotations
        .retain(|a| !a.operands.first().is_some_and(is_variable));
    module
        .debug_names
        .retain(|n| !n.operands.first().is_some_and(is_variable));
    for entry in &mut module.entry_points {
        entry.operands.retain(|o| !is_variable(o));
    }
    for instruction in module.all_inst_iter_mut() {
        for operand in &mut instruction.operands {
            if let Operand::IdRef(id) = operand {
                if let Some(&replacement) = loaded.get(id) {
                    *id = replacement;
                } else if variables.contains(id) {
                    return Err(internal(
                        "the built-in variable is used other than by loading it",
                    ));
                }
            }
        }
    }
    if let Some(header) = &mut module.header {
        header.bound = bound;
        // The loader stamps its own generator; the module is still MLIR's.
        header.generator = generator;
    }
    Ok(module
        .assemble()
        .iter()
        .flat_map(|word| word.to_ne_bytes())
        .collect())
}
