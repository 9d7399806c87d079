//! Page-locked host memory: what copies overlap kernels with. A copy between device memory and
//! page-locked memory queued on a stream runs truly asynchronously (the DMA engine reads or
//! writes the host memory later, in the stream's order), so the memory is in use after the call
//! returns. Each page-locked region remembers the queued copies that use it (as events) and
//! every host access — reading, writing, freeing, unregistering — first waits for them: safe
//! code never sees memory a copy is still writing, nor frees memory a copy still reads.
//!
//! Memory this crate allocates ([`PinnedBuffer`]) is freed by its last owner, after the copies;
//! leaking one leaks memory, nothing worse. The program's own memory is page-locked for the
//! length of a closure ([`Device::with_registered`]): the wait and the unregistration happen
//! when the closure returns (or unwinds), in this crate's frame, so they cannot be skipped by
//! leaking anything — a registration whose end rests on a `Drop` could be leaked with
//! `mem::forget`, and a queued copy would then write into memory the program has freed (why
//! `std::thread::scoped` was removed). [`Device::register`] is the unscoped form, `unsafe`
//! for exactly that reason.
//!
//! When waiting for a copy fails (a kernel faulted and the driver reports it there), the wait
//! still covers every copy: it then synchronizes the device, and only after that returns the
//! first error. A GPU whose work faulted has stopped running the context's work.
//!
//! On the host backend page-locked memory is ordinary memory, with the same rules.

use crate::device::Device;
use crate::driver::EventHandle;
use crate::driver::{Allocating, Origin};
use crate::error::{Error, ErrorKind, Result};
use crate::memory::DeviceRange;
use crate::stream::{Queue, Stream};
use crate::trace::event;
use crate::tracking::{mark_end, Access, Locked};
use bytemuck::Pod;
use std::ffi::c_void;
use std::marker::PhantomData;
use std::sync::{Arc, Mutex};

/// How a region's memory is given back once no queued copy uses it.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Release {
    /// Allocated by `alloc_pinned`: freed when the region drops.
    Free,
    /// Registered by the unsafe [`Device::register`]: unregistered when the region drops.
    Unregister,
    /// Registered by [`Device::with_registered`], which unregisters it itself; or no bytes.
    Nothing,
}

/// A page-locked region and the queued work that uses it.
struct Region {
    device: Device,
    pointer: *mut c_void,
    bytes: usize,
    release: Release,
    /// Events recorded after queued copies that use the region.
    pending: Mutex<Vec<EventHandle>>,
}

// SAFETY: the region is plain host memory, and its handles may be used from any thread; every
// access to the memory waits for the queued copies first (`wait`, which is synchronized), and
// the element views it hands out are borrowed from the owning `Pinned` as `&`/`&mut` are.
unsafe impl Send for Region {}
// SAFETY: as above; the pending events are behind a mutex.
unsafe impl Sync for Region {}

impl Region {
    /// Waits for every queued copy that uses the region. Every event is waited for even when
    /// one fails, and then the whole device, so on return no queued copy uses the memory; the
    /// first failure is returned.
    fn wait(&self) -> Result<()> {
        let mut pending = self.pending.lock().unwrap_or_else(|p| p.into_inner());
        if pending.is_empty() {
            return Ok(());
        }
        let driver = self.device.current()?;
        let mut result = Ok(());
        for event in pending.drain(..) {
            let waited = driver.synchronize_event(&event);
            driver.destroy_event(event);
            if result.is_ok() {
                result = waited;
            }
        }
        if result.is_err() {
            // The device may report the failure of other work here; a device-wide wait
            // covers the copies whatever the events said.
            let _ = driver.synchronize();
        }
        result.map_err(|e| self.device.context(e))
    }

    /// Queues `copy` on `stream` (which uses the region) and notes it, so every later host
    /// access waits for it. The event is made before the copy is queued; if recording it
    /// fails, the stream is waited for here instead, so no copy is ever queued untracked.
    fn queue(&self, stream: &Stream, copy: impl FnOnce() -> Result<()>) -> Result<()> {
        let driver = self.device.current()?;
        // Only waited for, never timed: an event without timing where the driver has them
        // (CUDA's and HIP's are cheaper to record and wait for).
        let event = driver
            .create_marker_event()
            .unwrap_or_else(|| driver.create_event())
            .map_err(|e| self.device.context(e))?;
        if let Err(error) = copy() {
            driver.destroy_event(event);
            return Err(self.device.context(error));
        }
        if let Err(error) = driver.record_event(&event, stream.raw()) {
            driver.destroy_event(event);
            if driver.synchronize_stream(stream.raw()).is_err() {
                let _ = driver.synchronize();
            }
            return Err(self.device.context(error));
        }
        self.pending
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(event);
        Ok(())
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

impl Drop for Region {
    /// Queued copies finish first; then the memory goes back as `release` says. When the wait
    /// fails, allocated memory is left allocated (the device's context has failed; freeing
    /// under its work is what must never happen).
    fn drop(&mut self) {
        let waited = self.wait();
        if self.bytes == 0 || self.release == Release::Nothing {
            return;
        }
        let Ok(driver) = self.device.current() else {
            return;
        };
        // SAFETY: allocated by `alloc_pinned` or registered by `Device::register`, once; no
        // queued copy uses it any more (waited for above).
        unsafe {
            match self.release {
                Release::Free if waited.is_ok() => driver.free_pinned(self.pointer),
                Release::Unregister => driver.unregister(self.pointer),
                _ => {}
            }
        }
    }
}

/// Page-locked host memory of `T`: a [`PinnedBuffer`] this crate allocated, or a
/// [`PinnedSlice`] of the program's own memory, registered while it is borrowed.
pub struct Pinned<'a, T: Pod> {
    /// Shared with the scope of [`Device::with_registered`], which waits for it whatever
    /// becomes of this handle.
    region: Arc<Region>,
    len: usize,
    _borrow: PhantomData<&'a mut [T]>,
}

/// `len` elements of page-locked host memory, allocated for a device (`cuMemAllocHost`,
/// `hipHostMalloc`).
pub type PinnedBuffer<T> = Pinned<'static, T>;

/// A slice of the program's memory, page-locked for a device (`cuMemHostRegister`,
/// `hipHostRegister`): see [`Device::with_registered`].
pub type PinnedSlice<'a, T> = Pinned<'a, T>;

impl<T: Pod> Pinned<'static, T> {
    /// `len` zeroed elements. An error when the size overflows, the memory runs out, or `T`
    /// needs more alignment than the driver's page-locked allocations have (256 bytes on the
    /// host, a page on GPUs).
    #[track_caller]
    pub fn alloc(device: &Device, len: usize) -> Result<PinnedBuffer<T>> {
        let bytes = len
            .checked_mul(size_of::<T>())
            .ok_or_else(|| Error::new(ErrorKind::InvalidArgument, "buffer size overflows"))?;
        if bytes == 0 {
            let pointer = std::ptr::NonNull::<T>::dangling().as_ptr().cast();
            return Ok(Pinned::new(device, pointer, 0, len, Release::Nothing));
        }
        let driver = device.current()?;
        let _origin = Allocating::at(Origin::Caller(std::panic::Location::caller()));
        let pointer = driver.alloc_pinned(bytes).map_err(|e| device.context(e))?;
        if !(pointer as usize).is_multiple_of(align_of::<T>()) {
            // SAFETY: just allocated by `alloc_pinned`; no work uses it.
            unsafe { driver.free_pinned(pointer) };
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                format!(
                    "page-locked memory for `{}` needs {}-byte alignment; {} gave an address \
                     aligned to {} bytes",
                    std::any::type_name::<T>(),
                    align_of::<T>(),
                    device.name(),
                    1usize << (pointer as usize).trailing_zeros()
                ),
            ));
        }
        // SAFETY: `bytes` fresh bytes.
        unsafe { std::ptr::write_bytes(pointer.cast::<u8>(), 0, bytes) };
        Ok(Pinned::new(device, pointer, bytes, len, Release::Free))
    }

    /// A page-locked copy of `data`.
    #[track_caller]
    pub fn from_slice(device: &Device, data: &[T]) -> Result<PinnedBuffer<T>> {
        let mut buffer = PinnedBuffer::alloc(device, data.len())?;
        buffer.as_mut_slice()?.copy_from_slice(data);
        Ok(buffer)
    }
}

impl Device {
    /// Page-locks `data` for this device while `work` runs, and gives `work` it as a
    /// [`PinnedSlice`] to queue copies with. When `work` returns (or panics), every copy it
    /// queued on the memory is waited for and the memory unregistered, before `data` is the
    /// program's again: nothing `work` does, leaking the slice included, lets a queued copy
    /// outlive the call. An error when registering fails or a queued copy failed (the value
    /// `work` returned is then dropped).
    ///
    /// ```
    /// use gpu_embed::{Device, DeviceBuffer};
    /// # fn main() -> gpu_embed::Result<()> {
    /// let device = Device::host();
    /// let on_device = DeviceBuffer::from_slice(&device, &[7u32; 1024])?;
    /// let stream = device.create_stream()?;
    /// let mut mine = vec![0u32; 1024];
    /// device.with_registered(&mut mine, |pinned| {
    ///     stream.copy_device_to_pinned(pinned, &on_device) // queued; returns at once
    /// })??;
    /// assert_eq!(mine, vec![7; 1024]); // the copy has run
    /// # Ok(())
    /// # }
    /// ```
    pub fn with_registered<T: Pod, R>(
        &self,
        data: &mut [T],
        work: impl for<'scope> FnOnce(&mut PinnedSlice<'scope, T>) -> R,
    ) -> Result<R> {
        let bytes = size_of_val(data);
        let pointer = data.as_mut_ptr().cast::<c_void>();
        if bytes > 0 {
            // SAFETY: `data` is borrowed for this call, and `RegistrationEnd` unregisters it
            // before the call returns or unwinds.
            unsafe { self.current()?.register(pointer, bytes) }.map_err(|e| self.context(e))?;
        }
        let mut pinned = Pinned::new(self, pointer, bytes, data.len(), Release::Nothing);
        let end = RegistrationEnd {
            region: Arc::clone(&pinned.region),
            done: false,
        };
        let result = work(&mut pinned);
        drop(pinned);
        end.finish().map(|()| result)
    }

    /// Page-locks `data` for this device until the returned slice is dropped, which waits for
    /// the copies queued on it and unregisters it. [`Device::with_registered`] is the safe form.
    ///
    /// # Safety
    /// The returned slice must be dropped, not leaked (`mem::forget`, a reference cycle, a
    /// leaked box): while it is alive `data` stays borrowed, but a leaked slice releases the
    /// borrow without waiting, and a queued copy would then read or write `data` after the
    /// program reused or freed it.
    pub unsafe fn register<'a, T: Pod>(&self, data: &'a mut [T]) -> Result<PinnedSlice<'a, T>> {
        let bytes = size_of_val(data);
        let pointer = data.as_mut_ptr().cast::<c_void>();
        if bytes == 0 {
            return Ok(Pinned::new(self, pointer, 0, data.len(), Release::Nothing));
        }
        // SAFETY: `data` is borrowed for the slice's life, and the caller guarantees the slice
        // is dropped (which unregisters it) before that borrow ends.
        unsafe { self.current()?.register(pointer, bytes) }.map_err(|e| self.context(e))?;
        Ok(Pinned::new(
            self,
            pointer,
            bytes,
            data.len(),
            Release::Unregister,
        ))
    }
}

/// The end of a [`Device::with_registered`] scope: waits for the region's copies and
/// unregisters it, on return (`finish`) or on unwinding (`drop`).
struct RegistrationEnd {
    region: Arc<Region>,
    done: bool,
}

impl RegistrationEnd {
    fn finish(mut self) -> Result<()> {
        self.done = true;
        self.end()
    }

    fn end(&self) -> Result<()> {
        let waited = self.region.wait();
        if self.region.bytes > 0 {
            if let Ok(driver) = self.region.device.current() {
                // SAFETY: registered by `with_registered`, once; no queued copy uses it (the
                // wait above covers every copy, even when it fails).
                unsafe { driver.unregister(self.region.pointer) };
            }
        }
        waited
    }
}

impl Drop for RegistrationEnd {
    fn drop(&mut self) {
        if !self.done {
            let _ = self.end();
        }
    }
}

impl<T: Pod> std::fmt::Debug for Pinned<'_, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Pinned<{}>({} elements for {})",
            std::any::type_name::<T>(),
            self.len,
            self.region.device.name()
        )
    }
}

impl<T: Pod> Pinned<'_, T> {
    fn new(
        device: &Device,
        pointer: *mut c_void,
        bytes: usize,
        len: usize,
        release: Release,
    ) -> Self {
        Pinned {
            region: Arc::new(Region {
                device: device.clone(),
                pointer,
                bytes,
                release,
                pending: Mutex::new(Vec::new()),
            }),
            len,
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
        self.region.wait()?;
        // SAFETY: `len` initialized elements (zeroed or the program's), aligned for `T` (checked
        // by `alloc`; a registered slice came from a `&mut [T]`), that no queued work writes:
        // it has finished, and queuing a new write needs `&mut self`.
        Ok(unsafe { std::slice::from_raw_parts(self.region.pointer.cast::<T>(), self.len) })
    }

    /// The contents, once every queued copy that uses them has finished.
    pub fn as_mut_slice(&mut self) -> Result<&mut [T]> {
        self.region.wait()?;
        // SAFETY: as in `as_slice`, and the memory is borrowed exclusively through `&mut self`
        // (queuing a copy that reads it needs `&self`, which this borrow excludes).
        Ok(unsafe { std::slice::from_raw_parts_mut(self.region.pointer.cast::<T>(), self.len) })
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
        let (region, len) = (&*source.region, source.len);
        region.check_stream(self)?;
        let target = target.span()?;
        target.check(self, len, "copying from page-locked memory")?;
        if region.bytes == 0 {
            return Ok(());
        }
        if self.capturing() {
            return Err(crate::graph::not_capturable(
                "a copy from page-locked memory",
            ));
        }
        let queue = Queue::Stream(self);
        let mut locked = Locked::new([(&**target.tracking, Access::Write)]);
        locked.before(&queue)?;
        event!(debug, device = self.device().name(), stream = ?self.raw(), bytes = len * size_of::<T>(), "copy from page-locked memory");
        let driver = self.device().current()?;
        region.queue(self, || {
            // SAFETY: `len` elements on both sides; the region stays allocated and unwritten
            // until the copy has run (every host access, the drop and the end of a
            // registration wait for the event `queue` records), and the target waits for its
            // queued work before it is freed.
            unsafe {
                driver.copy_to_device_async(
                    target.address(),
                    region.pointer,
                    len * size_of::<T>(),
                    self.raw(),
                )
            }
        })?;
        locked.note(&mark_end(&queue));
        Ok(())
    }

    /// Queues a copy of `source` into page-locked `target` (of the same length); returns at
    /// once. `target`'s `as_slice` waits for the copy.
    pub fn copy_device_to_pinned<T: Pod>(
        &self,
        target: &mut Pinned<'_, T>,
        source: &impl DeviceRange<T>,
    ) -> Result<()> {
        let (region, len) = (&*target.region, target.len);
        region.check_stream(self)?;
        let source = source.span()?;
        source.check(self, len, "copying into page-locked memory")?;
        if region.bytes == 0 {
            return Ok(());
        }
        if self.capturing() {
            return Err(crate::graph::not_capturable(
                "a copy into page-locked memory",
            ));
        }
        let queue = Queue::Stream(self);
        let mut locked = Locked::new([(&**source.tracking, Access::Read)]);
        locked.before(&queue)?;
        event!(debug, device = self.device().name(), stream = ?self.raw(), bytes = len * size_of::<T>(), "copy into page-locked memory");
        let driver = self.device().current()?;
        region.queue(self, || {
            // SAFETY: as above; `&mut target` means no slice of it is alive now, and later
            // accesses wait for the copy.
            unsafe {
                driver.copy_to_host_async(
                    region.pointer,
                    source.address(),
                    len * size_of::<T>(),
                    self.raw(),
                )
            }
        })?;
        locked.note(&mark_end(&queue));
        Ok(())
    }
}
