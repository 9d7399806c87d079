//! Copies and fills queued on a stream ([`Stream`]'s methods for them), over buffers and their
//! slices: above the memory, the graphs that may capture them and the tracking that orders them.

use crate::driver::{Driver, Pattern};
use crate::error::{Error, ErrorKind, Result};
use crate::graph;
use crate::memory::DeviceRange;
use crate::stream::{Queue, Stream};
use crate::trace::event;
use crate::tracking::{mark_end, Access, After, Locked};
use bytemuck::Pod;

/// The memset pattern that writes `value` to `len` elements, and how many times, if there is
/// one: elements of 1, 2 or 4 bytes, or any value whose bytes are all equal.
fn pattern_of<T: Pod>(value: T, len: usize) -> Option<(Pattern, usize)> {
    let bytes = bytemuck::bytes_of(&value);
    let pattern = match *bytes {
        [b] => Pattern::U8(b),
        [a, b] => Pattern::U16(u16::from_ne_bytes([a, b])),
        [a, b, c, d] => Pattern::U32(u32::from_ne_bytes([a, b, c, d])),
        [first, ref rest @ ..] if rest.iter().all(|&b| b == first) => Pattern::U8(first),
        _ => return None,
    };
    Some((pattern, len * size_of::<T>() / pattern.size()))
}

/// Copies and fills queued on a stream, on whole buffers or slices of them. A buffer may be used
/// by queued work after these return: dropping it waits for that work first, so it is never
/// freed under it.
///
/// Work on one stream runs in order. Work on another stream that touches the same buffer waits
/// for it as a buffer's readers and writers must (`tracking.rs`: a read after the last write, a
/// write after the reads since too), as cudarc orders them: no user event is needed.
impl Stream {
    /// Copies `source` into `target` (of the same length) after the stream's earlier work;
    /// returns when the copy is done, so `source` may be reused at once. Copies that overlap
    /// other work read page-locked memory ([`Stream::copy_pinned_to_device`]).
    pub fn copy_to_device<T: Pod>(&self, target: &impl DeviceRange<T>, source: &[T]) -> Result<()> {
        let target = target.span()?;
        target.check(self, source.len(), "copying to the device")?;
        if target.bytes() == 0 {
            return Ok(());
        }
        if self.capturing() {
            return Err(graph::not_capturable("a copy from host memory"));
        }
        // Done when this returns (the stream is waited for): nothing to mark after it.
        target.before(self, Access::Write)?;
        event!(debug, device = self.device().name(), stream = ?self.raw(), bytes = target.bytes(), "copy to device");
        self.copy_pageable(|driver| {
            // SAFETY: `len` elements on both sides; `source` is borrowed until the stream has
            // run the copy (`copy_pageable` waits), the target outlives it (see above).
            unsafe {
                driver.copy_to_device_async(
                    target.ptr,
                    source.as_ptr().cast(),
                    target.bytes(),
                    self.raw(),
                )
            }
        })
    }

    /// Queues a copy between device memory and pageable host memory, which the caller lends
    /// only for this call, and waits for the stream: when this returns, the copy has run, on
    /// every driver. (CUDA would return once it staged an upload, HIP only after the copy; one
    /// rule here keeps the drivers' contract one: their host memory stays valid until the
    /// stream runs the copy.)
    fn copy_pageable(&self, copy: impl FnOnce(&dyn Driver) -> Result<()>) -> Result<()> {
        let driver = self.device().current()?;
        copy(&*driver).map_err(|e| self.device().context(e))?;
        self.synchronize()
    }

    /// Copies `source` into `target` (of the same length) after the stream's earlier work;
    /// returns when the copy is done.
    pub fn copy_to_host<T: Pod>(
        &self,
        target: &mut [T],
        source: &impl DeviceRange<T>,
    ) -> Result<()> {
        let source = source.span()?;
        source.check(self, target.len(), "copying from the device")?;
        if source.bytes() == 0 {
            return Ok(());
        }
        if self.capturing() {
            return Err(graph::not_capturable("a copy into host memory"));
        }
        source.before(self, Access::Read)?;
        event!(debug, device = self.device().name(), stream = ?self.raw(), bytes = source.bytes(), "copy to host");
        self.copy_pageable(|driver| {
            // SAFETY: `len` elements on both sides; `target` is borrowed until the stream has
            // run the copy (`copy_pageable` waits).
            unsafe {
                driver.copy_to_host_async(
                    target.as_mut_ptr().cast(),
                    source.ptr,
                    source.bytes(),
                    self.raw(),
                )
            }
        })
    }

    /// Queues a copy of `source` into `target`, both on this stream's device and of one length.
    pub fn copy<T: Pod>(
        &self,
        target: &impl DeviceRange<T>,
        source: &impl DeviceRange<T>,
    ) -> Result<()> {
        let (target, source) = (target.span()?, source.span()?);
        source.check(self, target.len, "copying on the device")?;
        target.check(self, source.len, "copying on the device")?;
        let bytes = target.bytes();
        if bytes == 0 || target.ptr == source.ptr {
            // Nothing to copy, or a range copied onto itself: it already holds its contents.
            return Ok(());
        }
        if target.ptr < source.ptr + bytes as u64 && source.ptr < target.ptr + bytes as u64 {
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                format!(
                    "copying on the device: the source and target ranges overlap ({} elements \
                     apart, {} long); the drivers' copies are undefined for overlapping ranges: \
                     copy through a temporary buffer",
                    target.ptr.abs_diff(source.ptr) / target.element as u64,
                    target.len
                ),
            ));
        }
        if self.capturing() {
            graph::record_copy(
                self,
                (target.ptr, target.tracking),
                (source.ptr, source.tracking),
                bytes,
            );
            return Ok(());
        }
        let queue = Queue::Stream(self);
        let mut locked = Locked::new([
            (&**target.tracking, Access::Write),
            (&**source.tracking, Access::Read),
        ]);
        locked.before(&queue)?;
        event!(debug, device = self.device().name(), stream = ?self.raw(), bytes, "copy on device");
        let driver = self.device().current()?;
        // SAFETY: `len` elements each; both outlive the queued copy (see above).
        unsafe { driver.copy_on_device_async(target.ptr, source.ptr, bytes, self.raw()) }
            .map_err(|e| self.device().context(e))?;
        locked.note(&mark_end(&queue));
        Ok(())
    }

    /// Copies `source`, on another device, into `target` (of the same length, on this stream's
    /// device), in this stream's order.
    ///
    /// Between two GPUs of one driver (CUDA, HIP) it is one queued peer copy
    /// (`cuMemcpyPeerAsync`, `hipMemcpyPeerAsync`: direct over NVLink or PCIe, through the host
    /// where the two cannot reach each other): the source's last write is waited for first, on
    /// the host (its events belong to its own device), and the source's drop and later writes
    /// wait for the copy. Between devices of different drivers (a GPU and the host, two Vulkan
    /// devices), the elements go through host memory, and the copy is done when this returns.
    pub fn copy_from_peer<T: Pod>(
        &self,
        target: &impl DeviceRange<T>,
        source: &impl DeviceRange<T>,
    ) -> Result<()> {
        let (target_span, source_span) = (target.span()?, source.span()?);
        target_span.check(self, source_span.len, "copying from another device")?;
        if source_span.device.is_same(self.device()) {
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                format!(
                    "copying from another device: both ranges live on {}; use Stream::copy",
                    self.device().name()
                ),
            ));
        }
        let bytes = target_span.bytes();
        if bytes == 0 {
            return Ok(());
        }
        if self.capturing() {
            return Err(graph::not_capturable("a copy between devices"));
        }
        if source_span.device.vendor() == self.device().vendor() {
            let queue = Queue::Stream(self);
            let mut locked = Locked::new([
                (&**target_span.tracking, Access::Write),
                (&**source_span.tracking, Access::Read),
            ]);
            // The source's marks are its own device's: the host waits for its last write.
            locked
                .state(source_span.tracking)
                .map_or(Ok(()), |source| source.wait_write(source_span.device))?;
            locked
                .state(target_span.tracking)
                .map_or(Ok(()), |target| target.before(&queue, Access::Write))?;
            let driver = self.device().current()?;
            // SAFETY: `len` elements on both sides, each on its device; both outlive the queued
            // copy (their drops wait for the mark noted below).
            let queued = unsafe {
                driver.copy_peer_async(
                    (target_span.ptr, self.device().handle()),
                    (source_span.ptr, source_span.device.handle()),
                    bytes,
                    self.raw(),
                )
            }
            .map_err(|e| self.device().context(e))?;
            if queued {
                event!(debug, device = self.device().name(), stream = ?self.raw(), bytes, "copy from peer");
                let end = mark_end(&queue);
                if !matches!(end, After::Mark(_)) {
                    // Nothing the source's device could wait for: the copy is done on return.
                    self.synchronize()?;
                }
                locked.note(&end);
                return Ok(());
            }
        }
        let mut staged = vec![T::zeroed(); source_span.len];
        source_span
            .device
            .helper_stream()?
            .copy_to_host(&mut staged, source)?;
        self.copy_to_device(target, &staged)
    }

    /// Sets every element of `target` to `value` in the stream's order: a queued memset of 1, 2
    /// or 4 bytes where the value allows (any value whose bytes are all equal too); otherwise a
    /// copy from the host ([`Stream::copy_to_device`]), which returns once it has run.
    pub fn fill<T: Pod>(&self, target: &impl DeviceRange<T>, value: T) -> Result<()> {
        let span = target.span()?;
        span.check(self, span.len, "filling")?;
        if span.bytes() == 0 {
            return Ok(());
        }
        let Some((pattern, count)) = pattern_of(value, span.len) else {
            return self.copy_to_device(target, &vec![value; span.len]);
        };
        if self.capturing() {
            graph::record_fill(self, (span.ptr, span.tracking), pattern, count);
            return Ok(());
        }
        let queue = Queue::Stream(self);
        let mut locked = Locked::new([(&**span.tracking, Access::Write)]);
        locked.before(&queue)?;
        event!(debug, device = self.device().name(), stream = ?self.raw(), bytes = span.bytes(), "fill");
        let driver = self.device().current()?;
        // SAFETY: `count` aligned elements of the pattern; the target outlives the queued fill.
        unsafe { driver.fill_async(span.ptr, pattern, count, self.raw()) }
            .map_err(|e| self.device().context(e))?;
        locked.note(&mark_end(&queue));
        Ok(())
    }
}
