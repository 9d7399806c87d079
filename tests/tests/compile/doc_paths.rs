//! Every repository path the Cargo.toml files, the README, CONTRIBUTING and the guide name
//! exists: a file that moves without its mentions fails here, not in a reader's hands.
//!
//! A path is a word of path characters with a `/` in it that ends in a file extension of this
//! repository's (`.rs`, `.mlir`, `.sh`, …) or starts at one of its top-level folders. It must
//! exist relative to the repository, to the file naming it, or to a crate (its folder, its
//! `src/` or its `tests/`, as a crate's own Cargo.toml and docs name its files). Addresses, absolute paths,
//! placeholders (`<name>`, `*`) and upstream LLVM paths (`mlir/…`, `llvm/…`) are not ours.

use crate::common::workspace;
use std::path::{Path, PathBuf};

const EXTENSIONS: &[&str] = &[
    "rs", "toml", "md", "mlir", "sh", "cpp", "ll", "py", "json", "spv", "stderr",
];

/// Upstream trees the docs quote paths from.
const UPSTREAM: &[&str] = &["mlir/", "llvm/", "clang/"];

/// Paths that are not this repository's files: a user's files in example commands, another
/// project's source, a build's output.
const NOT_OURS: &[&str] = &[
    "kernels/a.mlir",            // docs/guide/09-cli.md: a command's example arguments
    "kernels/x.mlir",            // docs/guide/10-troubleshooting.md: an error message's
    "kernels/shift.mlir",        // docs/guide/11-finding-kernel-bugs.md: its crate's own file
    "src/loader/executable.cpp", // docs/guide/05-runtime.md: ROCR-Runtime's loader
    "target/gpu-bundle/run.sh",  // CONTRIBUTING.md: what scripts/gpu-bundle.sh writes
];

/// The files whose paths are checked, relative to the repository.
fn documents(root: &Path) -> Vec<PathBuf> {
    let mut found = vec![root.join("README.md"), root.join("CONTRIBUTING.md")];
    for entry in walkdir::WalkDir::new(root)
        .into_iter()
        .filter_entry(|e| e.file_name() != "target" && e.file_name() != ".git")
    {
        let path = entry.unwrap().into_path();
        let in_guide = path.starts_with(root.join("docs/guide"));
        if path.file_name().is_some_and(|n| n == "Cargo.toml")
            || (in_guide && path.extension().is_some_and(|e| e == "md"))
        {
            found.push(path);
        }
    }
    found
}

/// The path-like words of `text`, with their line numbers.
fn mentioned_paths(text: &str, top_level: &[String]) -> Vec<(usize, String)> {
    let is_path_char = |c: char| c.is_ascii_alphanumeric() || "_-./".contains(c);
    let mut found = Vec::new();
    for (number, line) in text.lines().enumerate() {
        let mut rest = line;
        while let Some(start) = rest.find(is_path_char) {
            let after = &rest[start..];
            let end = after.find(|c| !is_path_char(c)).unwrap_or(after.len());
            let word = after[..end].trim_end_matches('.');
            let before = &rest[..start];
            let next = after[end..].chars().next();
            rest = &after[end..];
            let external = before.ends_with(':') // an address (`https://…`)
                || before.ends_with('/') || before.ends_with('$') || before.ends_with('~')
                || matches!(next, Some('<' | '*' | '{' | '$' | '@'))
                || word.starts_with('/')
                || word.contains("..")
                || UPSTREAM.iter().any(|tree| word.starts_with(tree))
                || NOT_OURS.contains(&word);
            if external || !word.contains('/') {
                continue;
            }
            let extension = word.rsplit_once('.').map(|(_, e)| e);
            let first = word.split('/').next().unwrap_or_default();
            if extension.is_some_and(|e| EXTENSIONS.contains(&e))
                || top_level.iter().any(|t| t == first)
            {
                found.push((number + 1, word.to_string()));
            }
        }
    }
    found
}

#[test]
fn every_repository_path_the_docs_name_exists() {
    let root = workspace();
    let top_level: Vec<String> = std::fs::read_dir(&root)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name != "target")
        .collect();
    let crates: Vec<PathBuf> = documents(&root)
        .into_iter()
        .filter(|p| p.file_name().is_some_and(|n| n == "Cargo.toml"))
        .map(|p| p.parent().unwrap().to_path_buf())
        .collect();
    let mut missing = Vec::new();
    let mut checked = 0;
    for document in documents(&root) {
        let text = std::fs::read_to_string(&document).unwrap();
        let dir = document.parent().unwrap();
        for (line, path) in mentioned_paths(&text, &top_level) {
            checked += 1;
            let bases = [root.as_path(), dir]
                .into_iter()
                .map(Path::to_path_buf)
                .chain(
                    crates
                        .iter()
                        .flat_map(|c| [c.clone(), c.join("src"), c.join("tests")]),
                );
            if !bases.into_iter().any(|base| base.join(&path).exists()) {
                let shown = document.strip_prefix(&root).unwrap().display().to_string();
                missing.push(format!("{shown}:{line}: `{path}`"));
            }
        }
    }
    assert!(
        checked > 100,
        "only {checked} paths found: the scan is broken"
    );
    assert!(
        missing.is_empty(),
        "paths named in the docs that do not exist (moved? update the mention):\n{}",
        missing.join("\n")
    );
}

/// The scan itself: what counts as a path, and what is left alone.
#[test]
fn the_scan_finds_paths_and_skips_addresses_and_placeholders() {
    let top_level = ["gpu-build".to_string(), "scripts".to_string()];
    let text = "see `gpu-build/src/lib.rs`, scripts/setup.sh and src/moved.rs.\n\
                https://github.com/a/b.rs /usr/lib/llvm-22 targets/<name>/mod.rs \
                mlir/test/Integration/GPU/CUDA/x.mlir gpu-build/src/targets/";
    let found: Vec<String> = mentioned_paths(text, &top_level)
        .into_iter()
        .map(|(_, p)| p)
        .collect();
    assert_eq!(
        found,
        [
            "gpu-build/src/lib.rs",
            "scripts/setup.sh",
            "src/moved.rs",
            "gpu-build/src/targets/"
        ]
    );
}
