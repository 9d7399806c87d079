//! A Vulkan kernel's log buffer (its `gpu.printf`s and `cf.assert`s, which a compute shader has
//! no instruction for; `gpu_manifest::targets::vulkan::VulkanLogEntry` has the layout): made per launch, bound
//! last, and read when the stream learns the launch has run (its next synchronization, as CUDA
//! prints a kernel's `printf`s). `printf` records are formatted by the C library's own
//! `snprintf`, one conversion at a time, so the text is what C prints; a failed assertion is
//! printed on stderr in CUDA's words and becomes the stream's kernel fault, which its next
//! synchronization returns.

use super::allocation::{Allocation, Table};
use super::setup::Core;
use crate::error::{Error, ErrorKind, Result};
use gpu_manifest::targets::vulkan::{VulkanKernel, VulkanLogEntry, VulkanLogValue};
use std::ffi::{c_char, CString};
use std::io::Write;
use std::sync::Arc;

/// Words a launch's log holds after its two-word header (256 KiB in all).
const LOG_WORDS: u32 = 1 << 16;

/// One launch's log, kept with the launch's resources until it has run.
pub(crate) struct LaunchLog {
    pub buffer: Arc<Allocation>,
    pub kernel: Arc<VulkanKernel>,
}

/// A fresh log buffer: no words claimed, `LOG_WORDS` of room.
pub(crate) fn make(core: &'static Core, table: &'static Table) -> Result<Arc<Allocation>> {
    let mut bytes = vec![0u8; 4 * (2 + LOG_WORDS as usize)];
    bytes[4..8].copy_from_slice(&(LOG_WORDS + 2).to_ne_bytes());
    table.staging_with(core, &bytes)
}

impl LaunchLog {
    /// Prints what the launch logged (printf output on stdout, failed assertions on stderr);
    /// returns the kernel fault of its first failed assertion. Call once the launch has run.
    pub(crate) fn drain(&self) -> Option<Error> {
        let mapped = self.buffer.mapped()?;
        let total = (self.buffer.size / 4) as usize;
        // SAFETY: the host-visible, coherent mapping of the log, whose launch has run: no device
        // work writes it any more, and it holds `size` bytes.
        let words = unsafe { std::slice::from_raw_parts(mapped.cast::<u32>().cast_const(), total) };
        let claimed = words[0] as usize;
        let room = total.saturating_sub(2);
        let name = self.kernel.name.as_str();
        let mut printed = String::new();
        let mut fault = None;
        let mut at = 2;
        while at < 2 + claimed.min(room) {
            let Some(record) = self.kernel.log.get(words[at] as usize) else {
                eprintln!(
                    "kernel `{name}`: its log holds an unknown record {}",
                    words[at]
                );
                break;
            };
            let payload = &words[at + 1..];
            match record {
                VulkanLogEntry::Printf { format, arguments } => {
                    let floats: Vec<bool> = arguments
                        .iter()
                        .map(|a| *a == VulkanLogValue::Float)
                        .collect();
                    if payload.len() < 2 * floats.len() {
                        break;
                    }
                    let values: Vec<u64> = (0..floats.len())
                        .map(|j| u64::from(payload[2 * j]) | (u64::from(payload[2 * j + 1]) << 32))
                        .collect();
                    printed.push_str(&format_c(format, &values, &floats));
                    at += 1 + 2 * floats.len();
                }
                VulkanLogEntry::Assertion {
                    message,
                    file,
                    line,
                    function,
                } => {
                    let Some(ids) = payload.get(..6) else {
                        break;
                    };
                    eprintln!(
                        "{file}:{line}: {function}: block: [{},{},{}], thread: [{},{},{}] \
                         Assertion `{message}` failed.",
                        ids[3], ids[4], ids[5], ids[0], ids[1], ids[2]
                    );
                    fault.get_or_insert_with(|| {
                        Error::new(
                            ErrorKind::KernelFault,
                            format!(
                                "kernel `{name}`: assertion failed in block ({}, {}, {}), thread \
                                 ({}, {}, {}): {file}:{line}: {message}",
                                ids[3], ids[4], ids[5], ids[0], ids[1], ids[2]
                            ),
                        )
                    });
                    at += 7;
                }
            }
        }
        if claimed > room {
            printed.push_str(&format!(
                "[kernel `{name}`: {} words of printf and assertion records did not fit its \
                 {room}-word log]\n",
                claimed - room
            ));
        }
        if !printed.is_empty() {
            let mut out = std::io::stdout().lock();
            let _ = out.write_all(printed.as_bytes());
            let _ = out.flush();
        }
        fault
    }
}

/// `format` with `values` (each an f64's bits where `floats` says, else an i64), as C's
/// `printf` prints it: each conversion through `snprintf` with its own flags, width and
/// precision (integer conversions at 64 bits, `ll`; `%s` and `%n` print as-is, with no
/// string or pointer to give them).
fn format_c(format: &str, values: &[u64], floats: &[bool]) -> String {
    let mut out = String::new();
    let mut next = 0;
    let bytes = format.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] != b'%' {
            let start = i;
            while i < bytes.len() && bytes[i] != b'%' {
                i += 1;
            }
            out.push_str(&format[start..i]);
            continue;
        }
        if bytes.get(i + 1) == Some(&b'%') {
            out.push('%');
            i += 2;
            continue;
        }
        // %[flags][width][.precision][length]conversion
        let start = i;
        i += 1;
        while i < bytes.len() && b"-+ #0".contains(&bytes[i]) {
            i += 1;
        }
        while i < bytes.len() && (bytes[i].is_ascii_digit() || bytes[i] == b'.') {
            i += 1;
        }
        let spec_end = i;
        while i < bytes.len() && b"hljztL".contains(&bytes[i]) {
            i += 1;
        }
        let Some(&conversion) = bytes.get(i) else {
            out.push_str(&format[start..]);
            break;
        };
        i += 1;
        let spec = &format[start..spec_end];
        let value = values.get(next).copied();
        let float = floats.get(next).copied().unwrap_or(false);
        let text = match (conversion, value) {
            (b'd' | b'i' | b'u' | b'o' | b'x' | b'X' | b'c', Some(v)) => {
                next += 1;
                let integer = if float {
                    f64::from_bits(v) as i64
                } else {
                    v as i64
                };
                let spec = format!("{spec}ll{}", conversion as char);
                snprintf_integer(&spec, integer)
            }
            (b'e' | b'E' | b'f' | b'F' | b'g' | b'G' | b'a' | b'A', Some(v)) => {
                next += 1;
                let number = if float {
                    f64::from_bits(v)
                } else {
                    v as i64 as f64
                };
                snprintf_float(&format!("{spec}{}", conversion as char), number)
            }
            _ => format[start..i].to_string(),
        };
        out.push_str(&text);
    }
    out
}

/// `snprintf(spec, value)` for an integer conversion spec (`%08llx`).
fn snprintf_integer(spec: &str, value: i64) -> String {
    let Ok(spec) = CString::new(spec) else {
        return String::new();
    };
    let mut buffer = [0 as c_char; 128];
    // SAFETY: a NUL-terminated spec of one integer conversion with the `ll` length (it takes a
    // `long long`, which `value` is) and no `*`, into a buffer of the size given.
    let written = unsafe {
        libc::snprintf(
            buffer.as_mut_ptr(),
            buffer.len(),
            spec.as_ptr(),
            value as libc::c_longlong,
        )
    };
    c_text(&buffer, written)
}

/// `snprintf(spec, value)` for a floating-point conversion spec (`%.3f`).
fn snprintf_float(spec: &str, value: f64) -> String {
    let Ok(spec) = CString::new(spec) else {
        return String::new();
    };
    let mut buffer = [0 as c_char; 512];
    // SAFETY: a NUL-terminated spec of one floating-point conversion without a length (it takes
    // a `double`) and no `*`, into a buffer of the size given.
    let written =
        unsafe { libc::snprintf(buffer.as_mut_ptr(), buffer.len(), spec.as_ptr(), value) };
    c_text(&buffer, written)
}

/// What `snprintf` wrote into `buffer` (`written` bytes, truncated to the buffer).
fn c_text(buffer: &[c_char], written: i32) -> String {
    let length = usize::try_from(written).unwrap_or(0).min(buffer.len() - 1);
    let bytes: Vec<u8> = buffer[..length].iter().map(|&c| c as u8).collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

#[cfg(test)]
mod tests {
    use super::format_c;

    #[test]
    fn conversions_print_as_c_does() {
        let int = |v: i64| v as u64;
        let float = |v: f64| v.to_bits();
        assert_eq!(
            format_c(
                "Hello from %lld, %d, %f\n",
                &[int(1), int(2), float(3.0)],
                &[false, false, true]
            ),
            "Hello from 1, 2, 3.000000\n"
        );
        assert_eq!(
            format_c(
                "%5.2f|%-4d|%x|%%|%e",
                &[float(2.71), int(-7), int(255), float(1e-3)],
                &[true, false, false, true]
            ),
            " 2.71|-7  |ff|%|1.000000e-03"
        );
        // More conversions than values: the rest print as written.
        assert_eq!(format_c("%d %d", &[int(1)], &[false]), "1 %d");
    }
}
