//! What the runtime does, as `tracing` events (feature `tracing`): module loads (info), launches,
//! copies, fills and synchronizations (debug), frees (trace), all with target `gpu_embed`, the
//! device and the stream (`0x0`: the default stream). Without the feature the macro expands to
//! nothing and its arguments are not evaluated.

/// `event!(debug, field = value, other = ?debug_value, "message")`: a `tracing` event of target
/// `gpu_embed` (the syntax of `tracing::debug!`).
macro_rules! event {
    ($level:ident, $($rest:tt)*) => {
        #[cfg(feature = "tracing")]
        ::tracing::$level!(target: "gpu_embed", $($rest)*);
    };
}

pub(crate) use event;
