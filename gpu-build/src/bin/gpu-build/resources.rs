//! What an object records about each kernel's resources.
//!
//! - cubin: `.nv.info` holds per-symbol attributes — `EIATTR_REGCOUNT` (registers) and
//!   `EIATTR_FRAME_SIZE` (stack frame) — for the kernel whose symbol index is the low bytes of its
//!   `.text.<kernel>` section's `sh_info` (before sm_90 the high byte of `sh_info` repeats the
//!   register count); static shared memory is the size of `.nv.shared.<kernel>`, less the 1 KiB
//!   per block the driver reserves (CUDA's `reservedSharedMemPerBlock`) when the kernel refers to
//!   it (`.nv.reservedSmem.*`, sm_90 cubins). These are the figures `ptxas -v` prints (checked
//!   against it for sm_80 and sm_90); the spill counts it prints are not stored in the cubin.
//! - hsaco: the `amdhsa.kernels` entries of the AMDGPU metadata note (`NT_AMDGPU_METADATA`,
//!   MessagePack): VGPRs, AGPRs, SGPRs, LDS, scratch and spill counts.

use object::read::elf::{ElfFile64, SectionHeader};
use object::{Endianness, Object, ObjectSection, ObjectSymbol};

/// `EIATTR_FRAME_SIZE`: a kernel's stack frame in bytes, per symbol.
const EIATTR_FRAME_SIZE: u8 = 0x11;
/// `EIATTR_REGCOUNT`: a kernel's register count, per symbol.
const EIATTR_REGCOUNT: u8 = 0x2f;
/// `EIFMT_SVAL`: an attribute with a `(u32 symbol, u32 value)` payload.
const EIFMT_SVAL: u8 = 0x04;
/// The shared memory per block the CUDA driver reserves on sm_80 and later.
const RESERVED_SHARED_BYTES: u64 = 1024;
/// The ELF note type of the AMDGPU code object metadata.
const NT_AMDGPU_METADATA: u32 = 32;

/// One kernel's resource usage, in words.
pub struct Usage {
    pub kernel: String,
    pub summary: String,
}

fn elf(bytes: &[u8]) -> Result<ElfFile64<'_, Endianness>, String> {
    ElfFile64::parse(bytes).map_err(|e| format!("not a 64-bit ELF object: {e}"))
}

/// The `(attribute, symbol, value)` entries of an `.nv.info` section with symbol values.
fn nv_info_values(data: &[u8]) -> Vec<(u8, u32, u32)> {
    let mut values = Vec::new();
    let mut at = 0;
    while at + 4 <= data.len() {
        let (format, attribute) = (data[at], data[at + 1]);
        let size = u16::from_le_bytes([data[at + 2], data[at + 3]]) as usize;
        match format {
            EIFMT_SVAL => {
                if let Some(payload) = data.get(at + 4..at + 4 + size) {
                    if payload.len() == 8 {
                        let word = |i: usize| {
                            u32::from_le_bytes([
                                payload[i],
                                payload[i + 1],
                                payload[i + 2],
                                payload[i + 3],
                            ])
                        };
                        values.push((attribute, word(0), word(4)));
                    }
                }
                at += 4 + size;
            }
            // EIFMT_NVAL, EIFMT_BVAL, EIFMT_HVAL: the value is in the header itself.
            1..=3 => at += 4,
            _ => break,
        }
    }
    values
}

pub fn cubin(bytes: &[u8]) -> Result<Vec<Usage>, String> {
    let file = elf(bytes)?;
    let endian = file.endian();
    let section_bytes = |name: &str| {
        file.section_by_name(name)
            .map(|s| s.data().map(<[u8]>::to_vec).unwrap_or_default())
    };
    let globals = section_bytes(".nv.info")
        .map(|data| nv_info_values(&data))
        .unwrap_or_default();
    let reserves_shared_memory = file
        .symbols()
        .any(|s| s.name().is_ok_and(|n| n.starts_with(".nv.reservedSmem")));
    let mut usages = Vec::new();
    for section in file.sections() {
        let Some(kernel) = section.name().ok().and_then(|n| n.strip_prefix(".text.")) else {
            continue;
        };
        let info = section.elf_section_header().sh_info(endian);
        let symbol = info & 0x00ff_ffff;
        let attribute = |wanted: u8| {
            globals
                .iter()
                .find(|(attribute, s, _)| *attribute == wanted && *s == symbol)
                .map(|(_, _, value)| *value)
        };
        let registers = attribute(EIATTR_REGCOUNT).unwrap_or(info >> 24);
        let reserved = if reserves_shared_memory {
            RESERVED_SHARED_BYTES
        } else {
            0
        };
        let shared = file
            .section_by_name(&format!(".nv.shared.{kernel}"))
            .map_or(0, |s| s.size().saturating_sub(reserved));
        let frame = attribute(EIATTR_FRAME_SIZE)
            .map(|value| format!(", {value} B stack frame"))
            .unwrap_or_default();
        usages.push(Usage {
            kernel: kernel.to_string(),
            summary: format!("{registers} registers, {shared} B static shared memory{frame}"),
        });
    }
    usages.sort_by(|a, b| a.kernel.cmp(&b.kernel));
    Ok(usages)
}

/// The AMDGPU metadata note's MessagePack bytes.
fn amdgpu_metadata(bytes: &[u8]) -> Result<Vec<u8>, String> {
    let file = elf(bytes)?;
    for section in file.sections() {
        let Ok(note) = section.data() else { continue };
        // name size, descriptor size, type; then the name and the descriptor, 4-byte aligned.
        let word = |at: usize| {
            note.get(at..at + 4)
                .map(|w| u32::from_le_bytes([w[0], w[1], w[2], w[3]]) as usize)
        };
        let mut at = 0;
        while let (Some(name_size), Some(desc_size), Some(kind)) =
            (word(at), word(at + 4), word(at + 8))
        {
            let name_at = at + 12;
            let desc_at = name_at + name_size.div_ceil(4) * 4;
            let name = note.get(name_at..name_at + name_size);
            if kind == NT_AMDGPU_METADATA as usize && name == Some(b"AMDGPU\0".as_slice()) {
                return note
                    .get(desc_at..desc_at + desc_size)
                    .map(<[u8]>::to_vec)
                    .ok_or_else(|| "a truncated AMDGPU metadata note".to_string());
            }
            at = desc_at + desc_size.div_ceil(4) * 4;
        }
    }
    Err("no AMDGPU metadata note (NT_AMDGPU_METADATA)".to_string())
}

pub fn hsaco(bytes: &[u8]) -> Result<Vec<Usage>, String> {
    let metadata = amdgpu_metadata(bytes)?;
    let value = rmpv::decode::read_value(&mut metadata.as_slice())
        .map_err(|e| format!("the AMDGPU metadata is not MessagePack: {e}"))?;
    let field = |map: &rmpv::Value, key: &str| -> Option<rmpv::Value> {
        map.as_map()?
            .iter()
            .find(|(k, _)| k.as_str() == Some(key))
            .map(|(_, v)| v.clone())
    };
    let kernels = field(&value, "amdhsa.kernels")
        .and_then(|k| k.as_array().cloned())
        .ok_or("the AMDGPU metadata has no amdhsa.kernels")?;
    let mut usages = Vec::new();
    for kernel in &kernels {
        let number = |key: &str| field(kernel, key).and_then(|v| v.as_u64()).unwrap_or(0);
        let name = field(kernel, ".name")
            .and_then(|n| n.as_str().map(String::from))
            .unwrap_or_default();
        usages.push(Usage {
            kernel: name,
            summary: format!(
                "{} VGPRs, {} AGPRs, {} SGPRs, {} B LDS, {} B scratch, {} VGPR and {} SGPR spills",
                number(".vgpr_count"),
                number(".agpr_count"),
                number(".sgpr_count"),
                number(".group_segment_fixed_size"),
                number(".private_segment_fixed_size"),
                number(".vgpr_spill_count"),
                number(".sgpr_spill_count"),
            ),
        });
    }
    usages.sort_by(|a, b| a.kernel.cmp(&b.kernel));
    Ok(usages)
}
