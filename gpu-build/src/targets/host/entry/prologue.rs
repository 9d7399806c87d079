//! What every entry point starts with: the function with the scheduler's signature, the context
//! and the ids stored where the kernel reads them, the kernel's arguments unpacked from
//! `void **params`; the one-thread entry, which then only calls the kernel; and the entry
//! block's slots (ids, allocas) the rest of the builder uses.

use super::EntryBuilder;
use crate::error::{Error, ErrorKind, Result};
use crate::targets::host::ir::{builder_error, IDS_BYTES};
use crate::targets::interface::Job;
use inkwell::attributes::AttributeLoc;
use inkwell::module::{Linkage, Module};
use inkwell::types::{BasicType, BasicTypeEnum};
use inkwell::values::{FunctionValue, GlobalValue, PointerValue};
use inkwell::AddressSpace;

impl<'a, 'll> EntryBuilder<'a, 'll> {
    pub(super) fn new(
        job: &'a Job<'a, 'll>,
        module: &'a Module<'ll>,
        context: GlobalValue<'ll>,
        ids: GlobalValue<'ll>,
        kernel: FunctionValue<'ll>,
        symbol: &str,
        block_range: bool,
    ) -> Result<Self> {
        let ptr = job.llvm.ptr_type(AddressSpace::default());
        let i64_type = job.llvm.i64_type();
        let entry_type = if block_range {
            job.llvm.i32_type().fn_type(
                &[ptr.into(), ptr.into(), i64_type.into(), i64_type.into()],
                false,
            )
        } else {
            job.llvm
                .void_type()
                .fn_type(&[ptr.into(), ptr.into()], false)
        };
        let function = module.add_function(symbol, entry_type, Some(Linkage::External));
        // The context is the scheduler's, private to this call.
        let noalias = inkwell::attributes::Attribute::get_named_enum_kind_id("noalias");
        function.add_attribute(
            AttributeLoc::Param(1),
            job.llvm.create_enum_attribute(noalias, 0),
        );
        let builder = job.llvm.create_builder();
        let entry = job.llvm.append_basic_block(function, "entry");
        builder.position_at_end(entry);
        let [params, context_argument, ..] = function.get_params()[..] else {
            return Err(Error::new(
                ErrorKind::Codegen,
                "a host entry point without its two parameters",
            ));
        };
        let (params, context_argument) = (
            params.into_pointer_value(),
            context_argument.into_pointer_value(),
        );
        builder
            .build_store(context.as_pointer_value(), context_argument)
            .map_err(builder_error)?;
        let bytes = job.llvm.i64_type().const_int(IDS_BYTES, false);
        builder
            .build_memcpy(ids.as_pointer_value(), 16, context_argument, 4, bytes)
            .map_err(builder_error)?;
        let mut arguments = Vec::new();
        for (index, ty) in kernel.get_type().get_param_types().into_iter().enumerate() {
            let index = job.llvm.i64_type().const_int(index as u64, false);
            // SAFETY: `params` holds one pointer per kernel parameter.
            let slot = unsafe { builder.build_in_bounds_gep(ptr, params, &[index], "slot") }
                .map_err(builder_error)?;
            let pointer = builder
                .build_load(ptr, slot, "param")
                .map_err(builder_error)?
                .into_pointer_value();
            let ty: BasicTypeEnum = ty.try_into().map_err(|_| {
                Error::new(ErrorKind::Codegen, "a kernel parameter without storage")
            })?;
            arguments.push(
                builder
                    .build_load(ty, pointer, "value")
                    .map_err(builder_error)?
                    .into(),
            );
        }
        Ok(EntryBuilder {
            job,
            module,
            builder,
            function,
            entry,
            kernel,
            context: context_argument,
            ids: ids.as_pointer_value(),
            arguments,
        })
    }

    /// One GPU thread, its ids already in the context.
    pub(super) fn thread(self) -> Result<()> {
        self.builder
            .build_call(self.kernel, &self.arguments, "")
            .map_err(builder_error)?;
        self.builder.build_return(None).map_err(builder_error)?;
        Ok(())
    }

    /// Slot `slot` of the context (`in_context`) or of the thread-local ids.
    pub(super) fn id_slot(&self, slot: u64, in_context: bool) -> Result<PointerValue<'ll>> {
        let index = self.job.llvm.i64_type().const_int(slot, false);
        let base = if in_context { self.context } else { self.ids };
        // SAFETY: both hold twelve u32 ids.
        unsafe {
            self.builder
                .build_in_bounds_gep(self.job.llvm.i32_type(), base, &[index], "id")
        }
        .map_err(builder_error)
    }

    /// An alloca in the entry block, whatever block the builder is in: LLVM makes those
    /// registers; one in a loop would take stack on every iteration.
    pub(super) fn entry_alloca(
        &self,
        ty: impl BasicType<'ll>,
        name: &str,
    ) -> Result<PointerValue<'ll>> {
        let here = self.builder.get_insert_block();
        match self.entry.get_first_instruction() {
            Some(first) => self.builder.position_before(&first),
            None => self.builder.position_at_end(self.entry),
        }
        let alloca = self.builder.build_alloca(ty, name).map_err(builder_error);
        if let Some(here) = here {
            self.builder.position_at_end(here);
        }
        alloca
    }
}
