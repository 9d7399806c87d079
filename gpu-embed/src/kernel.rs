//! Kernel handles: a generated module's kernel loaded on a device, with what the driver knows
//! about it and launch configurations from occupancy.

use crate::binary::Binary;
use crate::device::Device;
use crate::driver::KernelAttributes;
use crate::error::{Error, ErrorKind, Result};
use crate::launch::LaunchConfig;

impl Binary {
    /// Loads the object selection picks for `device` now, as the first launch would (a driver
    /// compiling PTX included), so that no launch pays for it. What is made per kernel (its
    /// function; on Vulkan its pipeline, where the driver compiles the shader) comes with
    /// [`Binary::kernel`].
    pub fn load(&'static self, device: &Device) -> Result<()> {
        let driver = device.current()?;
        device.load(&*driver, self)
    }

    /// The kernel `name` of this module on `device`, made ready to launch (its module loaded,
    /// its function and, on Vulkan, its pipeline made) if it was not yet.
    pub fn kernel(&'static self, device: &Device, name: &str) -> Result<Kernel> {
        let name = self
            .kernels()
            .iter()
            .copied()
            .find(|kernel| *kernel == name)
            .ok_or_else(|| {
                Error::new(
                    ErrorKind::InvalidArgument,
                    format!(
                        "gpu.module @{} has no kernel `{name}`; it has {:?}",
                        self.name(),
                        self.kernels()
                    ),
                )
            })?;
        let driver = device.current()?;
        let function = device.function(&*driver, self, name)?;
        Ok(Kernel {
            device: device.clone(),
            binary: self,
            name,
            attributes: function.attributes.clone(),
        })
    }
}

/// A kernel loaded on one device (`vadd::BINARY.kernel(&device, "vadd")`): its attributes and
/// launch configurations chosen from them. Launch it through its generated stub as before.
#[derive(Debug, Clone)]
pub struct Kernel {
    device: Device,
    binary: &'static Binary,
    name: &'static str,
    attributes: KernelAttributes,
}

impl Kernel {
    /// The kernel's name.
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// The device it is loaded on.
    pub fn device(&self) -> &Device {
        &self.device
    }

    /// What the driver reports for it: threads per block, its own shared memory, local memory,
    /// registers (CUDA, HIP: `cuFuncGetAttribute`, `hipFuncGetAttribute`); Vulkan: its compiled
    /// workgroup size and memory; the host: the device's limits.
    pub fn attributes(&self) -> &KernelAttributes {
        &self.attributes
    }

    /// The block size (threads) that keeps the most of the device busy with `dynamic_shared`
    /// bytes of dynamic shared memory per block, and the smallest grid that fills the device
    /// with it: CUDA's and HIP's occupancy calculators; Vulkan: the compiled workgroup size; the
    /// host: 256 threads (whole subgroups) and a block per core.
    pub fn potential_block_size(&self, dynamic_shared: u32) -> Result<(u32, u32)> {
        let driver = self.device.current()?;
        let function = self.device.function(&*driver, self.binary, self.name)?;
        driver
            .potential_block_size(&function.handle, dynamic_shared, self.device.limits())
            .map_err(|e| self.device.context(e))
    }

    /// A 1-D launch of enough blocks to cover `elements` threads, each block of the size
    /// occupancy suggests (a Vulkan kernel's compiled workgroup size), on the default stream.
    pub fn config_for_elements(&self, elements: usize) -> Result<LaunchConfig> {
        let block = match self.attributes.required_block {
            Some([x, 1, 1]) => x,
            Some(block) => {
                return Err(Error::new(
                    ErrorKind::InvalidArgument,
                    format!(
                        "kernel `{}` was compiled for blocks of {block:?} threads, not a 1-D \
                         block; build its LaunchConfig with that block",
                        self.name
                    ),
                ))
            }
            None => self.potential_block_size(0)?.0,
        };
        let blocks = elements.div_ceil(block.max(1) as usize).max(1);
        let grid = u32::try_from(blocks).map_err(|_| {
            Error::new(
                ErrorKind::InvalidArgument,
                format!(
                    "{elements} elements need {blocks} blocks of {block}, more than a grid holds"
                ),
            )
        })?;
        Ok(LaunchConfig {
            grid: [grid, 1, 1],
            block: [block, 1, 1],
            shared_mem_bytes: 0,
        })
    }
}
