//! What a build script asks for, per kernel file: the targets, as `Build::target` and
//! `include_gpu_binary!(..., targets = [...])` name them. Shared by the compiler and the
//! prebuilt-object path, which checks that a crate's shipped objects answer the same request.

use gpu_manifest::Vendor;

/// What the caller asked for: a vendor, with chips or (empty) "the file's own, else `fallback`,
/// else the vendor's default chip".
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) struct TargetRequest {
    pub vendor: Vendor,
    pub chips: Vec<String>,
    pub fallback: Vec<String>,
}
