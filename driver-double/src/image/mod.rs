//! Device images read as the vendors' loaders read them: which device each runs on, and each
//! kernel's parameters, shared memory and block limits.

mod cubin;
mod hsaco;
mod ptx;

pub use hsaco::generic_family;

/// One kernel parameter as the image lays it out.
#[derive(Debug, Clone)]
pub struct Param {
    pub offset: usize,
    pub size: usize,
    /// The image says the value is an address (PTX `.ptr`, hsaco `global_buffer`).
    pub pointer: bool,
}

#[derive(Debug, Clone)]
pub struct Kernel {
    pub name: String,
    pub params: Vec<Param>,
    /// Bytes of the parameter buffer (hsaco: the explicit arguments' end).
    pub param_bytes: usize,
    pub static_shared: u64,
    /// The most threads a block may have (`.maxntid`, `.reqntid`, `.max_flat_workgroup_size`).
    pub max_threads: u32,
    /// A block size the kernel requires (`.reqntid`).
    pub required_block: Option<[u32; 3]>,
    pub registers: u32,
    pub local_bytes: u64,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Kind {
    /// PTX of ISA `version` for `sm` (`(9, 0, true)` for `sm_90a`).
    Ptx {
        version: (u32, u32),
        sm: (u32, u32, bool),
    },
    Cubin {
        sm: (u32, u32, bool),
    },
    /// An hsaco for `chip` (`gfx90a`, `gfx10-3-generic`), code object `version` (4, 5, 6).
    Hsaco {
        chip: String,
        code_object: u8,
        xnack: Option<bool>,
        sramecc: Option<bool>,
    },
}

impl std::fmt::Display for Kind {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        let suffix = |a: bool| if a { "a" } else { "" };
        match self {
            Kind::Ptx { version, sm } => write!(
                f,
                "ptx {}.{} sm_{}{}{}",
                version.0,
                version.1,
                sm.0,
                sm.1,
                suffix(sm.2)
            ),
            Kind::Cubin { sm } => write!(f, "cubin sm_{}{}{}", sm.0, sm.1, suffix(sm.2)),
            Kind::Hsaco {
                chip, code_object, ..
            } => write!(f, "hsaco {chip} v{code_object}"),
        }
    }
}

#[derive(Debug, Clone)]
pub struct Image {
    pub kind: Kind,
    pub kernels: Vec<Kernel>,
}

/// The bytes of the image at `data`, as a loader that gets no length finds them: an ELF file's
/// extent from its headers, else NUL-terminated text.
///
/// # Safety
/// `data` points to a complete ELF file or to NUL-terminated text (what `cuModuleLoadData` and
/// `hipModuleLoadData` require of their caller).
pub unsafe fn image_bytes<'a>(data: *const u8) -> Result<&'a [u8], String> {
    if data.is_null() {
        return Err("a null image".into());
    }
    // SAFETY: an ELF file is at least its 64-byte header; text has at least its NUL, and the
    // first four bytes are compared only as far as they are not NUL.
    let magic = unsafe { std::slice::from_raw_parts(data, 1) };
    if magic[0] == 0x7f {
        // SAFETY: an ELF file (the caller's promise) starts with a 64-byte header.
        let header = unsafe { std::slice::from_raw_parts(data, 64) };
        if &header[..4] != b"\x7fELF" || header[4] != 2 {
            return Err("an image that is neither 64-bit ELF nor text".into());
        }
        let u64_at =
            |at: usize| u64::from_le_bytes(header[at..at + 8].try_into().unwrap_or([0; 8]));
        let u16_at = |at: usize| u16::from_le_bytes([header[at], header[at + 1]]);
        let sections_end = u64_at(0x28) + u64::from(u16_at(0x3a)) * u64::from(u16_at(0x3c));
        let programs_end = u64_at(0x20) + u64::from(u16_at(0x36)) * u64::from(u16_at(0x38));
        let headers_end = sections_end.max(programs_end).max(64) as usize;
        // SAFETY: the section and program header tables are part of the file.
        let headed = unsafe { std::slice::from_raw_parts(data, headers_end) };
        let end = elf_extent(headed).max(headers_end);
        // SAFETY: every section lies inside the file.
        return Ok(unsafe { std::slice::from_raw_parts(data, end) });
    }
    // SAFETY: NUL-terminated text.
    let text = unsafe { std::ffi::CStr::from_ptr(data.cast()) };
    Ok(text.to_bytes())
}

/// The end of the last section's bytes, from the section headers in `headed`.
fn elf_extent(headed: &[u8]) -> usize {
    let u64_at = |at: usize| {
        headed
            .get(at..at + 8)
            .map_or(0, |b| u64::from_le_bytes(b.try_into().unwrap_or([0; 8])))
    };
    let u32_at = |at: usize| {
        headed
            .get(at..at + 4)
            .map_or(0, |b| u32::from_le_bytes(b.try_into().unwrap_or([0; 4])))
    };
    let (table, count, size) = (
        u64_at(0x28) as usize,
        u16::from_le_bytes([headed[0x3c], headed[0x3d]]) as usize,
        u16::from_le_bytes([headed[0x3a], headed[0x3b]]) as usize,
    );
    (0..count)
        .map(|i| table + i * size)
        .filter(|&at| u32_at(at + 4) != 8) // SHT_NOBITS occupies no bytes of the file
        .map(|at| (u64_at(at + 0x18) + u64_at(at + 0x20)) as usize)
        .max()
        .unwrap_or(0)
}

/// Reads an image of either vendor.
pub fn read(bytes: &[u8]) -> Result<Image, String> {
    if bytes.starts_with(b"\x7fELF") {
        let machine = u16::from_le_bytes([bytes[18], bytes[19]]);
        return match machine {
            190 => cubin::read(bytes),
            224 => hsaco::read(bytes),
            other => Err(format!(
                "an ELF file for machine {other}, neither a cubin nor an hsaco"
            )),
        };
    }
    let text = std::str::from_utf8(bytes).map_err(|_| "an image that is neither ELF nor text")?;
    ptx::read(text)
}

/// `(major, minor, arch-specific)` of `sm_90a`.
pub fn sm_of(chip: &str) -> Option<(u32, u32, bool)> {
    let digits = chip.strip_prefix("sm_")?;
    let number: String = digits.chars().take_while(char::is_ascii_digit).collect();
    let value: u32 = number.parse().ok()?;
    Some((value / 10, value % 10, digits.len() > number.len()))
}

/// The newest PTX ISA a CUDA driver compiles (PTX ISA release notes: CUDA 12.0 brought 8.0, …).
pub fn newest_ptx(cuda_version: i32) -> (u32, u32) {
    let (major, minor) = (cuda_version / 1000, cuda_version % 1000 / 10);
    match (major, minor) {
        (13, m) => (9, m as u32),
        (12, m) if m >= 9 => (8, 8),
        (12, 8) => (8, 7),
        (12, m) if m >= 6 => (8, 5),
        (12, m) => (8, m as u32),
        (11, m) if m >= 8 => (7, 8),
        (11, m) => (7, m as u32),
        _ => (6, 4),
    }
}
