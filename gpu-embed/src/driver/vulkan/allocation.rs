//! Device memory: each `VkBuffer` with its own memory (`Allocation`), and a device's allocation
//! table: the synthetic device addresses of its allocations, the bytes allocated, the pool of
//! small staging buffers kept for reuse and the buffer that views without elements are bound
//! to. Built on the device core (`setup.rs`) alone.

use super::errors::{check, invalid, lock, vk_error};
use super::setup::Core;
use crate::error::{Error, ErrorKind, Result};
use ash::vk;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

/// Alignment (and granule) of the addresses handed out.
const ADDRESS_ALIGNMENT: u64 = 256;
/// The size of the small staging buffers that are recycled (scalar arguments, small uploads).
const SMALL_STAGING: u64 = 4096;
/// How many small staging buffers are kept for reuse at most.
const STAGING_POOL_LIMIT: usize = 256;

/// A small staging buffer whose last submission has run, kept for reuse: its handles and
/// mapping.
struct PooledStaging {
    buffer: vk::Buffer,
    memory: vk::DeviceMemory,
    mapped: *mut u8,
}

// SAFETY: plain handles and a mapping no one uses while the buffer is in the pool.
unsafe impl Send for PooledStaging {}

/// One `VkBuffer` with its own memory: a device allocation (with its address) or a staging /
/// argument buffer (host-visible, mapped, no address). Destroyed when the last reference goes:
/// the table's, and those of submissions still using it.
pub(crate) struct Allocation {
    core: &'static Core,
    /// The table of the device, whose pool and count the buffer returns to.
    table: &'static Table,
    pub buffer: vk::Buffer,
    memory: vk::DeviceMemory,
    pub size: u64,
    /// The mapped bytes of a host-visible buffer.
    mapped: Option<*mut u8>,
    /// Counted in the device's allocated bytes.
    counted: bool,
    /// A small staging buffer, returned to the device's pool instead of destroyed.
    recycled: bool,
}

// SAFETY: the handles are plain identifiers the driver lets any thread use; the mapped pointer is
// written only by the thread that made the staging buffer, before its submission (the queue
// submission orders it), and read back only after the submission has completed.
unsafe impl Send for Allocation {}
// SAFETY: as above.
unsafe impl Sync for Allocation {}

impl Allocation {
    /// The mapped bytes of a host-visible buffer (`None` for device-local ones).
    pub(crate) fn mapped(&self) -> Option<*mut u8> {
        self.mapped
    }
}

impl Drop for Allocation {
    fn drop(&mut self) {
        if let (true, Some(mapped)) = (self.recycled, self.mapped) {
            let mut pool = lock(&self.table.staging_pool);
            if pool.len() < STAGING_POOL_LIMIT {
                // The last reference: no submission uses the buffer any more.
                pool.push(PooledStaging {
                    buffer: self.buffer,
                    memory: self.memory,
                    mapped,
                });
                return;
            }
        }
        // SAFETY: the last reference: no submission still uses the buffer (each keeps one until
        // it has run); memory is unmapped by `vkFreeMemory`.
        unsafe {
            self.core.device.destroy_buffer(self.buffer, None);
            self.core.device.free_memory(self.memory, None);
        }
        if self.counted {
            self.table
                .allocated_bytes
                .fetch_sub(self.size, Ordering::Relaxed);
        }
    }
}

/// Where a device address points: an allocation, and the byte offset in its buffer.
pub(crate) struct Place {
    pub allocation: Arc<Allocation>,
    pub offset: u64,
}

/// One device's allocation table, with what its buffers share.
pub(crate) struct Table {
    /// Live allocations by their first address.
    allocations: Mutex<BTreeMap<u64, Arc<Allocation>>>,
    /// The next address to hand out (never reused).
    next_address: Mutex<u64>,
    allocated_bytes: AtomicU64,
    /// A small buffer bound for views without elements.
    empty: OnceLock<Result<Arc<Allocation>>>,
    /// Small host-visible buffers whose submissions have run, kept for the next small upload or
    /// launch's arguments (making one costs a buffer, an allocation and a mapping).
    staging_pool: Mutex<Vec<PooledStaging>>,
}

impl Table {
    pub(crate) fn new() -> Table {
        Table {
            allocations: Mutex::new(BTreeMap::new()),
            // Far from zero, so no address looks like a null pointer or a small integer.
            next_address: Mutex::new(1 << 32),
            allocated_bytes: AtomicU64::new(0),
            empty: OnceLock::new(),
            staging_pool: Mutex::new(Vec::new()),
        }
    }

    /// The bytes of the device's live allocations (staging buffers aside).
    pub(crate) fn allocated_bytes(&self) -> u64 {
        self.allocated_bytes.load(Ordering::Relaxed)
    }

    /// A buffer of `bytes` on `core` (the device of this table) with its own memory:
    /// device-local (`host == false`) or host-visible and mapped.
    pub(crate) fn buffer(
        &'static self,
        core: &'static Core,
        bytes: u64,
        host: bool,
    ) -> Result<Allocation> {
        if bytes == 0 {
            return Err(invalid("a Vulkan buffer of 0 bytes"));
        }
        if bytes > core.checks.max_allocation {
            return Err(Error::new(
                ErrorKind::OutOfMemory,
                format!(
                    "cannot allocate {bytes} bytes: {} allows at most {} bytes in one allocation \
                     (maxMemoryAllocationSize)",
                    core.name, core.checks.max_allocation
                ),
            ));
        }
        let mut usage = vk::BufferUsageFlags::STORAGE_BUFFER
            | vk::BufferUsageFlags::TRANSFER_SRC
            | vk::BufferUsageFlags::TRANSFER_DST;
        // A device allocation has an address a kernel's pointer argument may hold
        // (`VulkanBindingKind::Address`), where the device supports them.
        let addressed = !host && core.support.buffer_device_address;
        if addressed {
            usage |= vk::BufferUsageFlags::SHADER_DEVICE_ADDRESS;
        }
        let info = vk::BufferCreateInfo::default()
            .size(bytes)
            .usage(usage)
            .sharing_mode(vk::SharingMode::EXCLUSIVE);
        let device = &core.device;
        // SAFETY: a valid create info on a live device.
        let buffer = check(unsafe { device.create_buffer(&info, None) }, || {
            format!("allocating {bytes} bytes (vkCreateBuffer)")
        })?;
        // SAFETY: the buffer made above.
        let requirements = unsafe { device.get_buffer_memory_requirements(buffer) };
        let (wanted, fallback) = if host {
            (
                vk::MemoryPropertyFlags::HOST_VISIBLE
                    | vk::MemoryPropertyFlags::HOST_COHERENT
                    | vk::MemoryPropertyFlags::HOST_CACHED,
                vk::MemoryPropertyFlags::HOST_VISIBLE | vk::MemoryPropertyFlags::HOST_COHERENT,
            )
        } else {
            (
                vk::MemoryPropertyFlags::DEVICE_LOCAL,
                vk::MemoryPropertyFlags::empty(),
            )
        };
        let destroy_buffer = || {
            // SAFETY: the buffer made above, never used.
            unsafe { device.destroy_buffer(buffer, None) }
        };
        let Some(memory_type) = core.memory_type(requirements.memory_type_bits, wanted, fallback)
        else {
            destroy_buffer();
            return Err(Error::new(
                ErrorKind::NotSupported,
                format!(
                    "{}: no memory type for a buffer of {bytes} bytes",
                    core.name
                ),
            ));
        };
        let mut flags =
            vk::MemoryAllocateFlagsInfo::default().flags(vk::MemoryAllocateFlags::DEVICE_ADDRESS);
        let mut allocate = vk::MemoryAllocateInfo::default()
            .allocation_size(requirements.size)
            .memory_type_index(memory_type);
        if addressed {
            allocate = allocate.push_next(&mut flags);
        }
        // SAFETY: a valid allocate info on a live device.
        let memory = match unsafe { device.allocate_memory(&allocate, None) } {
            Ok(memory) => memory,
            Err(e) => {
                destroy_buffer();
                return Err(vk_error(e, format!("allocating {bytes} bytes")));
            }
        };
        let free = || {
            destroy_buffer();
            // SAFETY: the memory allocated above, never used.
            unsafe { device.free_memory(memory, None) };
        };
        // SAFETY: a fresh buffer and memory of its requirements' size and type.
        if let Err(e) = unsafe { device.bind_buffer_memory(buffer, memory, 0) } {
            free();
            return Err(vk_error(e, "vkBindBufferMemory"));
        }
        let mapped = if host {
            // SAFETY: host-visible memory, mapped once for its whole life.
            match unsafe {
                device.map_memory(memory, 0, vk::WHOLE_SIZE, vk::MemoryMapFlags::empty())
            } {
                Ok(pointer) => Some(pointer.cast::<u8>()),
                Err(e) => {
                    free();
                    return Err(vk_error(e, "vkMapMemory"));
                }
            }
        } else {
            None
        };
        Ok(Allocation {
            core,
            table: self,
            buffer,
            memory,
            size: bytes,
            mapped,
            counted: false,
            recycled: false,
        })
    }

    /// A device allocation of `bytes` on `core` (the device of this table), at a fresh address.
    pub(crate) fn alloc(&'static self, core: &'static Core, bytes: usize) -> Result<u64> {
        if bytes == 0 {
            return Err(invalid("allocating 0 bytes"));
        }
        let size = bytes as u64;
        let mut allocation = self.buffer(core, size, false)?;
        let address = {
            let mut next = lock(&self.next_address);
            let address = *next;
            // A gap after each allocation: the address just past one never lies in the next.
            let following = address
                .checked_add(size)
                .and_then(|end| end.checked_add(2 * ADDRESS_ALIGNMENT - 1))
                .map(|end| end & !(ADDRESS_ALIGNMENT - 1));
            let Some(following) = following else {
                return Err(Error::new(
                    ErrorKind::OutOfMemory,
                    format!("{}: the device address range is used up", core.name),
                ));
            };
            *next = following;
            address
        };
        allocation.counted = true;
        self.allocated_bytes.fetch_add(size, Ordering::Relaxed);
        lock(&self.allocations).insert(address, Arc::new(allocation));
        Ok(address)
    }

    /// Forgets the allocation at `address`; its buffer goes when the last submission using it
    /// has run.
    pub(crate) fn free(&self, address: u64) {
        lock(&self.allocations).remove(&address);
    }

    /// The allocation holding `bytes` bytes from `address`.
    pub(crate) fn place(&self, address: u64, bytes: u64) -> Result<Place> {
        let allocations = lock(&self.allocations);
        let found = allocations.range(..=address).next_back();
        let Some((&start, allocation)) = found else {
            return Err(unknown_address(address));
        };
        let offset = address - start;
        if offset >= allocation.size {
            return Err(unknown_address(address));
        }
        if offset
            .checked_add(bytes)
            .is_none_or(|end| end > allocation.size)
        {
            return Err(invalid(format!(
                "{bytes} bytes from device address {address:#x} run past the end of its \
                 allocation of {} bytes (at {start:#x})",
                allocation.size
            )));
        }
        Ok(Place {
            allocation: Arc::clone(allocation),
            offset,
        })
    }

    /// A small buffer on `core` (the device of this table) that views without elements are
    /// bound to.
    pub(crate) fn empty_buffer(&'static self, core: &'static Core) -> Result<Arc<Allocation>> {
        self.empty
            .get_or_init(|| self.buffer(core, ADDRESS_ALIGNMENT, false).map(Arc::new))
            .clone()
    }

    /// A host-visible buffer on `core` (the device of this table) holding `bytes` (for uploads
    /// and scalar arguments); small ones come from the table's pool of recycled buffers.
    pub(crate) fn staging_with(
        &'static self,
        core: &'static Core,
        bytes: &[u8],
    ) -> Result<Arc<Allocation>> {
        let small = bytes.len() as u64 <= SMALL_STAGING;
        let pooled = if small {
            lock(&self.staging_pool).pop()
        } else {
            None
        };
        let staging = match pooled {
            Some(pooled) => Allocation {
                core,
                table: self,
                buffer: pooled.buffer,
                memory: pooled.memory,
                size: SMALL_STAGING,
                mapped: Some(pooled.mapped),
                counted: false,
                recycled: true,
            },
            None if small => {
                let mut fresh = self.buffer(core, SMALL_STAGING, true)?;
                fresh.recycled = true;
                fresh
            }
            None => self.buffer(core, bytes.len() as u64, true)?,
        };
        if let Some(mapped) = staging.mapped {
            // SAFETY: the mapping holds at least `bytes.len()` bytes; nothing else uses the fresh
            // buffer.
            unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), mapped, bytes.len()) };
        }
        Ok(Arc::new(staging))
    }
}

fn unknown_address(address: u64) -> Error {
    invalid(format!(
        "device address {address:#x} is not in any live allocation of this Vulkan device (freed, \
         or never allocated here)"
    ))
}
