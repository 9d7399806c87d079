//! The contract between `gpu-build` (which writes it) and `include_gpu_binary!` (which reads it):
//! what was compiled from which kernel file, for which targets, and where the objects are.
//!
//! The manifest lives at `$OUT_DIR/gpu-build/manifest.json`. Every path in it is relative to
//! `OUT_DIR`, so a build directory can be moved without rewriting it. Readers must check
//! [`Manifest::schema_version`] before trusting anything else (see [`Manifest::from_json`]).
//!
//! ```
//! use gpu_manifest::{Manifest, ReadError, SCHEMA_VERSION};
//!
//! let written = Manifest::new("gpu-build 0.1.0").to_json().unwrap();
//! let read = Manifest::from_json(&written).unwrap();
//! assert_eq!(read.schema_version, SCHEMA_VERSION);
//! assert!(read.modules.is_empty());
//!
//! // A manifest of another schema version is refused, naming its writer.
//! let old = written.replace(&format!("\"schema_version\": {SCHEMA_VERSION}"), "\"schema_version\": 1");
//! assert!(matches!(Manifest::from_json(&old), Err(ReadError::VersionMismatch { found: 1, .. })));
//! ```

#![warn(missing_docs)]

mod abi;
#[cfg(feature = "call-syntax")]
pub mod call;
pub mod host_image;

mod kernel;
mod load;
pub mod targets;
mod vendor;

pub use abi::{decode_abi, EncodedAbi, ObjectAbi};
pub use kernel::{Argument, ArgumentKind, Element, Kernel, Layout, Param, ParamStorage};
pub use load::{DriverVersion, LoadRequirement};
pub use vendor::{Format, Vendor};

use serde::{Deserialize, Serialize};
use std::fmt;

/// Bumped whenever a field changes meaning or is removed; readers refuse other versions.
/// Version 10: a Vulkan or OpenCL object's ABI is the target's own value, encoded
/// ([`ObjectAbi::Encoded`]), where 9 had a variant of its own per target; the OpenCL-style
/// target's objects are `opencl`'s, where 9 named them `levelzero`.
pub const SCHEMA_VERSION: u32 = 10;

/// Where the manifest lives, relative to `OUT_DIR`.
pub const MANIFEST_PATH: &str = "gpu-build/manifest.json";

/// Everything one build script compiled.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest {
    /// [`SCHEMA_VERSION`] of the writer.
    pub schema_version: u32,
    /// `gpu-build <version>` of the writer, for error messages about mismatches.
    pub generator: String,
    /// Every gpu.module of every kernel file, in build order.
    pub modules: Vec<GpuModule>,
}

/// One `gpu.module` (or one LLVM IR file) and what was built from it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GpuModule {
    /// The kernel file as the build script named it (relative to the crate's manifest dir when it
    /// was given that way).
    pub source: String,
    /// The module's symbol name (`gpu.module @name`); for LLVM IR input, the file stem.
    pub name: String,
    /// Its kernels, in source order.
    pub kernels: Vec<Kernel>,
    /// What was built from it: one or more objects per target.
    pub objects: Vec<Object>,
}

/// One compiled object.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Object {
    /// The vendor whose device loads it.
    pub vendor: Vendor,
    /// `sm_90`, `gfx90a`, `gfx90a:xnack-`, ...
    pub chip: String,
    /// ISA text (PTX) or a binary (cubin, hsaco, host object).
    pub format: Format,
    /// The LLVM target triple it was compiled for.
    pub triple: String,
    /// The target features it was compiled with (`+ptx80`, `+wavefrontsize64`).
    pub features: String,
    /// The optimization level (0-3).
    pub opt_level: u8,
    /// Relative to `OUT_DIR`.
    pub path: String,
    /// Its size in bytes.
    pub size: u64,
    /// Lower-case hex SHA-256 of the file's bytes.
    pub sha256: String,
    /// Relative to `OUT_DIR`: the same bytes as a zstd frame, which `include_gpu_binary!`
    /// embeds (the runtime decompresses an object once, when a device first loads it); `None`
    /// for the host object, linked into the program.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compressed: Option<String>,
    /// How the runtime runs its kernels, as its target wrote it for its driver (the host's entry
    /// points, Vulkan's bindings, ...); everything else carries it unread.
    pub abi: ObjectAbi,
    /// What loading it asks of the driver, read from the object itself (PTX, cubin, hsaco).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requires: Option<LoadRequirement>,
    /// The module's kernels this object leaves out: its target could not express them, and
    /// the build made the others (with a warning saying why), so that a launch of one on this
    /// object's devices can say why.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub refused: Vec<RefusedKernel>,
}

/// A kernel an object leaves out, and why its target refused it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RefusedKernel {
    /// The kernel's name.
    pub name: String,
    /// The build's error for it (`file:line:col: error: …`).
    pub reason: String,
}

/// Why a manifest could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReadError {
    /// Not JSON, or not this schema's shape.
    Malformed(String),
    /// Written by a gpu-build with another schema version.
    VersionMismatch {
        /// The manifest's schema version.
        found: u32,
        /// The gpu-build that wrote it.
        generator: String,
    },
}

impl fmt::Display for ReadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReadError::Malformed(why) => write!(f, "the gpu-build manifest is malformed: {why}"),
            ReadError::VersionMismatch { found, generator } => write!(
                f,
                "the gpu-build manifest has schema version {found} (written by {generator}), \
                 this reader understands version {SCHEMA_VERSION}; use the same gpu-build version \
                 for the build-dependency and gpu-embed"
            ),
        }
    }
}

impl std::error::Error for ReadError {}

impl Manifest {
    /// Every object of every module, in build order.
    pub fn objects(&self) -> impl Iterator<Item = &Object> {
        self.modules.iter().flat_map(|m| &m.objects)
    }

    /// An empty manifest of the current schema, written by `generator`.
    pub fn new(generator: impl Into<String>) -> Self {
        Manifest {
            schema_version: SCHEMA_VERSION,
            generator: generator.into(),
            modules: Vec::new(),
        }
    }

    /// The manifest as pretty-printed JSON.
    pub fn to_json(&self) -> Result<String, serde_json::Error> {
        serde_json::to_string_pretty(self)
    }

    /// Parses a manifest, checking the schema version before the rest of the shape.
    pub fn from_json(text: &str) -> Result<Manifest, ReadError> {
        #[derive(Deserialize)]
        struct Header {
            schema_version: u32,
            #[serde(default)]
            generator: String,
        }
        let header: Header =
            serde_json::from_str(text).map_err(|e| ReadError::Malformed(e.to_string()))?;
        if header.schema_version != SCHEMA_VERSION {
            return Err(ReadError::VersionMismatch {
                found: header.schema_version,
                generator: header.generator,
            });
        }
        serde_json::from_str(text).map_err(|e| ReadError::Malformed(e.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::targets::host::HostEntries;

    #[test]
    fn round_trips() {
        let mut manifest = Manifest::new("gpu-build test");
        manifest.modules.push(GpuModule {
            source: "kernels/vadd.mlir".into(),
            name: "kernels".into(),
            kernels: vec![Kernel {
                name: "vadd".into(),
                signature: "(index)".into(),
                arguments: vec![Argument {
                    name: Some("data".into()),
                    ty: "index".into(),
                    kind: ArgumentKind::Scalar {
                        element: Element::Index,
                    },
                }],
                params: vec![Param {
                    llvm_type: "i64".into(),
                    argument: 0,
                }],
            }],
            objects: vec![Object {
                vendor: Vendor::Amdgpu,
                chip: "gfx90a".into(),
                format: Format::Bin,
                triple: "amdgcn-amd-amdhsa".into(),
                features: String::new(),
                opt_level: 2,
                path: "gpu-build/kernels/gfx90a.hsaco".into(),
                size: 3,
                sha256: "00".into(),
                compressed: Some("gpu-build/kernels/gfx90a.hsaco.zst".into()),
                abi: ObjectAbi::LoweredParams,
                requires: Some(LoadRequirement::CodeObject { version: 5 }),
                refused: vec![RefusedKernel {
                    name: "k2".into(),
                    reason: "k.mlir:9:5: error: `math.atan` cannot be lowered".into(),
                }],
            }],
        });
        let json = manifest.to_json().unwrap();
        assert!(json.contains("\"vendor\": \"amdgpu\""), "{json}");
        assert_eq!(Manifest::from_json(&json).unwrap(), manifest);
    }

    #[test]
    fn refuses_other_schema_versions_by_name() {
        let err = Manifest::from_json(r#"{"schema_version": 99, "generator": "gpu-build 9.0.0"}"#)
            .unwrap_err();
        assert_eq!(
            err,
            ReadError::VersionMismatch {
                found: 99,
                generator: "gpu-build 9.0.0".into()
            }
        );
        assert!(err.to_string().contains("gpu-build 9.0.0"));
    }

    #[test]
    fn a_manifest_of_the_previous_schema_is_refused_naming_both_versions() {
        // Schema 9 carried a Vulkan object's ABI as a variant of its own (`"kind": "vulkan"`).
        let old = r#"{"schema_version": 9, "generator": "gpu-build 0.1.0", "modules": [{
            "source": "k.mlir", "name": "k", "kernels": [], "objects": [{
                "vendor": "vulkan", "chip": "vulkan1.1", "format": "bin",
                "triple": "spirv", "features": "", "opt_level": 2,
                "path": "gpu-build/k/k.spv", "size": 1, "sha256": "00",
                "abi": {"kind": "vulkan", "spirv_version": "1.3", "capabilities": [],
                        "extensions": [], "kernels": []}}]}]}"#;
        let message = Manifest::from_json(old).unwrap_err().to_string();
        assert!(message.contains("schema version 9"), "{message}");
        assert!(
            message.contains(&format!("understands version {SCHEMA_VERSION}")),
            "{message}"
        );
    }

    #[test]
    fn an_objects_abi_is_one_value_tagged_by_kind() {
        let host = ObjectAbi::Host(HostEntries {
            symbol_prefix: "__gpu_host__k__".into(),
            coroutine_kernels: vec!["reduce".into()],
            checked: false,
            library: String::new(),
        });
        let json = serde_json::to_value(&host).unwrap();
        assert_eq!(json["kind"], "host");
        assert_eq!(json["symbol_prefix"], "__gpu_host__k__");
        // Unchecked objects say nothing of it: their manifests read as before.
        assert!(json.get("checked").is_none(), "{json}");
        assert_eq!(serde_json::from_value::<ObjectAbi>(json).unwrap(), host);
        let checked = ObjectAbi::Host(HostEntries {
            checked: true,
            ..host.host().unwrap().clone()
        });
        let json = serde_json::to_value(&checked).unwrap();
        assert_eq!(json["checked"], true);
        assert_eq!(serde_json::from_value::<ObjectAbi>(json).unwrap(), checked);
        let plain = serde_json::to_value(ObjectAbi::LoweredParams).unwrap();
        assert_eq!(plain, serde_json::json!({"kind": "lowered_params"}));
        let vulkan = targets::vulkan::VulkanAbi {
            spirv_version: "1.3".into(),
            capabilities: vec!["Shader".into()],
            extensions: Vec::new(),
            kernels: Vec::new(),
        };
        let encoded = ObjectAbi::encode(&vulkan).unwrap();
        let json = serde_json::to_string(&encoded).unwrap();
        assert!(json.starts_with(r#"{"kind":"encoded","value":{"#), "{json}");
        assert_eq!(serde_json::from_str::<ObjectAbi>(&json).unwrap(), encoded);
        assert_eq!(
            encoded.decode::<targets::vulkan::VulkanAbi>().unwrap(),
            vulkan
        );
    }

    #[test]
    fn an_encoded_abi_reads_back_from_its_text_and_a_wrong_one_is_an_error() {
        use targets::opencl::{OpenClAbi, OpenClArgument, OpenClArgumentKind};
        use targets::vulkan::VulkanAbi;
        let abi = OpenClAbi {
            spirv_version: "1.0".into(),
            capabilities: vec!["Kernel".into()],
            extensions: Vec::new(),
            kernels: vec![targets::opencl::OpenClKernel {
                name: "k".into(),
                workgroup_memory: 0,
                max_block_threads: None,
                required_block: None,
                arguments: vec![OpenClArgument {
                    param: 3,
                    kind: OpenClArgumentKind::Scalar { bytes: 4 },
                }],
            }],
        };
        let text = ObjectAbi::encode(&abi).unwrap().encoded_text().unwrap();
        assert_eq!(decode_abi::<OpenClAbi>(&text).unwrap(), abi);
        let wrong =
            decode_abi::<VulkanAbi>(&text.replace("\"kernels\"", "\"entries\"")).unwrap_err();
        assert!(
            wrong.contains("VulkanAbi") && wrong.contains("one release"),
            "{wrong}"
        );
        assert!(ObjectAbi::LoweredParams.encoded_text().is_none());
        assert!(ObjectAbi::LoweredParams.decode::<OpenClAbi>().is_err());
    }

    #[test]
    fn only_objects_linked_into_the_crate_take_its_library() {
        let host = ObjectAbi::Host(HostEntries {
            symbol_prefix: "p".into(),
            coroutine_kernels: Vec::new(),
            checked: false,
            library: String::new(),
        });
        assert!(host.links_into_crate());
        let named = host.with_crate_library("gpu_kernels_x".into());
        assert_eq!(
            named.host().map(|h| h.library.as_str()),
            Some("gpu_kernels_x")
        );
        assert!(!ObjectAbi::LoweredParams.links_into_crate());
        assert_eq!(
            ObjectAbi::LoweredParams.with_crate_library("x".into()),
            ObjectAbi::LoweredParams
        );
    }

    #[test]
    fn malformed_text_is_an_error_not_a_panic() {
        assert!(matches!(
            Manifest::from_json("{"),
            Err(ReadError::Malformed(_))
        ));
        assert!(matches!(
            Manifest::from_json(&format!("{{\"schema_version\": {SCHEMA_VERSION}}}")),
            Err(ReadError::Malformed(_))
        ));
    }
}
