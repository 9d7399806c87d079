//! Device memory: buffers that allocate, copy both ways, and free on drop.
//!
//! Elements are plain old data (`bytemuck::Pod`): any bytes a kernel or a copy leaves in device
//! memory are a valid value of the element type (no `bool`, `char` or references), and a safe
//! allocation starts zeroed, so nothing safe reads uninitialized memory.

use crate::device::Device;
use crate::driver::{Allocating, Origin};
use crate::error::{Error, ErrorKind, Result};
use crate::stream::{Queue, Stream};
use crate::trace::event;
use crate::tracking::{lock, Access, BufferTracking};
use bytemuck::Pod;
use std::marker::PhantomData;
use std::panic::Location;
use std::sync::Arc;

/// A raw device address, for kernels that take pointers (`!llvm.ptr`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DevicePtr(pub u64);

/// `len` elements of `T` in a device's memory.
pub struct DeviceBuffer<T: Pod> {
    device: Device,
    ptr: u64,
    len: usize,
    /// The work queued on it (`tracking.rs`), shared with the graphs that replay work on it.
    tracking: Arc<BufferTracking>,
    /// Managed memory, which the host may use at the same address (`alloc_managed`).
    managed: bool,
    _element: PhantomData<T>,
}

impl<T: Pod> DeviceBuffer<T> {
    fn bytes(len: usize) -> Result<usize> {
        len.checked_mul(size_of::<T>())
            .ok_or_else(|| Error::new(ErrorKind::InvalidArgument, "buffer size overflows"))
    }

    /// `len` zeroed elements (zeroed on the device's helper stream: work that uses the buffer
    /// waits for it, nothing else does).
    #[track_caller]
    pub fn alloc(device: &Device, len: usize) -> Result<DeviceBuffer<T>> {
        let helper = device.helper_stream()?;
        let buffer = DeviceBuffer::alloc_on(helper, len)?;
        if !device.tracks() {
            // Nothing would order other streams after the zeroing: it is done on return.
            helper.synchronize()?;
        }
        Ok(buffer)
    }

    /// `len` zeroed elements, zeroed in `stream`'s order: nothing waits for other streams or the
    /// default stream (the memory is taken from the driver at once; dropping the buffer waits
    /// for its own work only), so a loop of temporaries on one stream does not stall the others.
    #[track_caller]
    pub fn alloc_on(stream: &Stream, len: usize) -> Result<DeviceBuffer<T>> {
        // SAFETY: every byte is set, in the stream's order, before other work can use it (work
        // on other streams waits for the fill, `tracking.rs`).
        let buffer = unsafe { DeviceBuffer::alloc_uninit(stream.device(), len)? };
        stream.fill(&buffer, T::zeroed())?;
        Ok(buffer)
    }

    /// `len` elements of uninitialized device memory.
    ///
    /// # Safety
    /// Every element must be written (by a copy or a kernel) before it is read, on the host or
    /// on the device.
    #[track_caller]
    pub unsafe fn alloc_uninit(device: &Device, len: usize) -> Result<DeviceBuffer<T>> {
        let bytes = Self::bytes(len)?;
        let _origin = Allocating::at(Origin::Caller(Location::caller()));
        let ptr = if bytes > 0 {
            device
                .current()?
                .alloc(bytes)
                .map_err(|e| device.context(e))?
        } else {
            0
        };
        Ok(DeviceBuffer {
            device: device.clone(),
            ptr,
            len,
            tracking: Arc::default(),
            managed: false,
            _element: PhantomData,
        })
    }

    /// `len` zeroed elements of managed memory: one address that kernels on the device and
    /// the host both use (`cuMemAllocManaged`, `hipMallocManaged`; ordinary memory on the host
    /// device), read and written on the host through [`DeviceBuffer::host_slice`] without a
    /// copy. An error on a device without managed memory the host may use while kernels run
    /// (`DeviceLimits::managed_memory`: CUDA's and HIP's concurrent managed access; not Vulkan).
    #[track_caller]
    pub fn alloc_managed(device: &Device, len: usize) -> Result<DeviceBuffer<T>> {
        if !device.limits().managed_memory {
            return Err(Error::new(
                ErrorKind::NotSupported,
                format!(
                    "{} has no managed memory the host may use while kernels run (CUDA's and \
                     HIP's concurrent managed access); allocate with DeviceBuffer::alloc and copy",
                    device.name()
                ),
            ));
        }
        let bytes = Self::bytes(len)?;
        let _origin = Allocating::at(Origin::Caller(Location::caller()));
        let ptr = if bytes > 0 {
            device
                .current()?
                .alloc_managed(bytes)
                .map_err(|e| device.context(e))?
        } else {
            0
        };
        let mut buffer = DeviceBuffer {
            device: device.clone(),
            ptr,
            len,
            tracking: Arc::default(),
            managed: true,
            _element: PhantomData,
        };
        buffer.host_slice()?.fill(T::zeroed());
        Ok(buffer)
    }

    /// The elements of a managed buffer ([`DeviceBuffer::alloc_managed`]) as a host slice, once
    /// the work queued on the buffer has run: the host reads and writes the memory kernels use,
    /// without a copy. While the slice lives nothing else can use the buffer (it is borrowed
    /// mutably; a graph that replays work on it refuses to). An error for memory that is not
    /// managed, and when waiting for the buffer's work failed.
    pub fn host_slice(&mut self) -> Result<HostSlice<'_, T>> {
        if !self.managed {
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                format!(
                    "this buffer on {} is not managed memory (DeviceBuffer::alloc_managed): \
                     read it with to_vec or copy_to, write it with copy_from",
                    self.device.name()
                ),
            ));
        }
        {
            let mut tracking = lock(&self.tracking);
            if !tracking.wait_all(&self.device) {
                return Err(Error::new(
                    ErrorKind::Driver,
                    format!(
                        "waiting for the work on a managed buffer of {} failed (see the \
                         device's next synchronization)",
                        self.device.name()
                    ),
                ));
            }
            tracking.set_on_host(true);
        }
        let elements = if self.len == 0 {
            std::ptr::NonNull::<T>::dangling().as_ptr()
        } else {
            self.ptr as *mut T
        };
        // SAFETY: managed memory of `len` elements (or none: a dangling, aligned pointer),
        // which the host may use at its device address while kernels run elsewhere on the device
        // (concurrent managed access, checked at allocation), aligned for `T` (the drivers align
        // allocations to 256 bytes, the host driver to its ALIGNMENT), initialized (zeroed at
        // allocation, `Pod` ever since). No queued work uses it (waited for above), and none can
        // be queued while the slice lives: launches and copies borrow the buffer, graphs see the
        // host's borrow and refuse to replay.
        let elements = unsafe { std::slice::from_raw_parts_mut(elements, self.len) };
        Ok(HostSlice {
            elements,
            tracking: &self.tracking,
        })
    }

    /// The stream the whole-buffer helpers queue on: the device's helper stream, which waits
    /// for this buffer's own work only (not for unrelated streams, as the default stream
    /// would). A buffer whose address was handed out, or on a device whose tracking is off,
    /// first waits for its whole device: nobody tracked what may still be using it.
    fn helper(&self) -> Result<&Stream> {
        if lock(&self.tracking).escaped() || !self.device.tracks() {
            self.device.synchronize()?;
        }
        self.device.helper_stream()
    }

    /// Runs `operation` on the helper stream; on a device whose tracking is off (so nothing
    /// orders other streams after it), waits for it before returning.
    fn on_helper(&self, operation: impl FnOnce(&Stream) -> Result<()>) -> Result<()> {
        let helper = self.helper()?;
        operation(helper)?;
        if !self.device.tracks() {
            helper.synchronize()?;
        }
        Ok(())
    }

    /// The buffer's work tracking, for the views, spans and graphs of this crate.
    pub(crate) fn tracking(&self) -> &Arc<BufferTracking> {
        &self.tracking
    }

    /// The buffer's device address, without handing it out (its work stays tracked).
    pub(crate) fn address(&self) -> u64 {
        self.ptr
    }

    /// A device copy of `data`.
    #[track_caller]
    pub fn from_slice(device: &Device, data: &[T]) -> Result<DeviceBuffer<T>> {
        // SAFETY: the copy below writes every element.
        let mut buffer = unsafe { DeviceBuffer::alloc_uninit(device, data.len())? };
        buffer.copy_from(data)?;
        Ok(buffer)
    }

    /// Sets every element to `value`, on the device's helper stream (see
    /// [`Stream::fill`]): after the buffer's earlier work, before its later work.
    pub fn fill(&mut self, value: T) -> Result<()> {
        self.on_helper(|helper| helper.fill(self, value))
    }

    /// Overwrites the buffer with `data` (of the same length), after the buffer's earlier work;
    /// returns when the copy is done.
    pub fn copy_from(&mut self, data: &[T]) -> Result<()> {
        self.check_len(data.len())?;
        self.helper()?.copy_to_device(self, data)
    }

    /// Overwrites the buffer with `source` (of the same length and device), on the device's
    /// helper stream: after both buffers' earlier work, before their later work.
    pub fn copy_from_buffer(&mut self, source: &DeviceBuffer<T>) -> Result<()> {
        self.check_len(source.len)?;
        if !source.device.is_same(&self.device) {
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                format!(
                    "copying between devices ({} and {}): copy through the host",
                    source.device.name(),
                    self.device.name()
                ),
            ));
        }
        source.helper()?;
        self.on_helper(|helper| helper.copy(self, source))
    }

    /// Takes ownership of `len` elements of device memory allocated elsewhere (by `cudarc`, a
    /// vendor library, or [`DeviceBuffer::into_raw`]); the buffer frees it with the device's
    /// driver when dropped.
    ///
    /// # Safety
    /// `ptr` must be an allocation of this device's driver (`cuMemAlloc`, `hipMalloc`, or this
    /// crate's host allocator for the host) holding at least `len` initialized elements, owned by
    /// nobody else.
    pub unsafe fn from_raw_parts(device: &Device, ptr: DevicePtr, len: usize) -> DeviceBuffer<T> {
        DeviceBuffer {
            device: device.clone(),
            ptr: ptr.0,
            len,
            tracking: Arc::default(),
            managed: false,
            _element: PhantomData,
        }
    }

    /// Gives up ownership: the memory is no longer freed by this buffer (pass it to
    /// [`DeviceBuffer::from_raw_parts`] or free it with the driver).
    pub fn into_raw(self) -> DevicePtr {
        let this = std::mem::ManuallyDrop::new(self);
        // SAFETY: the tracking (and its events) is moved out once; `this` is never used or
        // dropped again. The device is a reference to a device of the process: nothing to drop.
        drop(unsafe { std::ptr::read(&this.tracking) });
        DevicePtr(this.ptr)
    }

    /// Copies the buffer into `out` (of the same length) after the buffer's earlier work;
    /// returns when the copy is done.
    pub fn copy_to(&self, out: &mut [T]) -> Result<()> {
        self.check_len(out.len())?;
        self.helper()?.copy_to_host(out, self)
    }

    /// The buffer's contents.
    pub fn to_vec(&self) -> Result<Vec<T>> {
        let mut out = vec![T::zeroed(); self.len];
        self.copy_to(&mut out)?;
        Ok(out)
    }

    /// Elements in the buffer.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the buffer has no elements.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The device the buffer lives on.
    pub fn device(&self) -> &Device {
        &self.device
    }

    /// The buffer's device address, for kernels that take a pointer, once the work queued on
    /// the buffer so far has run (a kernel given the address on any stream sees its results).
    /// Work through the address is not tracked, so from now on the buffer's helpers and its
    /// drop wait for its whole device (as for memory of unknown use).
    pub fn device_ptr(&self) -> DevicePtr {
        let mut tracking = lock(&self.tracking);
        // A failed wait leaves a device that reports a fault at its next synchronization.
        let _ = tracking.wait_all(&self.device);
        tracking.escape();
        DevicePtr(self.ptr)
    }

    fn check_len(&self, len: usize) -> Result<()> {
        if len == self.len {
            Ok(())
        } else {
            Err(Error::new(
                ErrorKind::InvalidArgument,
                format!(
                    "length mismatch: the buffer holds {} elements, the host slice {len}",
                    self.len
                ),
            ))
        }
    }
}

/// A managed buffer's elements on the host ([`DeviceBuffer::host_slice`]).
pub struct HostSlice<'a, T: Pod> {
    elements: &'a mut [T],
    tracking: &'a BufferTracking,
}

impl<T: Pod> std::ops::Deref for HostSlice<'_, T> {
    type Target = [T];

    fn deref(&self) -> &[T] {
        self.elements
    }
}

impl<T: Pod> std::ops::DerefMut for HostSlice<'_, T> {
    fn deref_mut(&mut self) -> &mut [T] {
        self.elements
    }
}

impl<T: Pod> Drop for HostSlice<'_, T> {
    /// The buffer may be used by the device again (a slice leaked with `mem::forget` leaves
    /// graphs refusing to replay work on it, never running it under the host's borrow).
    fn drop(&mut self) {
        lock(self.tracking).set_on_host(false);
    }
}

impl<T: Pod + std::fmt::Debug> std::fmt::Debug for HostSlice<'_, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.elements.fmt(f)
    }
}

impl<T: Pod> std::fmt::Debug for DeviceBuffer<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "DeviceBuffer<{}>({} elements on {})",
            std::any::type_name::<T>(),
            self.len,
            self.device.name()
        )
    }
}

impl<T: Pod> Drop for DeviceBuffer<T> {
    /// Waits for the work queued on the buffer (`tracking.rs`: its own, on whichever streams;
    /// the whole device's where its address was handed out), then frees it. Other streams' work
    /// goes on. When a wait fails (a kernel faulted: the device's context is unusable), the
    /// memory is left allocated rather than freed under work whose end could not be confirmed.
    fn drop(&mut self) {
        if self.ptr == 0 {
            return;
        }
        let done = {
            let mut tracking = lock(&self.tracking);
            // A graph's replay that finds the buffer gone refuses to run (`graph.rs`).
            tracking.retire();
            tracking.wait_all(&self.device)
        };
        if let (true, Ok(driver)) = (done, self.device.current()) {
            event!(
                trace,
                device = self.device.name(),
                bytes = self.len * size_of::<T>(),
                "free"
            );
            driver.free(self.ptr);
        }
    }
}

/// Device memory a copy reads or writes: a whole buffer, or a contiguous 1-D view of one
/// (`buffer.slice(range)`, `memref.rs`).
pub trait DeviceRange<T: Pod>: sealed::Range {}

pub(crate) mod sealed {
    use super::Span;
    use crate::error::Result;

    /// Only this crate's buffers and views are device memory.
    pub trait Range {
        fn span(&self) -> Result<Span<'_>>;
    }
}

/// Where a [`DeviceRange`] is: its device, the address of its first element, its length.
#[doc(hidden)]
pub struct Span<'a> {
    pub(crate) device: &'a Device,
    pub(crate) ptr: u64,
    pub(crate) len: usize,
    pub(crate) element: usize,
    pub(crate) tracking: &'a Arc<BufferTracking>,
}

impl<T: Pod> sealed::Range for DeviceBuffer<T> {
    fn span(&self) -> Result<Span<'_>> {
        Ok(Span {
            device: &self.device,
            ptr: self.ptr,
            len: self.len,
            element: size_of::<T>(),
            tracking: &self.tracking,
        })
    }
}

impl<T: Pod> DeviceRange<T> for DeviceBuffer<T> {}

impl<'a> Span<'a> {
    /// `len` elements of `element` bytes at device address `ptr` of `device`, in the buffer
    /// whose work `tracking` records.
    pub(crate) fn new(
        device: &'a Device,
        ptr: u64,
        len: usize,
        element: usize,
        tracking: &'a Arc<BufferTracking>,
    ) -> Span<'a> {
        Span {
            device,
            ptr,
            len,
            element,
            tracking,
        }
    }

    /// Makes `stream` wait for other streams' work on the span's buffer that `access` must
    /// follow.
    pub(crate) fn before(&self, stream: &Stream, access: Access) -> Result<()> {
        lock(self.tracking).before(&Queue::Stream(stream), access)
    }

    pub(crate) fn bytes(&self) -> usize {
        self.len * self.element
    }

    /// Checks the span can take part, with `len` elements, in work on `stream`.
    pub(crate) fn check(&self, stream: &Stream, len: usize, what: &str) -> Result<()> {
        if !self.device.is_same(stream.device()) {
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                format!(
                    "{what}: the buffer lives on {}, the stream on {}",
                    self.device.name(),
                    stream.device().name()
                ),
            ));
        }
        if self.len != len {
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                format!(
                    "{what}: length mismatch: the device range holds {} elements, the other side {len}",
                    self.len
                ),
            ));
        }
        Ok(())
    }

    pub(crate) fn address(&self) -> u64 {
        self.ptr
    }
}
