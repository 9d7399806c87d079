//! Device memory: buffers that allocate, copy both ways, and free on drop.

use crate::device::Device;
use crate::driver::cuda::{check, CuDevicePtr};
use crate::error::{Error, ErrorKind, Result};
use std::marker::PhantomData;

/// A raw device address, for kernels that take pointers (`!llvm.ptr`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DevicePtr(pub u64);

/// `len` elements of `T` in a device's memory.
pub struct DeviceBuffer<T: Copy> {
    device: Device,
    ptr: CuDevicePtr,
    len: usize,
    _element: PhantomData<T>,
}

impl<T: Copy> DeviceBuffer<T> {
    fn bytes(len: usize) -> Result<usize> {
        len.checked_mul(size_of::<T>()).ok_or_else(|| Error::new(ErrorKind::InvalidArgument, "buffer size overflows"))
    }

    /// Uninitialized device memory for `len` elements.
    pub fn alloc(device: &Device, len: usize) -> Result<DeviceBuffer<T>> {
        let api = device.make_current()?;
        let mut ptr = 0;
        let bytes = Self::bytes(len)?;
        if bytes > 0 {
            // SAFETY: valid out-pointer, current context.
            check(api, unsafe { (api.mem_alloc)(&mut ptr, bytes) }, || format!("allocating {bytes} bytes on {}", device.name()))?;
        }
        Ok(DeviceBuffer { device: device.clone(), ptr, len, _element: PhantomData })
    }

    /// A device copy of `data`.
    pub fn from_slice(device: &Device, data: &[T]) -> Result<DeviceBuffer<T>> {
        let mut buffer = DeviceBuffer::alloc(device, data.len())?;
        buffer.copy_from(data)?;
        Ok(buffer)
    }

    /// Overwrites the buffer with `data` (of the same length).
    pub fn copy_from(&mut self, data: &[T]) -> Result<()> {
        self.check_len(data.len())?;
        if data.is_empty() {
            return Ok(());
        }
        let api = self.device.make_current()?;
        // SAFETY: both ranges are `len` elements long.
        check(api, unsafe { (api.memcpy_htod)(self.ptr, data.as_ptr().cast(), size_of_val(data)) }, || "copying to the device".into())
    }

    /// Copies the buffer into `out` (of the same length).
    pub fn copy_to(&self, out: &mut [T]) -> Result<()> {
        self.check_len(out.len())?;
        if out.is_empty() {
            return Ok(());
        }
        let api = self.device.make_current()?;
        // SAFETY: both ranges are `len` elements long; the driver writes plain bytes of `T`.
        check(api, unsafe { (api.memcpy_dtoh)(out.as_mut_ptr().cast(), self.ptr, size_of_val(out)) }, || "copying from the device".into())
    }

    /// The buffer's contents.
    pub fn to_vec(&self) -> Result<Vec<T>>
    where
        T: Default,
    {
        let mut out = vec![T::default(); self.len];
        self.copy_to(&mut out)?;
        Ok(out)
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn device(&self) -> &Device {
        &self.device
    }

    pub fn device_ptr(&self) -> DevicePtr {
        DevicePtr(self.ptr)
    }

    fn check_len(&self, len: usize) -> Result<()> {
        if len == self.len {
            Ok(())
        } else {
            Err(Error::new(ErrorKind::InvalidArgument, format!("length mismatch: the buffer holds {} elements, the host slice {len}", self.len)))
        }
    }
}

impl<T: Copy> Drop for DeviceBuffer<T> {
    fn drop(&mut self) {
        if self.ptr == 0 {
            return;
        }
        if let Ok(api) = self.device.make_current() {
            // SAFETY: allocated by this buffer and not used after this. A failure here has nowhere
            // to go.
            unsafe { (api.mem_free)(self.ptr) };
        }
    }
}
