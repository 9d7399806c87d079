//! Loaded images and their kernels. An image loads only where the vendor's loader would load it:
//! a cubin on its major at the same or a later minor (an arch-specific `sm_90a` cubin only on
//! its own), PTX for an older or equal compute capability in an ISA the driver knows; an hsaco for
//! the device's chip or its generic family (code object v6, from ROCm 6.2), with matching xnack
//! and sramecc settings.

use super::{Code, Fault, Outcome, Vendor, World};
use crate::config::config;
use crate::image::{self, Image, Kernel, Kind};
use std::collections::BTreeMap;

struct Module {
    context: u64,
    image: Image,
}

pub(super) struct Function {
    pub module: u64,
    pub context: u64,
    pub kernel: Kernel,
    /// CUDA's `CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES`.
    pub dynamic_shared_allowed: u64,
}

#[derive(Default)]
pub(super) struct Modules {
    modules: BTreeMap<u64, Module>,
    pub(super) functions: BTreeMap<u64, Function>,
}

/// `gfx90a:sramecc+:xnack-` → ("gfx90a", sramecc, xnack).
fn gfx_parts(chip: &str) -> (&str, Option<bool>, Option<bool>) {
    let mut parts = chip.split(':');
    let base = parts.next().unwrap_or_default();
    let (mut sramecc, mut xnack) = (None, None);
    for part in parts {
        let on = part.ends_with('+');
        match part.trim_end_matches(['+', '-']) {
            "sramecc" => sramecc = Some(on),
            "xnack" => xnack = Some(on),
            _ => {}
        }
    }
    (base, sramecc, xnack)
}

/// Why `image` does not run on a device of `chip`; none if it does.
fn refusal(image: &Image, vendor: Vendor, chip: &str) -> Option<(Code, String)> {
    match (&image.kind, vendor) {
        (Kind::Cubin { sm }, Vendor::Cuda) => {
            let device = image::sm_of(chip)?;
            let runs = if sm.2 {
                (sm.0, sm.1) == (device.0, device.1)
            } else {
                sm.0 == device.0 && sm.1 <= device.1
            };
            (!runs).then(|| {
                (
                    Code::NoBinary,
                    format!("{} does not run on {chip}", image.kind),
                )
            })
        }
        (Kind::Ptx { version, sm }, Vendor::Cuda) => {
            let device = image::sm_of(chip)?;
            let newest = image::newest_ptx(config().cuda_version);
            if *version > newest {
                return Some((
                    Code::UnsupportedPtx,
                    format!(
                        "PTX ISA {}.{} is newer than this driver's {}.{}",
                        version.0, version.1, newest.0, newest.1
                    ),
                ));
            }
            let runs = if sm.2 {
                (sm.0, sm.1) == (device.0, device.1)
            } else {
                (sm.0, sm.1) <= (device.0, device.1)
            };
            (!runs).then(|| {
                (
                    Code::NoBinary,
                    format!("PTX for sm_{}{} does not run on {chip}", sm.0, sm.1),
                )
            })
        }
        (
            Kind::Hsaco {
                chip: object_chip,
                code_object,
                xnack,
                sramecc,
            },
            Vendor::Hip,
        ) => {
            let (base, device_sramecc, device_xnack) = gfx_parts(chip);
            let version = config().hip_version;
            let newest_code_object = if version >= 60_200_000 { 6 } else { 5 };
            if *code_object > newest_code_object {
                return Some((
                    Code::InvalidImage,
                    format!(
                        "code object v{code_object} needs a newer ROCm than {}.{}",
                        version / 10_000_000,
                        version / 100_000 % 100
                    ),
                ));
            }
            let generic = image::generic_family(base) == Some(object_chip.as_str());
            if object_chip != base && !generic {
                return Some((
                    Code::NoBinary,
                    format!("an hsaco for {object_chip} does not run on {chip}"),
                ));
            }
            for (setting, object, device) in [
                ("xnack", xnack, device_xnack),
                ("sramecc", sramecc, device_sramecc),
            ] {
                if let (Some(object), Some(device)) = (object, device) {
                    if object != &device {
                        return Some((
                            Code::NoBinary,
                            format!(
                                "an hsaco with {setting}{} does not run on {chip}",
                                if *object { '+' } else { '-' }
                            ),
                        ));
                    }
                }
            }
            None
        }
        (kind, _) => Some((
            Code::InvalidImage,
            format!("{kind} is not an image of this vendor"),
        )),
    }
}

impl World {
    pub fn load_module(
        &mut self,
        context: u64,
        bytes: &[u8],
        vendor: Vendor,
    ) -> Outcome<(u64, String)> {
        let device = self.device_of_context(context)?;
        let code = if bytes.starts_with(b"\x7fELF") {
            Code::InvalidImage
        } else {
            Code::InvalidPtx
        };
        let image = image::read(bytes).map_err(|e| Fault::violation(code, e))?;
        if let Some((code, why)) = refusal(&image, vendor, &self.devices[device].chip) {
            return Err(Fault::violation(code, why));
        }
        let kind = image.kind.to_string();
        let id = self.handle();
        self.modules.modules.insert(id, Module { context, image });
        Ok((id, kind))
    }

    pub fn unload_module(&mut self, module: u64) -> Outcome<()> {
        if !self.modules.modules.contains_key(&module) {
            return Err(self.unknown(module, "module"));
        }
        if self.work_queued_for(module) {
            return Err(Fault::violation(
                Code::InvalidValue,
                format!("module {module:#x} unloaded while launches of its kernels are queued"),
            ));
        }
        self.modules.modules.remove(&module);
        self.modules.functions.retain(|_, f| f.module != module);
        self.bury(module, "module");
        Ok(())
    }

    pub(super) fn module_loaded(&self, module: u64) -> bool {
        self.modules.modules.contains_key(&module)
    }

    pub fn function(&mut self, module: u64, name: &str) -> Outcome<u64> {
        let loaded = self
            .modules
            .modules
            .get(&module)
            .ok_or_else(|| self.unknown(module, "module"))?;
        let kernel = loaded
            .image
            .kernels
            .iter()
            .find(|k| k.name == name)
            .cloned()
            .ok_or_else(|| {
                Fault::expected(Code::NotFound, format!("no kernel `{name}` in the module"))
            })?;
        let context = loaded.context;
        let id = self.handle();
        self.modules.functions.insert(
            id,
            Function {
                module,
                context,
                kernel,
                dynamic_shared_allowed: 0,
            },
        );
        Ok(id)
    }

    pub(super) fn function_state(&self, function: u64) -> Outcome<&Function> {
        self.modules
            .functions
            .get(&function)
            .ok_or_else(|| self.unknown(function, "function"))
    }

    pub fn kernel(&self, function: u64) -> Outcome<Kernel> {
        Ok(self.function_state(function)?.kernel.clone())
    }

    /// CUDA's opt-in to more than 48 KiB of dynamic shared memory.
    pub fn allow_dynamic_shared(&mut self, function: u64, bytes: u64) -> Outcome<()> {
        let state = self.function_state(function)?;
        let device = self.device_of_context(state.context)?;
        let (_, optin) = self.devices[device].shared_per_block();
        if bytes + state.kernel.static_shared > optin {
            return Err(Fault::violation(Code::InvalidValue, format!("{bytes} bytes of dynamic shared memory with {} static exceed the device's {optin}", state.kernel.static_shared)));
        }
        if let Some(f) = self.modules.functions.get_mut(&function) {
            f.dynamic_shared_allowed = bytes;
        }
        Ok(())
    }

    /// Block size and minimum grid for the most resident threads: the kernel's largest block,
    /// as many blocks per multiprocessor as shared memory and 2048 threads allow.
    pub fn potential_block_size(&self, function: u64, dynamic_shared: u64) -> Outcome<(i32, i32)> {
        let state = self.function_state(function)?;
        let device = &self.devices[self.device_of_context(state.context)?];
        let block = state.kernel.max_threads.clamp(1, 1024);
        let shared = state.kernel.static_shared + dynamic_shared;
        let by_threads = 2048 / block;
        let by_shared = (228 * 1024u64)
            .checked_div(shared)
            .map_or(by_threads, |blocks| blocks as u32);
        let per_multiprocessor = by_threads.min(by_shared).max(1);
        Ok((
            block as i32,
            (per_multiprocessor * device.multiprocessors()) as i32,
        ))
    }

    pub(super) fn loaded_modules(&self) -> usize {
        self.modules.modules.len()
    }
}

impl World {
    /// What kind of image `module` was loaded from (`cubin sm_90`).
    pub(super) fn module_kind(&self, module: u64) -> String {
        self.modules
            .modules
            .get(&module)
            .map_or_else(|| "?".into(), |m| m.image.kind.to_string())
    }
}
