//! Cubins as the CUDA driver loads them: the architecture in `e_flags` (its encoding changed with
//! ELF ABI version 8, LLVM's `EF_CUDA_*`), and per kernel the `.nv.info.<kernel>` attribute table
//! (`EIATTR_KPARAM_INFO`: each parameter's ordinal, offset and size; `EIATTR_CBANK_PARAM_SIZE`:
//! the parameter buffer; `EIATTR_MAX_THREADS` / `EIATTR_REQNTID`), `.nv.shared.<kernel>` for its
//! static shared memory and `.nv.info`'s `EIATTR_REGCOUNT`.

use super::{Image, Kernel, Kind, Param};
use object::read::elf::{ElfFile64, FileHeader};
use object::{Object, ObjectSection, ObjectSymbol};
use std::collections::HashMap;

const EIATTR_MAX_THREADS: u8 = 0x05;
const EIATTR_REQNTID: u8 = 0x10;
const EIATTR_FRAME_SIZE: u8 = 0x11;
const EIATTR_KPARAM_INFO: u8 = 0x17;
const EIATTR_CBANK_PARAM_SIZE: u8 = 0x19;
const EIATTR_REGCOUNT: u8 = 0x2f;

/// Each attribute of an `.nv.info` table: (attribute, payload). Every entry starts with its
/// format and attribute bytes; `EIFMT_NVAL`, `EIFMT_BVAL` and `EIFMT_HVAL` entries are four bytes
/// (their value, if any, in the last two), `EIFMT_SVAL` ones carry a 16-bit length and that many
/// bytes.
fn attributes(mut table: &[u8]) -> Vec<(u8, &[u8])> {
    let mut found = Vec::new();
    while table.len() >= 2 {
        let (format, attribute) = (table[0], table[1]);
        let (payload, used) = match format {
            0x01..=0x03 => (table.get(2..4).unwrap_or_default(), 4),
            0x04 if table.len() >= 4 => {
                let length = u16::from_le_bytes([table[2], table[3]]) as usize;
                (table.get(4..4 + length).unwrap_or_default(), 4 + length)
            }
            _ => break,
        };
        found.push((attribute, payload));
        table = table.get(used..).unwrap_or_default();
    }
    found
}

fn u32_at(bytes: &[u8], at: usize) -> u32 {
    bytes
        .get(at..at + 4)
        .map_or(0, |b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
}

fn u16_at(bytes: &[u8], at: usize) -> u16 {
    bytes
        .get(at..at + 2)
        .map_or(0, |b| u16::from_le_bytes([b[0], b[1]]))
}

pub fn read(bytes: &[u8]) -> Result<Image, String> {
    let file =
        ElfFile64::<object::Endianness>::parse(bytes).map_err(|e| format!("a cubin: {e}"))?;
    let header = file.elf_header();
    let flags = header.e_flags(file.endian());
    let abi_version = header.e_ident().abi_version;
    // LLVM's EF_CUDA_SM (0xff) and EF_CUDA_ACCELERATORS_V1 (0x800) before ELF ABI version 8,
    // EF_CUDA_SM_MASK (0xff00) and EF_CUDA_ACCELERATORS (0x8) from it.
    let sm = if abi_version >= 8 {
        ((flags & 0xff00) >> 8, flags & 0x8 != 0)
    } else {
        (flags & 0xff, flags & 0x800 != 0)
    };
    let sm = (sm.0 / 10, sm.0 % 10, sm.1);
    // EIATTR_REGCOUNT names its kernel by symbol index.
    let mut registers = HashMap::new();
    if let Some(info) = file.section_by_name(".nv.info") {
        let data = info.data().map_err(|e| e.to_string())?;
        for (attribute, payload) in attributes(data) {
            if attribute == EIATTR_REGCOUNT {
                let symbol = file.symbol_by_index(object::SymbolIndex(u32_at(payload, 0) as usize));
                if let Some(name) = symbol.ok().and_then(|s| s.name().ok().map(String::from)) {
                    registers.insert(name, u32_at(payload, 4));
                }
            }
        }
    }
    let mut kernels = Vec::new();
    for section in file.sections() {
        let Some(name) = section
            .name()
            .ok()
            .and_then(|n| n.strip_prefix(".nv.info."))
        else {
            continue;
        };
        let data = section.data().map_err(|e| e.to_string())?;
        let mut params = Vec::new();
        let (mut param_bytes, mut max_threads, mut required_block, mut local_bytes) =
            (0, 1024, None, 0);
        for (attribute, payload) in attributes(data) {
            match attribute {
                EIATTR_KPARAM_INFO => {
                    let ordinal = u16_at(payload, 4) as usize;
                    let offset = u16_at(payload, 6) as usize;
                    let size = ((u32_at(payload, 8) >> 18) & 0x3fff) as usize;
                    params.push((
                        ordinal,
                        Param {
                            offset,
                            size,
                            pointer: false,
                        },
                    ));
                }
                EIATTR_CBANK_PARAM_SIZE => param_bytes = u16_at(payload, 0) as usize,
                EIATTR_MAX_THREADS => {
                    max_threads =
                        u32_at(payload, 0) * u32_at(payload, 4).max(1) * u32_at(payload, 8).max(1)
                }
                EIATTR_REQNTID => {
                    let block = [u32_at(payload, 0), u32_at(payload, 4), u32_at(payload, 8)];
                    max_threads = block.iter().product();
                    required_block = Some(block);
                }
                EIATTR_FRAME_SIZE => local_bytes = u64::from(u32_at(payload, 4)),
                _ => {}
            }
        }
        params.sort_by_key(|(ordinal, _)| *ordinal);
        if params
            .iter()
            .enumerate()
            .any(|(i, (ordinal, _))| i != *ordinal)
        {
            return Err(format!(
                "kernel `{name}`: its parameter ordinals are not 0..n"
            ));
        }
        // From sm_80 on, each block's shared memory section also holds the 1 KiB the driver
        // reserves per block (`.nv.shared.reserved.0` is then present;
        // CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK): the kernel's own static shared
        // memory, what CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES reports, is the rest.
        let reserved = if file.section_by_name(".nv.shared.reserved.0").is_some() {
            1024
        } else {
            0
        };
        let static_shared = file
            .section_by_name(&format!(".nv.shared.{name}"))
            .map_or(0, |s| s.size().saturating_sub(reserved));
        kernels.push(Kernel {
            name: name.to_string(),
            params: params.into_iter().map(|(_, p)| p).collect(),
            param_bytes,
            static_shared,
            max_threads,
            required_block,
            registers: registers.get(name).copied().unwrap_or(32),
            local_bytes,
        });
    }
    Ok(Image {
        kind: Kind::Cubin { sm },
        kernels,
    })
}
