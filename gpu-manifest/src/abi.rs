//! What differs per target about running an object: one [`ObjectAbi`] per object, written by
//! the target that compiled it and read by the driver that runs it. Everything between them
//! (gpu-build's pipeline, cache and outputs, the manifest, `include_gpu_binary!`) carries it
//! without looking inside, as upstream's `gpu.object` carries its properties: a target's own
//! description travels encoded ([`ObjectAbi::Encoded`]), its type known only to the target and
//! its driver (`targets/`).

use crate::targets::host::HostEntries;
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
