//! hsaco code objects as ROCm's loader reads them: the processor in `e_flags`
//! (`EF_AMDGPU_MACH`, with the xnack and sramecc settings of code object v4 and later), the code
//! object version in `EI_ABIVERSION`, and the AMDGPU metadata note (MessagePack,
//! `amdhsa.kernels`): each kernel's explicit arguments (`.args`, hidden ones left out), kernarg
//! size, group segment and workgroup limit. LLVM's AMDGPUUsage documents all of them.

use super::{Image, Kernel, Kind, Param};
use object::read::elf::{ElfFile64, FileHeader};
use object::{Object, ObjectSection};
use rmpv::Value;

/// `EF_AMDGPU_MACH_AMDGCN_*` of LLVM 22's `ELF.h`, from gfx900 on.
const MACHS: &[(u32, &str)] = &[
    (0x02c, "gfx900"),
    (0x02d, "gfx902"),
    (0x02e, "gfx904"),
    (0x02f, "gfx906"),
    (0x030, "gfx908"),
    (0x031, "gfx909"),
    (0x032, "gfx90c"),
    (0x033, "gfx1010"),
    (0x034, "gfx1011"),
    (0x035, "gfx1012"),
    (0x036, "gfx1030"),
    (0x037, "gfx1031"),
    (0x038, "gfx1032"),
    (0x039, "gfx1033"),
    (0x03d, "gfx1035"),
    (0x03e, "gfx1034"),
    (0x03f, "gfx90a"),
    (0x041, "gfx1100"),
    (0x042, "gfx1013"),
    (0x043, "gfx1150"),
    (0x044, "gfx1103"),
    (0x045, "gfx1036"),
    (0x046, "gfx1101"),
    (0x047, "gfx1102"),
    (0x048, "gfx1200"),
    (0x049, "gfx1250"),
    (0x04a, "gfx1151"),
    (0x04c, "gfx942"),
    (0x04e, "gfx1201"),
    (0x04f, "gfx950"),
    (0x051, "gfx9-generic"),
    (0x052, "gfx10-1-generic"),
    (0x053, "gfx10-3-generic"),
    (0x054, "gfx11-generic"),
    (0x055, "gfx1152"),
    (0x058, "gfx1153"),
    (0x059, "gfx12-generic"),
    (0x05a, "gfx1251"),
    (0x05f, "gfx9-4-generic"),
];

/// The chip an `EF_AMDGPU_MACH` value names.
fn gfx_name(mach: u32) -> Option<&'static str> {
    MACHS.iter().find(|(m, _)| *m == mach).map(|(_, n)| *n)
}

/// The generic processor a chip's runtime also loads (AMDGPUUsage, "Generic Processors"),
/// written here from LLVM's table, not from gpu-embed's, so that the two are checked against
/// each other.
pub fn generic_family(chip: &str) -> Option<&'static str> {
    Some(match chip {
        "gfx900" | "gfx902" | "gfx904" | "gfx906" | "gfx909" | "gfx90c" => "gfx9-generic",
        "gfx942" | "gfx950" => "gfx9-4-generic",
        "gfx1010" | "gfx1011" | "gfx1012" | "gfx1013" => "gfx10-1-generic",
        "gfx1030" | "gfx1031" | "gfx1032" | "gfx1033" | "gfx1034" | "gfx1035" | "gfx1036" => {
            "gfx10-3-generic"
        }
        "gfx1100" | "gfx1101" | "gfx1102" | "gfx1103" | "gfx1150" | "gfx1151" | "gfx1152"
        | "gfx1153" => "gfx11-generic",
        "gfx1200" | "gfx1201" => "gfx12-generic",
        _ => return None,
    })
}

fn field<'v>(map: &'v Value, key: &str) -> Option<&'v Value> {
    map.as_map()?
        .iter()
        .find(|(k, _)| k.as_str() == Some(key))
        .map(|(_, v)| v)
}

fn number(map: &Value, key: &str) -> Option<u64> {
    field(map, key)?.as_u64()
}

fn kernel(entry: &Value) -> Result<Kernel, String> {
    let name = field(entry, ".name")
        .and_then(Value::as_str)
        .ok_or("a kernel without .name in the AMDGPU metadata")?
        .to_string();
    let mut params = Vec::new();
    for argument in field(entry, ".args")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let kind = field(argument, ".value_kind")
            .and_then(Value::as_str)
            .unwrap_or_default();
        if kind.starts_with("hidden_") {
            continue;
        }
        let (Some(offset), Some(size)) = (number(argument, ".offset"), number(argument, ".size"))
        else {
            return Err(format!(
                "kernel `{name}`: an argument without .offset or .size"
            ));
        };
        params.push(Param {
            offset: offset as usize,
            size: size as usize,
            pointer: kind == "global_buffer",
        });
    }
    let required_block = field(entry, ".reqd_workgroup_size")
        .and_then(Value::as_array)
        .filter(|v| v.len() == 3)
        .map(|v| [0, 1, 2].map(|i| v[i].as_u64().unwrap_or(1) as u32));
    Ok(Kernel {
        name,
        param_bytes: params.last().map_or(0, |p: &Param| p.offset + p.size),
        params,
        static_shared: number(entry, ".group_segment_fixed_size").unwrap_or(0),
        max_threads: number(entry, ".max_flat_workgroup_size").unwrap_or(1024) as u32,
        required_block,
        registers: number(entry, ".vgpr_count").unwrap_or(32) as u32,
        local_bytes: number(entry, ".private_segment_fixed_size").unwrap_or(0),
    })
}

pub fn read(bytes: &[u8]) -> Result<Image, String> {
    let file =
        ElfFile64::<object::Endianness>::parse(bytes).map_err(|e| format!("an hsaco: {e}"))?;
    let header = file.elf_header();
    let flags = header.e_flags(file.endian());
    let chip = gfx_name(flags & 0xff)
        .ok_or_else(|| {
            format!(
                "an hsaco for EF_AMDGPU_MACH {:#x}, no chip from gfx900 on",
                flags & 0xff
            )
        })?
        .to_string();
    // ELFABIVERSION_AMDGPU_HSA_V4 is 2, V5 3, V6 4.
    let code_object = header.e_ident().abi_version + 2;
    let setting = |bits: u32| match bits {
        0b10 => Some(false),
        0b11 => Some(true),
        _ => None,
    };
    let mut kernels = None;
    for section in file.sections() {
        let data = section.data().map_err(|e| e.to_string())?;
        // An ELF note: namesz, descsz, type, the name padded to 4, the description.
        let mut at = 0;
        while at + 12 <= data.len() {
            let word =
                |i: usize| u32::from_le_bytes(data[i..i + 4].try_into().unwrap_or([0; 4])) as usize;
            let (name_size, desc_size, kind) = (word(at), word(at + 4), word(at + 8));
            let name_end = at + 12 + name_size.div_ceil(4) * 4;
            let desc_end = name_end + desc_size.div_ceil(4) * 4;
            if desc_end > data.len() || section.kind() != object::SectionKind::Note {
                break;
            }
            if kind == 32 && data.get(at + 12..at + 12 + name_size) == Some(b"AMDGPU\0") {
                let mut desc = &data[name_end..name_end + desc_size];
                let metadata = rmpv::decode::read_value(&mut desc)
                    .map_err(|e| format!("the AMDGPU metadata note: {e}"))?;
                let list = field(&metadata, "amdhsa.kernels")
                    .and_then(Value::as_array)
                    .ok_or("AMDGPU metadata without amdhsa.kernels")?;
                kernels = Some(list.iter().map(kernel).collect::<Result<Vec<_>, _>>()?);
            }
            at = desc_end;
        }
    }
    Ok(Image {
        kind: Kind::Hsaco {
            chip,
            code_object,
            xnack: setting((flags >> 8) & 0b11),
            sramecc: setting((flags >> 10) & 0b11),
        },
        kernels: kernels.ok_or("an hsaco without an AMDGPU metadata note")?,
    })
}
