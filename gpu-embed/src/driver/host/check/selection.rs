//! Which checks a checked run makes beyond the default ones, from `GPU_EMBED_CHECK` in the
//! program's environment (the variable that compiled the objects checked: `GPU_EMBED_CHECK=all
//! cargo test` builds and runs with every check) or `gpu-build run --check=...`.
//!
//! The default checks (bounds, memref indices, alignment, workgroup memory, barriers) cost
//! little and are always made by a checked object. The others are chosen here, at run time, so
//! one checked object serves every choice: the uninitialized-read and global race checks keep
//! a shadow of the global memory a launch touches and call the runtime at every access, and
//! the leak check reports the allocations never freed when the program ends (as
//! compute-sanitizer's `--leak-check full`, which is off by default too: a buffer kept in a
//! `static` until exit is one).

use crate::error::{Error, ErrorKind, Result};
use std::sync::{OnceLock, RwLock};

/// The checks chosen beyond the default ones.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Selection {
    /// Device memory still allocated when the program ends.
    pub leaks: bool,
    /// Reads of device memory nothing wrote.
    pub uninitialized: bool,
    /// Two threads of a launch touching a byte of global memory, one writing, unordered.
    pub races: bool,
}

/// What `GPU_EMBED_CHECK` accepts, for messages.
const NAMES: &str = "`1` (the default checks), `all`, or a comma-separated list of `default`, \
                     `leaks`, `uninitialized` and `races`";

impl Selection {
    /// Every check.
    pub(crate) const ALL: Selection = Selection {
        leaks: true,
        uninitialized: true,
        races: true,
    };

    /// The selection `text` names (`GPU_EMBED_CHECK`'s value).
    pub(crate) fn parse(text: &str) -> Result<Selection, String> {
        let mut selection = Selection::default();
        for name in text.split(',').map(str::trim) {
            match name {
                "" | "0" | "1" | "yes" | "true" | "on" | "default" => {}
                "all" => selection = Selection::ALL,
                "leaks" | "leak" => selection.leaks = true,
                "uninitialized" | "uninit" | "initcheck" => selection.uninitialized = true,
                "races" | "race" | "racecheck" => selection.races = true,
                other => {
                    return Err(format!(
                        "GPU_EMBED_CHECK={text}: no check is called `{other}`; use {NAMES}"
                    ))
                }
            }
        }
        Ok(selection)
    }
}

/// The environment's selection, read once.
fn from_environment() -> &'static Result<Selection, String> {
    static ENVIRONMENT: OnceLock<Result<Selection, String>> = OnceLock::new();
    ENVIRONMENT.get_or_init(|| match std::env::var("GPU_EMBED_CHECK") {
        Ok(text) => Selection::parse(&text),
        Err(_) => Ok(Selection::default()),
    })
}

/// A selection that replaces the environment's (`gpu-build run --check=...`).
static CHOSEN: RwLock<Option<Selection>> = RwLock::new(None);

/// Chooses the checks that checked host kernels (compiled with `GPU_EMBED_CHECK` set, or
/// `gpu_build::Build::checked`) make beyond the default ones, for the launches from now on,
/// in place of what `GPU_EMBED_CHECK` in the program's environment says: `checks` names them as
/// that variable does (`"all"`, `"races,leaks"`, `"default"`: the default checks alone). A
/// test can so turn on the race check for the kernels it launches. Device memory allocated
/// while the uninitialized-read check is off is not watched for such reads. An error names
/// what `checks` got wrong.
pub fn choose_checks(checks: &str) -> Result<()> {
    let selection = Selection::parse(checks).map_err(|why| {
        Error::new(
            ErrorKind::InvalidArgument,
            why.replace("GPU_EMBED_CHECK=", "choose_checks: "),
        )
    })?;
    *CHOSEN.write().unwrap_or_else(|p| p.into_inner()) = Some(selection);
    Ok(())
}

/// The selection in force; `Err` says what is wrong with `GPU_EMBED_CHECK` (a checked launch
/// then fails with it).
pub(crate) fn selected() -> Result<Selection, String> {
    if let Some(chosen) = *CHOSEN.read().unwrap_or_else(|p| p.into_inner()) {
        return Ok(chosen);
    }
    from_environment().clone()
}

/// The selection in force, the default one where `GPU_EMBED_CHECK` is wrong (a checked launch
/// reports that).
pub(crate) fn current() -> Selection {
    selected().unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_combine_and_a_wrong_one_is_refused_with_the_right_ones() {
        assert_eq!(Selection::parse("1"), Ok(Selection::default()));
        assert_eq!(Selection::parse("all"), Ok(Selection::ALL));
        let two = Selection::parse("default, races,leaks").unwrap();
        assert!(two.races && two.leaks && !two.uninitialized);
        let wrong = Selection::parse("races,rasec").unwrap_err();
        assert!(
            wrong.contains("`rasec`") && wrong.contains("uninitialized"),
            "{wrong}"
        );
    }
}
