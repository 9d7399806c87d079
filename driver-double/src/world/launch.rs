//! A launch checked against the loaded image, as the vendor's driver reads it: each parameter's
//! bytes are read from where the caller's `kernelParams` array points, at the size the image
//! declares; pointer parameters must point into memory the device can reach; block, grid and
//! shared memory within the kernel's and the device's limits.

use super::streams::Work;
use super::{Code, Fault, Outcome, World};
use std::ffi::c_void;
use std::fmt::Write;

pub struct LaunchRequest {
    pub function: u64,
    pub grid: [u32; 3],
    pub block: [u32; 3],
    pub shared: u32,
    pub stream: u64,
    pub params: *mut *mut c_void,
    pub extra: *mut *mut c_void,
}

const MAX_BLOCK: [u32; 3] = [1024, 1024, 64];
const MAX_GRID: [u32; 3] = [i32::MAX as u32, 65535, 65535];

impl World {
    /// Checks and queues a launch in `context`; returns the record's description of it.
    ///
    /// # Safety
    /// `request.params` is what the vendors require of `kernelParams`: null for a kernel without
    /// parameters, else an array of a pointer per parameter, each to that parameter's bytes.
    pub unsafe fn launch(&mut self, context: u64, request: &LaunchRequest) -> Outcome<String> {
        let function = self.function_state(request.function)?;
        if function.context != context {
            return Err(Fault::violation(
                Code::InvalidHandle,
                format!(
                    "kernel `{}` was loaded in another context than the launch's",
                    function.kernel.name
                ),
            ));
        }
        let (kernel, module, allowed) = (
            function.kernel.clone(),
            function.module,
            function.dynamic_shared_allowed,
        );
        let device = self.device_of_context(context)?;
        let stream = self.stream_in(request.stream, context)?;
        let name = &kernel.name;
        let (grid, block) = (request.grid, request.block);
        if grid.contains(&0) || block.contains(&0) {
            return Err(Fault::violation(
                Code::InvalidValue,
                format!("kernel `{name}`: grid {grid:?} or block {block:?} has a zero"),
            ));
        }
        if (0..3).any(|i| block[i] > MAX_BLOCK[i] || grid[i] > MAX_GRID[i]) {
            return Err(Fault::violation(Code::InvalidValue, format!("kernel `{name}`: grid {grid:?} or block {block:?} exceeds the device's {MAX_GRID:?} / {MAX_BLOCK:?}")));
        }
        let threads: u64 = block.iter().map(|&b| u64::from(b)).product();
        if threads > u64::from(kernel.max_threads) {
            return Err(Fault::violation(
                Code::InvalidValue,
                format!(
                    "kernel `{name}`: a block of {threads} threads, the kernel allows {}",
                    kernel.max_threads
                ),
            ));
        }
        if let Some(required) = kernel.required_block.filter(|r| *r != block) {
            return Err(Fault::violation(
                Code::InvalidValue,
                format!("kernel `{name}` requires blocks of {required:?}, launched with {block:?}"),
            ));
        }
        let (plain, _) = self.devices[device].shared_per_block();
        let dynamic = u64::from(request.shared);
        let limit = plain.saturating_sub(kernel.static_shared).max(allowed);
        if dynamic > limit {
            return Err(Fault::violation(Code::InvalidValue, format!("kernel `{name}`: {dynamic} bytes of dynamic shared memory with {} static; {limit} allowed{}", kernel.static_shared, if allowed == 0 { " (no opt-in set)" } else { "" })));
        }
        if !request.extra.is_null() {
            return Err(Fault::violation(
                Code::InvalidValue,
                format!("kernel `{name}`: `extra` is set; the double reads `kernelParams` only"),
            ));
        }
        if request.params.is_null() && !kernel.params.is_empty() {
            return Err(Fault::violation(
                Code::InvalidValue,
                format!(
                    "kernel `{name}` takes {} parameters and `kernelParams` is null",
                    kernel.params.len()
                ),
            ));
        }
        let mut description = format!("kernel={name} image={} grid={grid:?} block={block:?} shared={dynamic} params({} bytes)=[", self.module_kind(module), kernel.param_bytes);
        let mut pointers = Vec::new();
        for (i, param) in kernel.params.iter().enumerate() {
            // SAFETY: the caller's array has a pointer per parameter of the kernel.
            let value = unsafe { *request.params.add(i) };
            if value.is_null() {
                return Err(Fault::violation(
                    Code::InvalidValue,
                    format!("kernel `{name}`: kernelParams[{i}] is null"),
                ));
            }
            // SAFETY: each element points to that parameter's bytes, as many as the image says.
            let bytes = unsafe { std::slice::from_raw_parts(value.cast::<u8>(), param.size) };
            let mut number = [0u8; 8];
            number[..param.size.min(8)].copy_from_slice(&bytes[..param.size.min(8)]);
            let number = u64::from_le_bytes(number);
            let separator = if i == 0 { "" } else { ", " };
            // The image says it is a pointer, or it holds one of the double's device addresses
            // (cubins do not mark pointers; those addresses are nothing else's).
            if param.pointer || (param.size == 8 && super::memory::is_device_address(number)) {
                if number != 0 {
                    self.span(number, 0, Some(device)).map_err(|fault| {
                        Fault::violation(
                            fault.code,
                            format!(
                                "kernel `{name}`, parameter {i} (a pointer at offset {}): {}",
                                param.offset, fault.message
                            ),
                        )
                    })?;
                    pointers.push(number);
                }
                let _ = write!(description, "{separator}ptr {number:#x}");
            } else {
                let _ = write!(description, "{separator}{}B {number:#x}", param.size);
            }
        }
        description.push(']');
        self.enqueue(
            stream,
            Work::Launch {
                kernel: name.clone(),
                module,
                pointers,
            },
        )?;
        Ok(description)
    }
}
