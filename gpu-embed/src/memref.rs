//! Memref views: a buffer as a kernel's `memref<...>` argument sees it. MLIR lowers a ranked
//! memref to a descriptor (allocated pointer, aligned pointer, offset, then a size and a stride
//! per dimension, all in elements); a view holds the offset, sizes and strides, checked against
//! its buffer when it is made, and the launch stub checks it against the memref type the kernel
//! declares.

use crate::device::Device;
use crate::error::{Error, ErrorKind, Result};
use crate::memory::{sealed, DeviceBuffer, DeviceRange, Span};
use crate::tracking::Tracked;
use bytemuck::Pod;

/// `N` dimensions of a [`DeviceBuffer`]: element `[i0, i1, ...]` is at
/// `offset + i0 * strides[0] + i1 * strides[1] + ...` in the buffer.
#[derive(Debug)]
pub struct MemrefView<'a, T: Pod, const N: usize> {
    buffer: &'a DeviceBuffer<T>,
    offset: usize,
    sizes: [usize; N],
    strides: [usize; N],
}

impl<T: Pod, const N: usize> Clone for MemrefView<'_, T, N> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T: Pod, const N: usize> Copy for MemrefView<'_, T, N> {}

/// The row-major strides of `sizes`: each dimension's stride is the product of the later sizes.
fn row_major<const N: usize>(sizes: [usize; N]) -> Option<[usize; N]> {
    let mut strides = [0; N];
    let mut stride = 1usize;
    for d in (0..N).rev() {
        strides[d] = stride;
        stride = stride.checked_mul(sizes[d])?;
    }
    Some(strides)
}

impl<T: Pod> DeviceBuffer<T> {
    /// Elements `range` as a 1-D view, for a kernel's `memref` argument; an error when the range
    /// is outside the buffer.
    pub fn slice(&self, range: std::ops::Range<usize>) -> Result<MemrefView<'_, T, 1>> {
        if range.start > range.end || range.end > self.len() {
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                format!(
                    "slice {}..{} of a buffer of {} elements",
                    range.start,
                    range.end,
                    self.len()
                ),
            ));
        }
        self.strided_view(range.start, [range.end - range.start], [1])
    }

    /// The buffer as a row-major array of `sizes`, from its first element (`[rows, cols]` for a
    /// matrix). An error when the view needs more elements than the buffer holds.
    #[inline]
    pub fn view<const N: usize>(&self, sizes: [usize; N]) -> Result<MemrefView<'_, T, N>> {
        let strides = row_major(sizes).ok_or_else(|| overflow(&sizes))?;
        self.strided_view(0, sizes, strides)
    }

    /// Any strided window of the buffer: a sub-matrix, a column, every other element. An error
    /// when an element of the view lies outside the buffer, when the offset lies past its end
    /// (also for a view without elements), or when a size or stride does not fit the `i64`
    /// fields of a memref descriptor.
    #[inline]
    pub fn strided_view<const N: usize>(
        &self,
        offset: usize,
        sizes: [usize; N],
        strides: [usize; N],
    ) -> Result<MemrefView<'_, T, N>> {
        if offset > self.len() {
            return Err(bad_view(BadView::Offset {
                offset,
                len: self.len(),
            }));
        }
        if let Some(&too_big) = sizes
            .iter()
            .chain(&strides)
            .find(|&&v| v > isize::MAX as usize)
        {
            return Err(bad_view(BadView::TooBig {
                sizes: &sizes,
                strides: &strides,
                too_big,
            }));
        }
        if !sizes.contains(&0) {
            let last = sizes
                .iter()
                .zip(&strides)
                .try_fold(offset, |at, (&size, &stride)| {
                    (size - 1).checked_mul(stride)?.checked_add(at)
                })
                .ok_or_else(|| overflow(&sizes))?;
            if last >= self.len() {
                return Err(bad_view(BadView::Reaches {
                    sizes: &sizes,
                    strides: &strides,
                    offset,
                    last,
                    len: self.len(),
                }));
            }
        }
        Ok(MemrefView {
            buffer: self,
            offset,
            sizes,
            strides,
        })
    }
}

impl<'a, T: Pod, const N: usize> MemrefView<'a, T, N> {
    /// The view's buffer as a launch uses it (its work tracked). Used by `include_gpu_binary!`'s
    /// expansion.
    #[doc(hidden)]
    pub fn tracked(&self) -> Tracked<'a> {
        Tracked {
            tracking: self.buffer.tracking(),
        }
    }
}

impl<T: Pod> sealed::Range for MemrefView<'_, T, 1> {
    fn span(&self) -> Result<Span<'_>> {
        let [len] = self.sizes();
        if len > 1 && self.strides() != [1] {
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                format!(
                    "a copy needs contiguous elements; the view has stride {}",
                    self.strides()[0]
                ),
            ));
        }
        let buffer = self.buffer();
        // The offset is at most the buffer's length (`strided_view` checks it).
        let ptr = buffer.address() + (self.offset() * size_of::<T>()) as u64;
        Ok(Span::new(
            buffer.device(),
            ptr,
            len,
            size_of::<T>(),
            buffer.tracking(),
        ))
    }
}

impl<T: Pod> DeviceRange<T> for MemrefView<'_, T, 1> {}

#[cold]
fn overflow(sizes: &[usize]) -> Error {
    Error::new(
        ErrorKind::InvalidArgument,
        format!("a view of sizes {sizes:?} is larger than any buffer"),
    )
}

/// Why `strided_view` refuses a view. The messages are made apart from the checks (which a
/// launch inlines: its arguments' views stay in registers).
enum BadView<'a> {
    Offset {
        offset: usize,
        len: usize,
    },
    TooBig {
        sizes: &'a [usize],
        strides: &'a [usize],
        too_big: usize,
    },
    Reaches {
        sizes: &'a [usize],
        strides: &'a [usize],
        offset: usize,
        last: usize,
        len: usize,
    },
}

#[cold]
fn bad_view(why: BadView) -> Error {
    let message = match why {
        BadView::Offset { offset, len } => {
            format!("a view from element {offset} of a buffer of {len} elements")
        }
        BadView::TooBig {
            sizes,
            strides,
            too_big,
        } => format!(
            "a view of sizes {sizes:?}, strides {strides:?}: {too_big} does not fit a memref \
             descriptor's i64"
        ),
        BadView::Reaches {
            sizes,
            strides,
            offset,
            last,
            len,
        } => format!(
            "a view of sizes {sizes:?}, strides {strides:?} from element {offset} reaches \
             element {last}, but the buffer holds {len} elements"
        ),
    };
    Error::new(ErrorKind::InvalidArgument, message)
}

impl<'a, T: Pod, const N: usize> MemrefView<'a, T, N> {
    /// The buffer viewed.
    pub fn buffer(&self) -> &'a DeviceBuffer<T> {
        self.buffer
    }

    /// Elements from the buffer's start to the view's element 0.
    pub fn offset(&self) -> usize {
        self.offset
    }

    /// Elements per dimension.
    pub fn sizes(&self) -> [usize; N] {
        self.sizes
    }

    /// Elements to step per index, per dimension.
    pub fn strides(&self) -> [usize; N] {
        self.strides
    }

    /// Whether the view is its sizes laid out row-major without gaps (dimensions of size 1 may
    /// have any stride: they are never stepped over).
    pub fn is_contiguous(&self) -> bool {
        let Some(expected) = row_major(self.sizes) else {
            return false;
        };
        (0..N).all(|d| self.sizes[d] <= 1 || self.strides[d] == expected[d])
    }
}

/// What a launch stub accepts for a `memref` argument of rank `N`: a view of that rank, or, for
/// rank 1, a whole buffer (rank 0: its first element).
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be passed where the kernel takes a rank-{N} memref of `{T}`",
    label = "the kernel takes a rank-{N} memref of `{T}`",
    note = "pass a `MemrefView<{T}, {N}>` (from `buffer.view([...])` or `buffer.strided_view(...)`) of a `DeviceBuffer<{T}>`; a whole `&DeviceBuffer<{T}>` serves rank 1"
)]
pub trait AsMemref<'a, T: Pod, const N: usize> {
    /// The view a launch stub passes as the memref's descriptor.
    fn into_memref(self) -> Result<MemrefView<'a, T, N>>;
}

impl<'a, T: Pod, const N: usize> AsMemref<'a, T, N> for MemrefView<'a, T, N> {
    #[inline]
    fn into_memref(self) -> Result<MemrefView<'a, T, N>> {
        Ok(self)
    }
}

impl<'a, T: Pod, const N: usize> AsMemref<'a, T, N> for &MemrefView<'a, T, N> {
    #[inline]
    fn into_memref(self) -> Result<MemrefView<'a, T, N>> {
        Ok(*self)
    }
}

impl<'a, T: Pod> AsMemref<'a, T, 1> for &'a DeviceBuffer<T> {
    #[inline]
    fn into_memref(self) -> Result<MemrefView<'a, T, 1>> {
        self.view([self.len()])
    }
}

impl<'a, T: Pod> AsMemref<'a, T, 0> for &'a DeviceBuffer<T> {
    fn into_memref(self) -> Result<MemrefView<'a, T, 0>> {
        if self.is_empty() {
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                "a rank-0 memref needs one element; the buffer is empty",
            ));
        }
        self.view([])
    }
}

/// The memref type a kernel parameter declares, as the launch stub knows it from the manifest.
#[doc(hidden)]
pub struct MemrefType<const N: usize> {
    /// `None` for a dynamic size.
    pub shape: [Option<u64>; N],
    pub layout: MemrefLayout<N>,
}

#[doc(hidden)]
pub enum MemrefLayout<const N: usize> {
    /// Row-major and contiguous; the kernel may assume offset 0 and row-major strides.
    Identity,
    /// `strided<[...], offset: ...>`; `None` where the type says `?`.
    Strided {
        strides: [Option<i64>; N],
        offset: Option<i64>,
    },
}

/// The lowered descriptor of one memref argument, in parameter order.
#[doc(hidden)]
pub struct MemrefDescriptor<const N: usize> {
    pub allocated: u64,
    pub aligned: u64,
    pub offset: i64,
    pub sizes: [i64; N],
    pub strides: [i64; N],
}

/// Checks `view` against the declared type and builds the descriptor a launch passes. For the
/// identity layout the view's offset moves the aligned pointer (the kernel reads no offset).
#[doc(hidden)]
#[inline]
pub fn memref_descriptor<T: Pod, const N: usize>(
    view: MemrefView<'_, T, N>,
    ty: &MemrefType<N>,
    device: &Device,
    argument: &str,
) -> Result<MemrefDescriptor<N>> {
    if !view.buffer.device().is_same(device) {
        return Err(mismatched(argument, Mismatch::OtherDevice));
    }
    for (d, (&want, &size)) in ty.shape.iter().zip(&view.sizes).enumerate() {
        if let Some(want) = want.filter(|&want| want != size as u64) {
            return Err(mismatched(argument, Mismatch::Size { d, size, want }));
        }
    }
    let base = view.buffer.address();
    let element = std::mem::size_of::<T>() as u64;
    let as_i64 = |values: [usize; N]| values.map(|v| v as i64);
    let (aligned, offset, strides) = match &ty.layout {
        MemrefLayout::Identity => {
            if !view.is_contiguous() {
                return Err(mismatched(
                    argument,
                    Mismatch::NotContiguous {
                        sizes: &view.sizes,
                        strides: &view.strides,
                    },
                ));
            }
            let strides = row_major(view.sizes).unwrap_or(view.strides);
            (base + view.offset as u64 * element, 0, strides)
        }
        MemrefLayout::Strided { strides, offset } => {
            for (d, (&want, &stride)) in strides.iter().zip(&view.strides).enumerate() {
                if let Some(want) = want.filter(|&want| want != stride as i64 && view.sizes[d] > 1)
                {
                    return Err(mismatched(argument, Mismatch::Stride { d, stride, want }));
                }
            }
            if let Some(want) = offset.filter(|&want| want != view.offset as i64) {
                return Err(mismatched(
                    argument,
                    Mismatch::Offset {
                        offset: view.offset,
                        want,
                    },
                ));
            }
            (base, view.offset as i64, view.strides)
        }
    };
    Ok(MemrefDescriptor {
        allocated: base,
        aligned,
        offset,
        sizes: as_i64(view.sizes),
        strides: as_i64(strides),
    })
}

/// Why a view does not fit the memref type a kernel declares. The messages are made apart
/// from the checks (which the launch stubs inline).
enum Mismatch<'a> {
    OtherDevice,
    Size {
        d: usize,
        size: usize,
        want: u64,
    },
    NotContiguous {
        sizes: &'a [usize],
        strides: &'a [usize],
    },
    Stride {
        d: usize,
        stride: usize,
        want: i64,
    },
    Offset {
        offset: usize,
        want: i64,
    },
}

#[cold]
fn mismatched(argument: &str, why: Mismatch) -> Error {
    let why = match why {
        Mismatch::OtherDevice => "the buffer lives on another device".to_string(),
        Mismatch::Size { d, size, want } => {
            format!("dimension {d} has size {size}, the kernel's memref type fixes it at {want}")
        }
        Mismatch::NotContiguous { sizes, strides } => format!(
            "the kernel takes a contiguous row-major memref, the view has sizes {sizes:?} and \
             strides {strides:?}; pass a contiguous view, or declare a `strided<...>` layout"
        ),
        Mismatch::Stride { d, stride, want } => format!(
            "dimension {d} has stride {stride}, the kernel's memref type fixes it at {want}"
        ),
        Mismatch::Offset { offset, want } => format!(
            "the view starts at element {offset}, the kernel's memref type fixes the offset at \
             {want}"
        ),
    };
    Error::new(ErrorKind::InvalidArgument, format!("{argument}: {why}"))
}
