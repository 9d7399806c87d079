//! Device memory: buffers behind synthetic device addresses (the allocation table), staging
//! buffers for copies with the host, fills, and page-aligned host memory.

use super::setup::Gpu;
use super::stream::Stream;
use super::{check, invalid, lock, vk_error};
use crate::driver::Pattern;
use crate::error::{Error, ErrorKind, Result};
use ash::vk;
use std::alloc::Layout;
use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

/// Alignment (and granule) of the addresses handed out.
const ADDRESS_ALIGNMENT: u64 = 256;
/// The size of the small staging buffers that are recycled (scalar arguments, small uploads).
const SMALL_STAGING: u64 = 4096;
/// How many small staging buffers are kept for reuse at most.
const STAGING_POOL_LIMIT: usize = 256;

/// A small staging buffer whose last submission has run, kept for reuse: its handles and
/// mapping.
pub(crate) struct PooledStaging {
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
    gpu: &'static Gpu,
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

impl Drop for Allocation {
    fn drop(&mut self) {
        if let (true, Some(mapped)) = (self.recycled, self.mapped) {
            let mut pool = lock(&self.gpu.staging_pool);
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
            self.gpu.device.destroy_buffer(self.buffer, None);
            self.gpu.device.free_memory(self.memory, None);
        }
        if self.counted {
            self.gpu
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

impl Gpu {
    /// The first memory type allowed by `bits` with all of `wanted` (then with `fallback`).
    fn memory_type(
        &self,
        bits: u32,
        wanted: vk::MemoryPropertyFlags,
        fallback: vk::MemoryPropertyFlags,
    ) -> Option<u32> {
        let types = &self.memory_properties.memory_types
            [..self.memory_properties.memory_type_count as usize];
        let find = |flags: vk::MemoryPropertyFlags| {
            types
                .iter()
                .enumerate()
                .find(|(index, t)| bits & (1 << index) != 0 && t.property_flags.contains(flags))
                .map(|(index, _)| index as u32)
        };
        find(wanted).or_else(|| find(fallback))
    }

    /// A buffer of `bytes` with its own memory: device-local (`host == false`) or host-visible
    /// and mapped.
    pub(crate) fn buffer(&'static self, bytes: u64, host: bool) -> Result<Allocation> {
        if bytes == 0 {
            return Err(invalid("a Vulkan buffer of 0 bytes"));
        }
        if bytes > self.checks.max_allocation {
            return Err(Error::new(
                ErrorKind::OutOfMemory,
                format!(
                    "cannot allocate {bytes} bytes: {} allows at most {} bytes in one allocation \
                     (maxMemoryAllocationSize)",
                    self.name, self.checks.max_allocation
                ),
            ));
        }
        let usage = vk::BufferUsageFlags::STORAGE_BUFFER
            | vk::BufferUsageFlags::TRANSFER_SRC
            | vk::BufferUsageFlags::TRANSFER_DST;
        let info = vk::BufferCreateInfo::default()
            .size(bytes)
            .usage(usage)
            .sharing_mode(vk::SharingMode::EXCLUSIVE);
        let device = &self.device;
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
        let Some(memory_type) = self.memory_type(requirements.memory_type_bits, wanted, fallback)
        else {
            destroy_buffer();
            return Err(Error::new(
                ErrorKind::NotSupported,
                format!(
                    "{}: no memory type for a buffer of {bytes} bytes",
                    self.name
                ),
            ));
        };
        let allocate = vk::MemoryAllocateInfo::default()
            .allocation_size(requirements.size)
            .memory_type_index(memory_type);
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
            gpu: self,
            buffer,
            memory,
            size: bytes,
            mapped,
            counted: false,
            recycled: false,
        })
    }

    /// A device allocation of `bytes`, at a fresh address.
    pub(crate) fn alloc(&'static self, bytes: usize) -> Result<u64> {
        if bytes == 0 {
            return Err(invalid("allocating 0 bytes"));
        }
        let size = bytes as u64;
        let mut allocation = self.buffer(size, false)?;
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
                    format!("{}: the device address range is used up", self.name),
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

    /// A small buffer that views without elements are bound to.
    pub(crate) fn empty_buffer(&'static self) -> Result<Arc<Allocation>> {
        self.empty
            .get_or_init(|| self.buffer(ADDRESS_ALIGNMENT, false).map(Arc::new))
            .clone()
    }
}

fn unknown_address(address: u64) -> Error {
    invalid(format!(
        "device address {address:#x} is not in any live allocation of this Vulkan device (freed, \
         or never allocated here)"
    ))
}

/// A host-visible buffer holding `bytes` (for uploads and scalar arguments); small ones come from
/// the device's pool of recycled buffers.
pub(crate) fn staging_with(gpu: &'static Gpu, bytes: &[u8]) -> Result<Arc<Allocation>> {
    let small = bytes.len() as u64 <= SMALL_STAGING;
    let pooled = if small {
        lock(&gpu.staging_pool).pop()
    } else {
        None
    };
    let staging = match pooled {
        Some(pooled) => Allocation {
            gpu,
            buffer: pooled.buffer,
            memory: pooled.memory,
            size: SMALL_STAGING,
            mapped: Some(pooled.mapped),
            counted: false,
            recycled: true,
        },
        None if small => {
            let mut fresh = gpu.buffer(SMALL_STAGING, true)?;
            fresh.recycled = true;
            fresh
        }
        None => gpu.buffer(bytes.len() as u64, true)?,
    };
    if let Some(mapped) = staging.mapped {
        // SAFETY: the mapping holds at least `bytes.len()` bytes; nothing else uses the fresh
        // buffer.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), mapped, bytes.len()) };
    }
    Ok(Arc::new(staging))
}

fn copy_region(
    gpu: &Gpu,
    command_buffer: vk::CommandBuffer,
    from: (vk::Buffer, u64),
    to: (vk::Buffer, u64),
    bytes: u64,
) {
    let region = vk::BufferCopy {
        src_offset: from.1,
        dst_offset: to.1,
        size: bytes,
    };
    // SAFETY: a recording command buffer; both ranges lie in their buffers (checked by the
    // callers) and do not overlap (distinct buffers, or ranges the caller checked).
    unsafe {
        gpu.device
            .cmd_copy_buffer(command_buffer, from.0, to.0, &[region])
    };
}

/// Queues a copy of `bytes` host bytes into device memory at `target`: the bytes are staged now.
///
/// # Safety
/// `source` holds `bytes` readable bytes.
pub(crate) unsafe fn upload(
    stream: &Arc<Stream>,
    target: u64,
    source: *const u8,
    bytes: usize,
) -> Result<()> {
    if bytes == 0 {
        return Ok(());
    }
    let gpu = stream.gpu;
    let place = gpu.place(target, bytes as u64)?;
    // SAFETY: the caller guarantees `bytes` readable bytes.
    let data = unsafe { std::slice::from_raw_parts(source, bytes) };
    let staging = staging_with(gpu, data)?;
    stream.submit(|command_buffer, resources| {
        copy_region(
            gpu,
            command_buffer,
            (staging.buffer, 0),
            (place.allocation.buffer, place.offset),
            bytes as u64,
        );
        resources.buffers.push(staging.clone());
        resources.buffers.push(place.allocation.clone());
        Ok(())
    })?;
    Ok(())
}

/// Copies `bytes` from device memory at `source` to the host, in the stream's order; the copy
/// has run when this returns.
///
/// # Safety
/// `target` holds `bytes` writable bytes.
pub(crate) unsafe fn download(
    stream: &Arc<Stream>,
    target: *mut u8,
    source: u64,
    bytes: usize,
) -> Result<()> {
    if bytes == 0 {
        return Ok(());
    }
    let gpu = stream.gpu;
    let place = gpu.place(source, bytes as u64)?;
    let staging = Arc::new(gpu.buffer(bytes as u64, true)?);
    let value = stream.submit(|command_buffer, resources| {
        copy_region(
            gpu,
            command_buffer,
            (place.allocation.buffer, place.offset),
            (staging.buffer, 0),
            bytes as u64,
        );
        resources.buffers.push(staging.clone());
        resources.buffers.push(place.allocation.clone());
        Ok(())
    })?;
    stream.wait_until(value)?;
    if let Some(mapped) = staging.mapped {
        // SAFETY: the copy into the (coherent) staging memory has completed, and its command
        // buffer ended with a barrier making it visible to the host; the caller guarantees the
        // target.
        unsafe { std::ptr::copy_nonoverlapping(mapped.cast_const(), target, bytes) };
    }
    Ok(())
}

/// Queues a copy of `bytes` between two device ranges (which must not overlap, unless equal).
pub(crate) fn copy(stream: &Arc<Stream>, target: u64, source: u64, bytes: usize) -> Result<()> {
    if bytes == 0 || target == source {
        return Ok(());
    }
    let gpu = stream.gpu;
    let to = gpu.place(target, bytes as u64)?;
    let from = gpu.place(source, bytes as u64)?;
    if Arc::ptr_eq(&to.allocation, &from.allocation)
        && to.offset < from.offset + bytes as u64
        && from.offset < to.offset + bytes as u64
    {
        return Err(invalid(
            "copying on the device between overlapping ranges of one buffer",
        ));
    }
    stream.submit(|command_buffer, resources| {
        copy_region(
            gpu,
            command_buffer,
            (from.allocation.buffer, from.offset),
            (to.allocation.buffer, to.offset),
            bytes as u64,
        );
        resources.buffers.push(from.allocation.clone());
        resources.buffers.push(to.allocation.clone());
        Ok(())
    })?;
    Ok(())
}

/// Queues writing `pattern` `count` times from `target`: `vkCmdFillBuffer` of the pattern
/// replicated to 32 bits over the 4-byte-aligned middle, the unaligned edges copied from a
/// small staging buffer.
pub(crate) fn fill(
    stream: &Arc<Stream>,
    target: u64,
    pattern: Pattern,
    count: usize,
) -> Result<()> {
    let bytes = count
        .checked_mul(pattern.size())
        .ok_or_else(|| invalid("a fill larger than the address space"))? as u64;
    if bytes == 0 {
        return Ok(());
    }
    let gpu = stream.gpu;
    let place = gpu.place(target, bytes)?;
    let pattern_bytes: Vec<u8> = match pattern {
        Pattern::U8(v) => vec![v],
        Pattern::U16(v) => v.to_le_bytes().to_vec(),
        Pattern::U32(v) => v.to_le_bytes().to_vec(),
    };
    // Byte `i` of the fill.
    let byte = |i: u64| pattern_bytes[(i % pattern_bytes.len() as u64) as usize];
    // The head up to the next multiple of 4 of the buffer offset, the aligned middle, the tail.
    let head = ((4 - place.offset % 4) % 4).min(bytes);
    let middle = (bytes - head) / 4 * 4;
    let tail = bytes - head - middle;
    let word = u32::from_le_bytes([byte(head), byte(head + 1), byte(head + 2), byte(head + 3)]);
    let edges = if head + tail > 0 {
        let mut staged = [0u8; 8];
        for i in 0..head {
            staged[i as usize] = byte(i);
        }
        for i in 0..tail {
            staged[4 + i as usize] = byte(head + middle + i);
        }
        Some(staging_with(gpu, &staged)?)
    } else {
        None
    };
    stream.submit(|command_buffer, resources| {
        let buffer = place.allocation.buffer;
        if middle > 0 {
            // SAFETY: a recording command buffer; offset and size are multiples of 4 within
            // the buffer.
            unsafe {
                gpu.device.cmd_fill_buffer(
                    command_buffer,
                    buffer,
                    place.offset + head,
                    middle,
                    word,
                )
            };
        }
        if let Some(edges) = &edges {
            if head > 0 {
                copy_region(
                    gpu,
                    command_buffer,
                    (edges.buffer, 0),
                    (buffer, place.offset),
                    head,
                );
            }
            if tail > 0 {
                copy_region(
                    gpu,
                    command_buffer,
                    (edges.buffer, 4),
                    (buffer, place.offset + head + middle),
                    tail,
                );
            }
            resources.buffers.push(edges.clone());
        }
        resources.buffers.push(place.allocation.clone());
        Ok(())
    })?;
    Ok(())
}

/// Sizes of the page-aligned host allocations handed out, by address.
static PINNED: Mutex<Option<HashMap<usize, Layout>>> = Mutex::new(None);

const PAGE: usize = 4096;

pub(crate) fn alloc_pinned(bytes: usize) -> Result<*mut std::ffi::c_void> {
    let layout = Layout::from_size_align(bytes.max(1), PAGE).map_err(|_| {
        Error::new(
            ErrorKind::OutOfMemory,
            format!(
                "cannot allocate {bytes} bytes of host memory: more than the address space holds"
            ),
        )
    })?;
    // SAFETY: a layout of non-zero size.
    let pointer = unsafe { std::alloc::alloc(layout) };
    if pointer.is_null() {
        return Err(Error::new(
            ErrorKind::OutOfMemory,
            format!("out of host memory allocating {bytes} bytes"),
        ));
    }
    lock(&PINNED)
        .get_or_insert_with(HashMap::new)
        .insert(pointer as usize, layout);
    Ok(pointer.cast())
}

pub(crate) fn free_pinned(pointer: *mut std::ffi::c_void) {
    let layout = lock(&PINNED)
        .as_mut()
        .and_then(|sizes| sizes.remove(&(pointer as usize)));
    if let Some(layout) = layout {
        // SAFETY: allocated by `alloc_pinned` with this layout, freed once (its entry is gone).
        unsafe { std::alloc::dealloc(pointer.cast(), layout) };
    }
}
