//! Page-locked host memory: what copies overlap kernels with. A copy between device memory and
//! page-locked memory queued on a stream runs truly asynchronously (the DMA engine reads or
//! writes the host memory later, in the stream's order), so the memory is in use after the call
//! returns. Each page-locked region remembers the queued copies that use it (as events) and
//! every host access — reading, writing, freeing, unregistering — first waits for them: safe
//! code never sees memory a copy is still writing, nor frees memory a copy still reads.
//!
//! On the host backend page-locked memory is ordinary memory, with the same rules.

use crate::device::{Device, Stream};
use crate::driver::{Handle, HostMemory};
use crate::error::{Error, ErrorKind, Result};
use crate::memory::DeviceRange;
use bytemuck::Pod;
use std::ffi::c_void;
use std::marker::PhantomData;
use std::sync::Mutex;

/// A page-locked region and the queued work that uses it.
struct Region {
    device: Device,
    pointer: *mut c_void,
    bytes: usize,
    /// Events recorded after queued copies that use the region.
    pending: Mutex<Vec<Handle>>,
}

// SAFETY: the region is plain memory; every access goes through `wait`, which is synchronized.
unsafe impl Send for Region {}
unsafe impl Sync for Region {}

impl Region {
    /// Waits for every queued copy that uses the region.
    fn wait(&self) -> Result<()> {
        let mut pending = self.pending.lock().unwrap_or_else(|p| p.into_inner());
        if pending.is_empty() {
            return Ok(());
        }
        let driver = self.device.current()?;
        let mut result = Ok(());
        for event in pending.drain(..) {
            if result.is_ok() {
                result = driver.synchronize_event(event);
            }
            driver.destroy_event(event);
        }
        result.map_err(|e| self.device.context(e))
    }

    /// Notes that `stream` has queued work using the region.
    fn used_by(&self, stream: &Stream) -> Result<()> {
        let driver = self.device.current()?;
        let event = driver.create_event().map_err(|e| self.device.context(e))?;
        if let Err(error) = driver.record_event(event, stream.raw()) {
            driver.destroy_event(event);
            return Err(self.device.context(error));
        }
        self.pending
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(event);
        Ok(())
    }

    /// The region as `len` elements, once queued copies that use it have finished.
    fn slice<T: Pod>(&self, len: usize) -> Result<&[T]> {
        self.wait()?;
        // SAFETY: `len` initialized elements no queued work writes (it has finished, and new
        // writes need `&mut` of the owner).
        Ok(unsafe { std::slice::from_raw_parts(self.pointer.cast::<T>(), len) })
    }

    /// As [`Region::slice`], exclusively.
    fn slice_mut<T: Pod>(&mut self, len: usize) -> Result<&mut [T]> {
        self.wait()?;
        // SAFETY: as above, and the owner is borrowed exclusively.
        Ok(unsafe { std::slice::from_raw_parts_mut(self.pointer.cast::<T>(), len) })
    }

    fn check_stream(&self, stream: &Stream) -> Result<()> {
        if self.device.is_same(stream.device()) {
            return Ok(());
        }
        Err(Error::new(
            ErrorKind::InvalidArgument,
            format!(
                "page-locked memory of {} used on a stream of {}",
                self.device.name(),
                stream.device().name()
            ),
        ))
    }
}

/// Page-locked host memory of `T`: a [`PinnedBuffer`] this crate allocated, or a
/// [`PinnedSlice`] of the program's own memory, registered for as long as it is borrowed.
pub struct Pinned<'a, T: Pod> {
    region: Region,
    len: usize,
    /// Allocated by `alloc_pinned` (freed on drop), or registered (unregistered on drop).
    allocated: bool,
    _borrow: PhantomData<&'a mut [T]>,
}

/// `len` elements of page-locked host memory, allocated for a device (`cuMemAllocHost`,
/// `hipHostMalloc`).
pub type PinnedBuffer<T> = Pinned<'static, T>;

/// A slice of the program's memory, page-locked for a device while this lives
/// (`cuMemHostRegister`, `hipHostRegister`).
pub type PinnedSlice<'a, T> = Pinned<'a, T>;

impl<T: Pod> Pinned<'static, T> {
    /// `len` zeroed elements.
    pub fn alloc(device: &Device, len: usize) -> Result<PinnedBuffer<T>> {
        let bytes = len
            .checked_mul(size_of::<T>())
            .ok_or_else(|| Error::new(ErrorKind::InvalidArgument, "buffer size overflows"))?;
        let pointer = if bytes == 0 {
            std::ptr::NonNull::<T>::dangling().as_ptr().cast()
        } else {
            let pointer = device
                .current()?
                .alloc_pinned(bytes)
                .map_err(|e| device.context(e))?;
            // SAFETY: `bytes` fresh bytes.
            unsafe { std::ptr::write_bytes(pointer.cast::<u8>(), 0, bytes) };
            pointer
        };
        Ok(Pinned::new(device, pointer, bytes, len, true))
    }

    /// A page-locked copy of `data`.
    pub fn from_slice(device: &Device, data: &[T]) -> Result<PinnedBuffer<T>> {
        let mut buffer = PinnedBuffer::alloc(device, data.len())?;
        buffer.as_mut_slice()?.copy_from_slice(data);
        Ok(buffer)
    }
}

impl Device {
    /// Page-locks `data` for this device until the returned slice is dropped.
    pub fn register<'a, T: Pod>(&self, data: &'a mut [T]) -> Result<PinnedSlice<'a, T>> {
        let bytes = size_of_val(data);
        let pointer = data.as_mut_ptr().cast::<c_void>();
        if bytes > 0 {
            // SAFETY: `data` is borrowed for the slice's life, which unregisters it.
            unsafe { self.current()?.register(pointer, bytes) }.map_err(|e| self.context(e))?;
        }
        Ok(Pinned::new(self, pointer, bytes, data.len(), false))
    }
}

impl<T: Pod> Pinned<'_, T> {
    fn new(
        device: &Device,
        pointer: *mut c_void,
        bytes: usize,
        len: usize,
        allocated: bool,
    ) -> Self {
        Pinned {
            region: Region {
                device: device.clone(),
                pointer,
                bytes,
                pending: Mutex::new(Vec::new()),
            },
            len,
            allocated,
            _borrow: PhantomData,
        }
    }

    /// Elements in the memory.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether there are no elements.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The contents, once every queued copy that uses them has finished.
    pub fn as_slice(&self) -> Result<&[T]> {
        self.region.slice(self.len)
    }

    /// The contents, once every queued copy that uses them has finished.
    pub fn as_mut_slice(&mut self) -> Result<&mut [T]> {
        self.region.slice_mut(self.len)
    }
}

impl<T: Pod> Drop for Pinned<'_, T> {
    fn drop(&mut self) {
        // Queued copies finish first; their failures have nowhere to go from here.
        let _ = self.region.wait();
        if self.region.bytes == 0 {
            return;
        }
        if let Ok(driver) = self.region.device.current() {
            // SAFETY: allocated by `alloc_pinned` or registered by `Device::register`; no queued
            // work uses it any more.
            unsafe {
                if self.allocated {
                    driver.free_pinned(self.region.pointer);
                } else {
                    driver.unregister(self.region.pointer);
                }
            }
        }
    }
}

impl Stream {
    /// Queues a copy of page-locked `source` into `target` (of the same length); returns at
    /// once. `source` may not be written until the copy has run: its `as_mut_slice` waits.
    pub fn copy_pinned_to_device<T: Pod>(
        &self,
        target: &impl DeviceRange<T>,
        source: &Pinned<'_, T>,
    ) -> Result<()> {
        let (region, len) = (&source.region, source.len);
        region.check_stream(self)?;
        let target = target.span()?;
        target.check(self, len, "copying from page-locked memory")?;
        if len == 0 {
            return Ok(());
        }
        let driver = self.device().current()?;
        // SAFETY: `len` elements on both sides; the region stays allocated and unwritten until
        // the copy has run (every host access and the drop wait for the event noted below), and
        // the target waits for queued work before it is freed.
        unsafe {
            driver.copy_to_device_async(
                target.address(),
                region.pointer,
                len * size_of::<T>(),
                self.raw(),
                HostMemory::PageLocked,
            )
        }
        .map_err(|e| self.device().context(e))?;
        region.used_by(self)
    }

    /// Queues a copy of `source` into page-locked `target` (of the same length); returns at
    /// once. `target`'s `as_slice` waits for the copy.
    pub fn copy_device_to_pinned<T: Pod>(
        &self,
        target: &mut Pinned<'_, T>,
        source: &impl DeviceRange<T>,
    ) -> Result<()> {
        let (region, len) = (&target.region, target.len);
        region.check_stream(self)?;
        let source = source.span()?;
        source.check(self, len, "copying into page-locked memory")?;
        if len == 0 {
            return Ok(());
        }
        let driver = self.device().current()?;
        // SAFETY: as above; `&mut target` means no slice of it is alive now, and later accesses
        // wait for the copy.
        unsafe {
            driver.copy_to_host_async(
                region.pointer,
                source.address(),
                len * size_of::<T>(),
                self.raw(),
                HostMemory::PageLocked,
            )
        }
        .map_err(|e| self.device().context(e))?;
        region.used_by(self)
    }
}
