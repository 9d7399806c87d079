//! The modules loaded on a device: each binary's best object loaded once, on first launch,
//! thread-safely, and its kernels' functions with what the driver says of them.

use super::{Device, LastLaunch};
use crate::binary::{Binary, Object};
use crate::driver::{Driver, FunctionHandle, KernelAttributes, ModuleHandle};
use crate::error::{Error, ErrorKind, Result};
use crate::select::select;
use crate::trace::event;
use std::sync::atomic::{AtomicPtr, Ordering};
use std::sync::Mutex;

/// A binary's module on a device. Modules stay loaded for the life of the process, as devices
/// do (`Device`'s documentation).
pub(super) struct Loaded {
    /// The binary (its address: binaries are statics).
    binary: usize,
    module: ModuleHandle,
    object: &'static Object,
    /// Its kernels' functions, in the order they were first launched: a module has a few, and
    /// a look down them cost less than hashing the name (a launch looks its function up).
    functions: Vec<(&'static str, &'static LoadedFunction)>,
}

/// A kernel's function on a device, with what the driver knows about it (read once). One per
/// kernel and device for the life of the process, as its module: a launch borrows it, and
/// clones no handle.
pub(crate) struct LoadedFunction {
    /// The device it is loaded on.
    device: Device,
    pub handle: FunctionHandle,
    pub attributes: KernelAttributes,
    /// The dynamic shared memory the function was opted into beyond the default, in bytes.
    opted_in: Mutex<u32>,
    /// What a launch of it leaves for a fault report to name.
    pub launch: LastLaunch,
}

/// The function a launch stub's kernel was launched with last, with its device (each stub has
/// one, a static: see [`launch`](crate::launch)): the next launch of the kernel on that device
/// takes it from here, without the device's modules lock and the look down its modules (a
/// program launching on one device always finds it here).
#[doc(hidden)]
pub struct FunctionSlot(AtomicPtr<LoadedFunction>);

impl FunctionSlot {
    pub const fn new() -> FunctionSlot {
        FunctionSlot(AtomicPtr::new(std::ptr::null_mut()))
    }

    /// The function it holds, if it is `kernel` of `binary` on `device`.
    fn get(
        &self,
        device: &Device,
        binary: &'static Binary,
        kernel: &'static str,
    ) -> Option<&'static LoadedFunction> {
        // SAFETY: null or a `&'static LoadedFunction` that `set` stored (released there, so its
        // fields are seen written), never written through.
        let function = unsafe { self.0.load(Ordering::Acquire).as_ref() }?;
        (function.device.is_same(device)
            && std::ptr::eq(function.launch.binary, binary)
            && (std::ptr::eq(function.launch.kernel, kernel) || function.launch.kernel == kernel))
            .then_some(function)
    }

    fn set(&self, function: &'static LoadedFunction) {
        let pointer = (function as *const LoadedFunction).cast_mut();
        self.0.store(pointer, Ordering::Release);
    }
}

impl Default for FunctionSlot {
    fn default() -> FunctionSlot {
        FunctionSlot::new()
    }
}

impl LoadedFunction {
    /// Opts the function into `bytes` of dynamic shared memory per block unless it has that
    /// much already. The allowance only grows (under the lock), so a launch another thread
    /// prepared keeps what it asked for.
    pub(crate) fn allow_dynamic_shared(&self, driver: &dyn Driver, bytes: u32) -> Result<()> {
        let mut opted_in = self.opted_in.lock().unwrap_or_else(|p| p.into_inner());
        if bytes > *opted_in {
            driver.allow_dynamic_shared(&self.handle, bytes)?;
            *opted_in = bytes;
        }
        Ok(())
    }
}

impl Device {
    /// [`Device::function`], taken from `slot` when it holds it, kept there otherwise.
    pub(crate) fn slotted_function(
        &self,
        slot: &FunctionSlot,
        driver: &dyn Driver,
        binary: &'static Binary,
        kernel: &'static str,
    ) -> Result<&'static LoadedFunction> {
        if let Some(function) = slot.get(self, binary, kernel) {
            return Ok(function);
        }
        let function = self.function(driver, binary, kernel)?;
        slot.set(function);
        Ok(function)
    }

    /// The kernel's function, loading the binary's best object onto this device the first time.
    /// `driver` is this device's, already current (see [`Device::current`]).
    pub(crate) fn function(
        &self,
        driver: &dyn Driver,
        binary: &'static Binary,
        kernel: &'static str,
    ) -> Result<&'static LoadedFunction> {
        let mut modules = self.inner.modules.lock().unwrap_or_else(|p| p.into_inner());
        let loaded = self.loaded(&mut modules, driver, binary)?;
        if let Some(&(_, function)) = loaded.functions.iter().find(|(name, _)| *name == kernel) {
            return Ok(function);
        }
        let object = loaded.object;
        if let Some(reason) = object.refusal(kernel) {
            return Err(refused(binary, object, kernel, reason, self.name()));
        }
        let in_object = |e: Error| {
            e.map_message(|message| {
                format!("{message} in {} on {}", object.describe(), self.name())
            })
        };
        let handle = driver.function(&loaded.module, kernel).map_err(in_object)?;
        let attributes = driver
            .attributes(&handle, self.limits())
            .map_err(in_object)?;
        // Leaked on purpose: a function lives as long as its module, for the process.
        let function: &'static LoadedFunction = Box::leak(Box::new(LoadedFunction {
            device: self.clone(),
            handle,
            attributes,
            opted_in: Mutex::new(0),
            launch: LastLaunch { binary, kernel },
        }));
        loaded.functions.push((kernel, function));
        Ok(function)
    }

    /// Loads the binary's best object onto this device unless it is loaded already. `driver`
    /// is this device's, already current.
    pub(crate) fn load(&self, driver: &dyn Driver, binary: &'static Binary) -> Result<()> {
        let mut modules = self.inner.modules.lock().unwrap_or_else(|p| p.into_inner());
        self.loaded(&mut modules, driver, binary).map(|_| ())
    }

    /// The binary's loaded module, loading it the first time.
    fn loaded<'m>(
        &self,
        modules: &'m mut Vec<Loaded>,
        driver: &dyn Driver,
        binary: &'static Binary,
    ) -> Result<&'m mut Loaded> {
        let address = binary as *const Binary as usize;
        Ok(
            match modules.iter().position(|loaded| loaded.binary == address) {
                Some(index) => &mut modules[index],
                None => {
                    let object = select(binary, &self.arch())
                        .map_err(|e| Error::new(ErrorKind::NoFittingObject, e.to_string()))?;
                    #[cfg(feature = "tracing")]
                    let started = std::time::Instant::now();
                    let module = driver.load_module(object).map_err(|e| {
                        e.map_message(|message| {
                            format!(
                                "{message} of gpu.module @{} on {}",
                                binary.name(),
                                self.name()
                            )
                        })
                    })?;
                    event!(
                        info,
                        device = self.name(),
                        module = binary.name(),
                        object = %object.describe(),
                        ms = started.elapsed().as_secs_f64() * 1e3,
                        "module loaded"
                    );
                    let index = modules.len();
                    modules.push(Loaded {
                        binary: address,
                        module,
                        object,
                        functions: Vec::new(),
                    });
                    &mut modules[index]
                }
            },
        )
    }
}

/// A launch of a kernel the object for this device leaves out, in three lines: which kernel and
/// object, the build's reason (its first line: where and what), and the way out.
fn refused(binary: &Binary, object: &Object, kernel: &str, reason: &str, device: &str) -> Error {
    let vendor = object.vendor();
    let mut others: Vec<String> = binary
        .objects()
        .iter()
        .map(|o| o.vendor())
        .filter(|&v| v != vendor)
        .map(|v| v.to_string())
        .collect();
    others.sort_unstable();
    others.dedup();
    let elsewhere = if others.is_empty() {
        format!(
            "build gpu.module @{} for a target that takes it",
            binary.name()
        )
    } else {
        format!(
            "launch it on a device of the module's other targets ({})",
            others.join(", ")
        )
    };
    Error::new(
        ErrorKind::NoFittingObject,
        format!(
            "kernel `{kernel}` of gpu.module @{} was not built for {vendor} ({}), the target of \
             {device}; the build refused it:\n  {}\n  {elsewhere}, or write it with what \
             {vendor} takes",
            binary.name(),
            object.chip(),
            reason.lines().next().unwrap_or(reason).trim()
        ),
    )
}
