//! What differs per target about running an object: one [`ObjectAbi`] per object, written by
//! the target that compiled it and read by the driver that runs it. Everything between them
//! (gpu-build's pipeline, cache and outputs, the manifest, `include_gpu_binary!`) carries it
//! without looking inside, as upstream's `gpu.object` carries its properties: a target's own
//! description travels encoded ([`ObjectAbi::Encoded`]), its type known only to the target and
//! its driver (`targets/`).

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

/// How the runtime runs one object's kernels, beyond what every object says (its kernels'
/// lowered parameters, [`crate::Kernel::params`]). Tagged by `kind` in the manifest:
/// `{"kind": "host", "symbol_prefix": ...}`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ObjectAbi {
    /// The driver loads the object and finds each kernel by its name; a launch passes the
    /// lowered parameters as they are (NVIDIA's PTX and cubins, AMD's hsaco). The object's own
    /// bytes say the rest.
    #[default]
    LoweredParams,
    /// Native code linked into the program, whose kernels are called through generated entry
    /// points (the host target): the one ABI the macro reads, since what it names must become
    /// Rust symbols.
    Host(HostEntries),
    /// The target's own description of the object for its driver (a Vulkan object's bindings,
    /// an OpenCL-style object's arguments), embedded as its text and decoded by the driver when
    /// it loads the object ([`decode_abi`]).
    Encoded(EncodedAbi),
}

/// A target's description of an object, as its target encoded it ([`ObjectAbi::encode`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EncodedAbi {
    /// The target's value, as JSON.
    pub value: serde_json::Value,
}

impl ObjectAbi {
    /// A target's description of an object (one of [`crate::targets`]), encoded for its driver.
    pub fn encode<T: Serialize>(abi: &T) -> Result<ObjectAbi, String> {
        serde_json::to_value(abi)
            .map(|value| ObjectAbi::Encoded(EncodedAbi { value }))
            .map_err(|e| format!("encoding an object's ABI: {e}"))
    }

    /// The target's description of the object, read back as `T`: an error for an object
    /// without one or with another kind.
    pub fn decode<T: DeserializeOwned>(&self) -> Result<T, String> {
        match self {
            ObjectAbi::Encoded(encoded) => {
                T::deserialize(&encoded.value).map_err(|e| mismatch::<T>(e))
            }
            other => Err(format!(
                "the object's ABI is {other:?}, not a {}",
                std::any::type_name::<T>()
            )),
        }
    }

    /// What the embedding program holds of an [`ObjectAbi::Encoded`] ABI: its compact JSON
    /// text, which the driver reads with [`decode_abi`]; `None` for other ABIs.
    pub fn encoded_text(&self) -> Option<String> {
        match self {
            ObjectAbi::Encoded(encoded) => Some(encoded.value.to_string()),
            _ => None,
        }
    }

    /// Whether the object's code is linked into the crate that embeds it (host objects: the
    /// build script links them as a static library), rather than loaded by a driver at run time.
    pub fn links_into_crate(&self) -> bool {
        matches!(self, ObjectAbi::Host(_))
    }

    /// The same ABI, naming `library` as the static library the crate links the object's code
    /// from (`lib<library>.a`); unchanged for an object a driver loads
    /// ([`ObjectAbi::links_into_crate`]).
    pub fn with_crate_library(self, library: String) -> ObjectAbi {
        match self {
            ObjectAbi::Host(entries) => ObjectAbi::Host(HostEntries { library, ..entries }),
            other => other,
        }
    }

    /// The entry points of a host object.
    pub fn host(&self) -> Option<&HostEntries> {
        match self {
            ObjectAbi::Host(entries) => Some(entries),
            _ => None,
        }
    }
}

/// An object's ABI from the text [`ObjectAbi::encoded_text`] made of it: what a driver calls when
/// it loads the object. An error names what did not read, which only a program embedding
/// objects of another gpu-build release than its gpu-embed's can meet.
pub fn decode_abi<T: DeserializeOwned>(text: &str) -> Result<T, String> {
    serde_json::from_str(text).map_err(|e| mismatch::<T>(e))
}

fn mismatch<T>(error: serde_json::Error) -> String {
    let name = std::any::type_name::<T>();
    let name = name.rsplit("::").next().unwrap_or(name);
    format!(
        "the object's ABI does not read as a {name} ({error}); build the program with gpu-build \
         and gpu-embed of one release"
    )
}

/// How a host object's kernels are called: each kernel `k` has an entry point
/// `<symbol_prefix>k(void **params, void *context)` in the static library the build script links.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostEntries {
    /// What every entry point's symbol starts with (unique to the crate, file and module).
    pub symbol_prefix: String,
    /// Kernels whose threads the scheduler runs as coroutines, switching at each barrier
    /// (barriers `gpu-build` could not split the kernel at). Every other kernel runs through its
    /// blocks entry ([`crate::host_abi::blocks_entry`]).
    pub coroutine_kernels: Vec<String>,
    /// Whether the entry points check every memory access (`GPU_EMBED_CHECK=1` at build time):
    /// the runtime then passes the checked run's functions in the context
    /// ([`crate::host_abi::CHECK_REPORT_OFFSET`]) and fails the launch with what they report.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub checked: bool,
    /// The static library holding the entry points (`lib<library>.a` in `gpu-build/host/`).
    /// The build script links it into the crate; the embedding code names it as well, so that
    /// what the build script's link flags do not reach (the crate's doc tests) links it too.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub library: String,
}
