//! Transfers, each queued on a stream: uploads of host bytes through staging buffers,
//! downloads, copies between device ranges and fills. Built on the device core, its allocation table and
//! its streams (`setup.rs`, `allocation.rs`, `stream.rs`); each transfer uses the table of the
//! stream's device.

use super::errors::invalid;
use super::setup::Core;
use super::stream::Stream;
use crate::driver::Pattern;
use crate::error::Result;
use ash::vk;
use std::sync::Arc;

fn copy_region(
    core: &Core,
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
        core.device
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
    let (core, table) = (stream.core, stream.table);
    let place = table.place(target, bytes as u64)?;
    // SAFETY: the caller guarantees `bytes` readable bytes.
    let data = unsafe { std::slice::from_raw_parts(source, bytes) };
    let staging = table.staging_with(core, data)?;
    stream.submit(|command_buffer, resources| {
        copy_region(
            core,
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
    let (core, table) = (stream.core, stream.table);
    let place = table.place(source, bytes as u64)?;
    let staging = Arc::new(table.buffer(core, bytes as u64, true)?);
    let value = stream.submit(|command_buffer, resources| {
        copy_region(
            core,
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
    if let Some(mapped) = staging.mapped() {
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
    let (core, table) = (stream.core, stream.table);
    let to = table.place(target, bytes as u64)?;
    let from = table.place(source, bytes as u64)?;
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
            core,
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
    let (core, table) = (stream.core, stream.table);
    let place = table.place(target, bytes)?;
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
        Some(table.staging_with(core, &staged)?)
    } else {
        None
    };
    stream.submit(|command_buffer, resources| {
        let buffer = place.allocation.buffer;
        if middle > 0 {
            // SAFETY: a recording command buffer; offset and size are multiples of 4 within
            // the buffer.
            unsafe {
                core.device.cmd_fill_buffer(
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
                    core,
                    command_buffer,
                    (edges.buffer, 0),
                    (buffer, place.offset),
                    head,
                );
            }
            if tail > 0 {
                copy_region(
                    core,
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
