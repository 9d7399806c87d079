//! The embedded objects: the run-time analogues of upstream's `gpu.binary` and `gpu.object`.

pub use gpu_manifest::{Format, Vendor};

/// One compiled object, embedded in the program.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Object {
    vendor: Vendor,
    chip: &'static str,
    format: Format,
    bytes: &'static [u8],
}

impl Object {
    pub const fn new(vendor: Vendor, chip: &'static str, format: Format, bytes: &'static [u8]) -> Object {
        Object { vendor, chip, format, bytes }
    }

    pub fn vendor(&self) -> Vendor {
        self.vendor
    }

    /// `sm_90`, `gfx90a`, `gfx90a:xnack-`.
    pub fn chip(&self) -> &'static str {
        self.chip
    }

    pub fn format(&self) -> Format {
        self.format
    }

    pub fn bytes(&self) -> &'static [u8] {
        self.bytes
    }

    /// What the object is, for listings and errors: `nvptx sm_80 PTX`, `amdgpu gfx90a hsaco`.
    pub fn describe(&self) -> String {
        let kind = match (self.vendor, self.format) {
            (Vendor::Nvptx, Format::Isa) => "PTX",
            (Vendor::Nvptx, Format::Bin) => "cubin",
            (Vendor::Amdgpu, Format::Isa) => "AMDGPU assembly",
            (Vendor::Amdgpu, Format::Bin) => "hsaco",
        };
        format!("{} {} {kind}", self.vendor, self.chip)
    }
}

/// All objects compiled from one `gpu.module`, and its kernels.
#[derive(Debug)]
pub struct Binary {
    name: &'static str,
    objects: &'static [Object],
    kernels: &'static [&'static str],
}

impl Binary {
    pub const fn new(name: &'static str, objects: &'static [Object], kernels: &'static [&'static str]) -> Binary {
        Binary { name, objects, kernels }
    }

    /// The `gpu.module` symbol.
    pub fn name(&self) -> &'static str {
        self.name
    }

    pub fn objects(&self) -> &'static [Object] {
        self.objects
    }

    pub fn kernels(&self) -> &'static [&'static str] {
        self.kernels
    }
}
