//! Device memory in host memory. Device allocations get addresses the host cannot dereference
//! (non-canonical on x86-64, as a discrete GPU's are not host memory); managed and pinned
//! allocations are host memory at their own address, and registered host memory is the
//! caller's. Every range a call or queued work names is checked against a live allocation.

use super::{Code, Fault, Outcome, Vendor, World};
use crate::config::config;
use std::collections::BTreeMap;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemoryKind {
    Device,
    Managed,
    Pinned,
    Registered,
}

/// A fill's value and width.
#[derive(Debug, Clone, Copy)]
pub enum Pattern {
    U8(u8),
    U16(u16),
    U32(u32),
}

impl Pattern {
    /// The value's bytes, little-endian, and how many of them there are.
    fn bytes(self) -> ([u8; 4], usize) {
        match self {
            Pattern::U8(v) => ([v, 0, 0, 0], 1),
            Pattern::U16(v) => {
                let [a, b] = v.to_le_bytes();
                ([a, b, 0, 0], 2)
            }
            Pattern::U32(v) => (v.to_le_bytes(), 4),
        }
    }

    /// The bytes `count` values fill; an error where that overflows.
    pub(super) fn span_bytes(self, count: usize) -> Outcome<usize> {
        let width = self.bytes().1;
        width.checked_mul(count).ok_or_else(|| {
            Fault::violation(
                Code::InvalidValue,
                format!("{count} {width}-byte values overflow"),
            )
        })
    }
}

struct Allocation {
    number: u64,
    kind: MemoryKind,
    /// The device it lives on; none for pinned and registered host memory, which every device
    /// reaches.
    device: Option<usize>,
    bytes: usize,
    /// Device and managed memory, pinned memory: the bytes (the latter two at the address
    /// handed out). Registered memory is the caller's.
    storage: Option<Box<[u8]>>,
    /// Registered memory: the caller's host address (the allocation's base is where devices see
    /// it, the same or, where the driver maps it elsewhere, one of the double's device addresses).
    host: Option<u64>,
}

#[derive(Default)]
pub(super) struct Memory {
    /// Live allocations by base address.
    live: BTreeMap<u64, Allocation>,
    /// Freed ones: (base, bytes, number), for "used after free".
    freed: Vec<(u64, usize, u64)>,
    next_number: u64,
    /// The next device address per vendor.
    next_device_address: [u64; 2],
}

/// Marks the base of a mapped registration made without the flag that maps it: far above any
/// other device address, so it matches no range a caller could name.
const MAPPED_ONLY_BY_FLAG: u64 = 0x0000_8000_0000_0000;

/// Uninitialized device memory reads as this byte (compute-sanitizer's initcheck finds such reads
/// on a GPU; here they are at least not zeros by luck).
const UNINITIALIZED: u8 = 0xcd;

fn device_base(vendor: Vendor) -> u64 {
    match vendor {
        Vendor::Cuda => 0xc0de_0000_0000_0000,
        Vendor::Hip => 0xa3d0_0000_0000_0000,
    }
}

/// Whether `address` is one of the double's device addresses.
pub(super) fn is_device_address(address: u64) -> bool {
    address >= device_base(Vendor::Hip)
}

impl World {
    pub fn allocate(&mut self, device: usize, bytes: usize, kind: MemoryKind) -> Outcome<u64> {
        self.refuse_during_capture("allocating memory")?;
        if bytes == 0 {
            return Err(Fault::violation(
                Code::InvalidValue,
                "an allocation of 0 bytes",
            ));
        }
        let state = &self.devices[device];
        let device_memory = matches!(kind, MemoryKind::Device | MemoryKind::Managed);
        if device_memory && state.memory_used.saturating_add(bytes as u64) > config().memory {
            return Err(Fault::expected(
                Code::OutOfMemory,
                format!(
                    "{bytes} bytes: {} of {} in use",
                    state.memory_used,
                    config().memory
                ),
            ));
        }
        let storage = vec![UNINITIALIZED; bytes].into_boxed_slice();
        let base = match kind {
            MemoryKind::Device => {
                let vendor = state.vendor;
                self.next_device_base(vendor, bytes)
            }
            _ => storage.as_ptr() as u64,
        };
        // A host address freed and handed out again is no longer "freed".
        self.memory
            .freed
            .retain(|(b, n, _)| base + bytes as u64 <= *b || *b + *n as u64 <= base);
        if device_memory {
            self.devices[device].memory_used += bytes as u64;
        }
        self.memory.next_number += 1;
        let owner = device_memory.then_some(device);
        self.memory.live.insert(
            base,
            Allocation {
                number: self.memory.next_number,
                kind,
                device: owner,
                bytes,
                storage: Some(storage),
                host: None,
            },
        );
        Ok(base)
    }

    /// Frees the allocation at `base` of one of `kinds`; queued work is run first, as the vendors'
    /// frees wait for the device.
    pub fn free(&mut self, base: u64, kinds: &[MemoryKind]) -> Outcome<()> {
        self.refuse_during_capture("freeing memory")?;
        match self.memory.live.get(&base) {
            Some(a) if kinds.contains(&a.kind) => {}
            Some(a) => {
                return Err(Fault::violation(
                    Code::InvalidValue,
                    format!("{base:#x} is {:?} memory, not freed this way", a.kind),
                ))
            }
            None => return Err(self.no_allocation(base, 0)),
        }
        self.synchronize_all();
        let Some(allocation) = self.memory.live.remove(&base) else {
            return Err(self.no_allocation(base, 0));
        };
        if let Some(device) = allocation.device {
            self.devices[device].memory_used -= allocation.bytes as u64;
        }
        self.memory
            .freed
            .push((base, allocation.bytes, allocation.number));
        Ok(())
    }

    /// Registers `bytes` of host memory at `host`. `mapped`: devices see it at an address of
    /// their own (a driver without unified addressing for it), which `device_address` gives
    /// when it was registered for that (`mappable`).
    pub fn register(
        &mut self,
        vendor: Vendor,
        host: u64,
        bytes: usize,
        mappable: bool,
    ) -> Outcome<()> {
        if host == 0 || bytes == 0 {
            return Err(Fault::violation(
                Code::InvalidValue,
                "registering a null pointer or 0 bytes",
            ));
        }
        let end = host + bytes as u64;
        let overlaps = self.memory.live.iter().any(|(b, a)| {
            let start = a.host.unwrap_or(*b);
            start < end && host < start + a.bytes as u64
        });
        if overlaps {
            return Err(Fault::violation(
                Code::HostAlreadyRegistered,
                format!("{host:#x} overlaps memory already registered or allocated"),
            ));
        }
        let base = if config().mapped_registrations.contains(&vendor) {
            if !mappable {
                // Kept, but with no device address: `device_address` refuses it.
                self.next_device_base(vendor, bytes) | MAPPED_ONLY_BY_FLAG
            } else {
                self.next_device_base(vendor, bytes)
            }
        } else {
            host
        };
        self.memory.next_number += 1;
        self.memory.live.insert(
            base,
            Allocation {
                number: self.memory.next_number,
                kind: MemoryKind::Registered,
                device: None,
                bytes,
                storage: None,
                host: Some(host),
            },
        );
        Ok(())
    }

    /// The registered allocation whose host range holds `host`: (base, its host address).
    fn registration(&self, host: u64) -> Option<(u64, u64)> {
        self.memory.live.iter().find_map(|(base, a)| {
            let start = a.host?;
            (start <= host && host < start + a.bytes as u64).then_some((*base, start))
        })
    }

    /// Where devices see registered host memory at `host`.
    pub fn device_address(&self, host: u64) -> Outcome<u64> {
        let Some((base, start)) = self.registration(host) else {
            return Err(Fault::violation(
                Code::InvalidValue,
                format!("{host:#x} is not registered host memory"),
            ));
        };
        if base & MAPPED_ONLY_BY_FLAG != 0 {
            return Err(Fault::violation(
                Code::InvalidValue,
                format!("{host:#x} was registered without the flag that maps it for devices"),
            ));
        }
        Ok(base + (host - start))
    }

    pub fn unregister(&mut self, host: u64) -> Outcome<()> {
        match self.registration(host) {
            Some((_, start)) if start == host => {}
            _ => {
                return Err(Fault::violation(
                    Code::HostNotRegistered,
                    format!("{host:#x} is not the start of registered memory"),
                ))
            }
        }
        self.synchronize_all();
        if let Some((base, _)) = self.registration(host) {
            if let Some(allocation) = self.memory.live.remove(&base) {
                self.memory
                    .freed
                    .push((base, allocation.bytes, allocation.number));
            }
        }
        Ok(())
    }

    /// A fresh range of `vendor`'s device addresses for `bytes`, never handed out again.
    fn next_device_base(&mut self, vendor: Vendor, bytes: usize) -> u64 {
        let slot = vendor as usize;
        if self.memory.next_device_address[slot] == 0 {
            self.memory.next_device_address[slot] = device_base(vendor);
        }
        let base = self.memory.next_device_address[slot];
        // 512-byte aligned, as cuMemAlloc's are at least.
        self.memory.next_device_address[slot] += (bytes as u64).div_ceil(512) * 512 + 512;
        base
    }

    /// Why `[address, address + bytes)` is in no live allocation.
    fn no_allocation(&self, address: u64, bytes: usize) -> Fault {
        let end = address.saturating_add(bytes as u64);
        if let Some((base, allocation)) = self.memory.live.range(..=address).next_back() {
            let limit = base + allocation.bytes as u64;
            if address < limit {
                return Fault::violation(Code::IllegalAddress, format!("{bytes} bytes at {address:#x} run {} bytes past the end of allocation #{} ({} bytes at {base:#x})", end - limit, allocation.number, allocation.bytes));
            }
        }
        if let Some((base, size, number)) = self
            .memory
            .freed
            .iter()
            .rev()
            .find(|(b, n, _)| *b <= address && address < b + *n as u64)
        {
            return Fault::violation(Code::IllegalAddress, format!("{address:#x} is in allocation #{number} ({size} bytes at {base:#x}), already freed"));
        }
        Fault::violation(
            Code::IllegalAddress,
            format!("{address:#x} is in no allocation"),
        )
    }

    /// The host bytes behind `[address, address + bytes)`, which `device` (none: the host) must be
    /// able to reach: device memory only from its own device or a peer with access enabled.
    pub(super) fn span(
        &mut self,
        address: u64,
        bytes: usize,
        device: Option<usize>,
    ) -> Outcome<*mut u8> {
        let Some((&base, allocation)) = self.memory.live.range_mut(..=address).next_back() else {
            return Err(self.no_allocation(address, bytes));
        };
        let offset = (address - base) as usize;
        if offset
            .checked_add(bytes)
            .is_none_or(|end| end > allocation.bytes)
        {
            return Err(self.no_allocation(address, bytes));
        }
        if let (Some(owner), Some(user)) = (allocation.device, device) {
            if owner != user
                && allocation.kind == MemoryKind::Device
                && !self.devices[user].peers.contains(&owner)
            {
                return Err(Fault::violation(
                    Code::IllegalAddress,
                    format!(
                        "{address:#x} is memory of device {} used on device {} without peer access",
                        self.devices[owner].ordinal, self.devices[user].ordinal
                    ),
                ));
            }
        }
        Ok(match (&mut allocation.storage, allocation.host) {
            (Some(storage), _) => storage[offset..].as_mut_ptr(),
            (None, host) => (host.unwrap_or(base) + offset as u64) as *mut u8,
        })
    }

    /// Whether `address` is inside memory the double handed out or registered.
    pub(super) fn known(&self, address: u64) -> bool {
        self.memory
            .live
            .range(..=address)
            .next_back()
            .is_some_and(|(b, a)| address < b + a.bytes as u64)
    }

    /// A host pointer the caller passes as pageable memory: refuses one of the double's
    /// device addresses.
    pub fn host_pointer(&self, pointer: u64, what: &str) -> Outcome<()> {
        if pointer == 0 || is_device_address(pointer) {
            return Err(Fault::violation(
                Code::InvalidValue,
                format!("{what}: {pointer:#x} is not host memory"),
            ));
        }
        Ok(())
    }

    pub(super) fn write_pattern(
        &mut self,
        to: u64,
        pattern: Pattern,
        count: usize,
        device: Option<usize>,
    ) -> Outcome<()> {
        let (value, width) = pattern.bytes();
        if !to.is_multiple_of(width as u64) {
            return Err(Fault::violation(
                Code::InvalidValue,
                format!("a {width}-byte fill at {to:#x}, which is not {width}-byte aligned"),
            ));
        }
        let bytes = pattern.span_bytes(count)?;
        let target = self.span(to, bytes, device)?;
        // SAFETY: `span` checked `bytes` bytes at `target` inside one live allocation, which
        // nothing else borrows while the double's lock is held.
        let target = unsafe { std::slice::from_raw_parts_mut(target, bytes) };
        for chunk in target.chunks_exact_mut(width) {
            chunk.copy_from_slice(&value[..width]);
        }
        Ok(())
    }

    /// Memory info of `device`: (free, total).
    pub fn memory_info(&self, device: usize) -> (u64, u64) {
        let total = config().memory;
        (total - self.devices[device].memory_used, total)
    }

    /// Live allocations, for the exit report: (number, kind, bytes, base).
    pub(super) fn live_allocations(&self) -> Vec<(u64, MemoryKind, usize, u64)> {
        self.memory
            .live
            .iter()
            .map(|(b, a)| (a.number, a.kind, a.bytes, *b))
            .collect()
    }
}
