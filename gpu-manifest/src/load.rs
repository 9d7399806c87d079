//! What loading an object asks of its driver, and which driver releases give it.

use serde::{Deserialize, Serialize};
use std::fmt;

/// A driver's version, where loading an object depends on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DriverVersion {
    /// A CUDA driver, as `cuDriverGetVersion` reports it (`12040`: 12.4).
    Cuda {
        /// 12 of 12.4.
        major: u32,
        /// 4 of 12.4.
        minor: u32,
    },
    /// A HIP runtime, by the ROCm release it comes with, as `hipRuntimeGetVersion` reports it
    /// (`50221153`: 5.2).
    Rocm {
        /// 5 of 5.2.
        major: u32,
        /// 2 of 5.2.
        minor: u32,
    },
}

impl fmt::Display for DriverVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DriverVersion::Cuda { major, minor } => write!(f, "CUDA {major}.{minor}"),
            DriverVersion::Rocm { major, minor } => write!(f, "ROCm {major}.{minor}"),
        }
    }
}

/// What loading an object asks of the driver, read from the object's own bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum LoadRequirement {
    /// PTX of this ISA version (its `.version`): the driver's JIT compiler must know it, which
    /// drivers of [`LoadRequirement::oldest_cuda_driver`] and newer do.
    PtxIsa {
        /// `8` of `.version 8.0`.
        major: u32,
        /// `0` of `.version 8.0`.
        minor: u32,
    },
    /// A cubin built by the ptxas of this CUDA version (its `EIATTR_CUDA_API_VERSION`): any
    /// driver of that CUDA major version or newer loads it (CUDA's minor version compatibility).
    CudaToolkit {
        /// `12` of CUDA 12.9.
        major: u32,
        /// `9` of CUDA 12.9.
        minor: u32,
    },
    /// An AMDGPU code object of this version (4, 5, 6: its ELF header's ABI version).
    CodeObject {
        /// The code object version.
        version: u32,
    },
}

/// The CUDA release that introduced each PTX ISA version (NVIDIA's PTX ISA release notes): a
/// driver of that release or newer compiles it.
const PTX_ISA_RELEASES: [((u32, u32), (u32, u32)); 25] = [
    ((6, 0), (9, 0)),
    ((6, 1), (9, 1)),
    ((6, 2), (9, 2)),
    ((6, 3), (10, 0)),
    ((6, 4), (10, 1)),
    ((6, 5), (10, 2)),
    ((7, 0), (11, 0)),
    ((7, 1), (11, 1)),
    ((7, 2), (11, 2)),
    ((7, 3), (11, 3)),
    ((7, 4), (11, 4)),
    ((7, 5), (11, 5)),
    ((7, 6), (11, 6)),
    ((7, 7), (11, 7)),
    ((7, 8), (11, 8)),
    ((8, 0), (12, 0)),
    ((8, 1), (12, 1)),
    ((8, 2), (12, 2)),
    ((8, 3), (12, 3)),
    ((8, 4), (12, 4)),
    ((8, 5), (12, 5)),
    ((8, 6), (12, 7)),
    ((8, 7), (12, 8)),
    ((8, 8), (12, 9)),
    ((9, 0), (13, 0)),
];

/// The oldest ROCm release whose code object loader takes each AMDGPU code object version
/// (ROCR-Runtime's `src/loader/executable.cpp` accepts major versions up to 4 from rocm-4.1.0,
/// 5 from rocm-5.2.0, 6 from rocm-6.2.0; ROCm 6.3 for v6, as LLVM's maintainers state
/// programs built for it need, llvm-project PR 130963). HIP reports its version as
/// `hipDriverGetVersion` = major * 10000000 + minor * 100000 + patch. No ROCm release has
/// stopped loading v4 (ROCm 5.0's notes announced it would be deprecated).
const CODE_OBJECT_RELEASES: [(u32, (u32, u32)); 3] = [(4, (4, 1)), (5, (5, 2)), (6, (6, 3))];

impl LoadRequirement {
    /// The oldest ROCm release (major, minor: HIP's version) whose runtime loads an AMDGPU code
    /// object of this version; `None` for NVIDIA's, and for a code object version newer than
    /// this table knows.
    pub fn oldest_rocm(&self) -> Option<(u32, u32)> {
        match *self {
            LoadRequirement::CodeObject { version } => CODE_OBJECT_RELEASES
                .iter()
                .find(|(known, _)| *known == version)
                .map(|(_, rocm)| *rocm),
            _ => None,
        }
    }

    /// Whether a HIP runtime of `runtime` (ROCm major, minor) loads it. A code object version
    /// the table does not know is taken only by a runtime newer than every release it lists.
    fn loads_on_rocm(&self, runtime: (u32, u32)) -> bool {
        match (self, self.oldest_rocm()) {
            (LoadRequirement::CodeObject { .. }, Some(oldest)) => runtime >= oldest,
            (LoadRequirement::CodeObject { .. }, None) => CODE_OBJECT_RELEASES
                .last()
                .is_some_and(|(_, newest)| runtime > *newest),
            _ => false,
        }
    }

    /// The oldest CUDA driver (major, minor, as `cuDriverGetVersion` reports it) that loads an
    /// object with this requirement; `None` for AMD's, and for a PTX ISA newer than this table
    /// knows (a driver newer than every one it lists may still take it).
    pub fn oldest_cuda_driver(&self) -> Option<(u32, u32)> {
        match *self {
            LoadRequirement::PtxIsa { major, minor } => PTX_ISA_RELEASES
                .iter()
                .find(|(isa, _)| *isa == (major, minor))
                .map(|(_, cuda)| *cuda),
            LoadRequirement::CudaToolkit { major, .. } => Some((major, 0)),
            LoadRequirement::CodeObject { .. } => None,
        }
    }

    /// Whether a CUDA driver of `driver` (major, minor) loads it. A PTX ISA the table does not
    /// know is taken only by a driver newer than every release the table lists.
    fn loads_on_cuda(&self, driver: (u32, u32)) -> bool {
        match (self, self.oldest_cuda_driver()) {
            (LoadRequirement::CodeObject { .. }, _) => false,
            (_, Some(oldest)) => driver >= oldest,
            (_, None) => PTX_ISA_RELEASES
                .last()
                .is_some_and(|(_, newest)| driver > *newest),
        }
    }

    /// Whether a device whose driver is `driver` loads it: a CUDA driver NVIDIA's objects, a
    /// ROCm release AMD's; a driver of the other vendor none.
    pub fn loads_on(&self, driver: DriverVersion) -> bool {
        match driver {
            DriverVersion::Cuda { major, minor } => self.loads_on_cuda((major, minor)),
            DriverVersion::Rocm { major, minor } => self.loads_on_rocm((major, minor)),
        }
    }
}

impl fmt::Display for LoadRequirement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (*self, self.oldest_cuda_driver()) {
            (LoadRequirement::PtxIsa { major, minor }, Some((cuda, cuda_minor))) => write!(
                f,
                "PTX ISA {major}.{minor}, a CUDA {cuda}.{cuda_minor} driver or newer"
            ),
            (LoadRequirement::PtxIsa { major, minor }, None) => {
                let (cuda, cuda_minor) = PTX_ISA_RELEASES.last().map_or((0, 0), |(_, c)| *c);
                write!(
                    f,
                    "PTX ISA {major}.{minor}, a driver newer than CUDA {cuda}.{cuda_minor}"
                )
            }
            (LoadRequirement::CudaToolkit { major, minor }, _) => write!(
                f,
                "built by CUDA {major}.{minor}, a CUDA {major}.x driver or newer"
            ),
            (LoadRequirement::CodeObject { version }, _) => match self.oldest_rocm() {
                Some((major, minor)) => {
                    write!(f, "code object v{version}, ROCm {major}.{minor} or newer")
                }
                None => {
                    let (major, minor) = CODE_OBJECT_RELEASES
                        .last()
                        .map_or((0, 0), |(_, rocm)| *rocm);
                    write!(
                        f,
                        "code object v{version}, a ROCm newer than {major}.{minor}"
                    )
                }
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn load_requirements_follow_nvidias_release_notes() {
        let ptx = |major, minor| LoadRequirement::PtxIsa { major, minor };
        let cuda = |major, minor| DriverVersion::Cuda { major, minor };
        assert_eq!(ptx(8, 0).oldest_cuda_driver(), Some((12, 0)));
        assert_eq!(ptx(8, 6).oldest_cuda_driver(), Some((12, 7)));
        assert!(ptx(8, 4).loads_on(cuda(12, 4)));
        assert!(!ptx(8, 4).loads_on(cuda(12, 3)));
        // An ISA newer than the table: only a driver newer than every release it lists.
        assert!(!ptx(9, 9).loads_on(cuda(13, 0)));
        assert!(ptx(9, 9).loads_on(cuda(13, 1)));
        let cubin = LoadRequirement::CudaToolkit {
            major: 12,
            minor: 9,
        };
        assert!(cubin.loads_on(cuda(12, 0)), "minor version compatibility");
        assert!(!cubin.loads_on(cuda(11, 8)));
        assert_eq!(
            cubin.to_string(),
            "built by CUDA 12.9, a CUDA 12.x driver or newer"
        );
        assert_eq!(
            ptx(8, 0).to_string(),
            "PTX ISA 8.0, a CUDA 12.0 driver or newer"
        );
        let hsaco = LoadRequirement::CodeObject { version: 5 };
        assert!(
            !hsaco.loads_on(cuda(12, 9)),
            "an AMD object on a CUDA driver"
        );
        assert!(hsaco.loads_on(DriverVersion::Rocm { major: 5, minor: 2 }));
        assert!(!ptx(8, 0).loads_on(DriverVersion::Rocm {
            major: 13,
            minor: 0
        }));
    }
}
