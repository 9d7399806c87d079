//! Zero-configuration builds: `fn main() { gpu_build::build(); }` in build.rs finds every
//! `include_gpu_binary!` call in the crate's Rust sources — `src/`, `examples/`, `tests/` and
//! `benches/`, so a kernel only an example or a test uses is built too — (parsed with `syn`, so
//! calls in comments and strings do not count) and compiles what each asks for.

use crate::builder::Build;
use crate::request::TargetRequest;
use gpu_manifest::call::IncludeCall;
use std::path::{Path, PathBuf};
use syn::visit::Visit;

/// The folders of a crate whose Rust files may call `include_gpu_binary!`.
const SOURCE_DIRS: [&str; 4] = ["src", "examples", "tests", "benches"];

/// Compiles every kernel file named by an `include_gpu_binary!` call under `src/`, `examples/`,
/// `tests/` or `benches/`. On failure, prints the error the way cargo shows build-script errors
/// and exits with status 1.
pub fn build() {
    build_crate(None);
}

/// [`build`] with every host object checked, whatever `GPU_EMBED_CHECK` says
/// ([`Build::checked`]): for a crate of checked copies of kernels run beside the plain ones, by
/// a benchmark of the checks' cost or by tests of the kernels with every check.
pub fn build_checked() {
    build_crate(Some(true));
}

/// [`build`], with the host objects checked as `checked` says (`None`: as the environment
/// says).
fn build_crate(checked: Option<bool>) {
    let crate_dir = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_default());
    let mut build = match Build::for_crate(&crate_dir) {
        Ok(build) => build,
        Err(error) => {
            eprintln!("error: {error}");
            std::process::exit(1);
        }
    };
    // New or removed macro calls must rerun the build script.
    for dir in SOURCE_DIRS
        .iter()
        .filter(|dir| crate_dir.join(dir).is_dir())
    {
        println!("cargo::rerun-if-changed={dir}");
    }
    if build.is_empty() {
        println!(
            "cargo::warning=gpu_build::build() found no include_gpu_binary! call under src/, \
             examples/, tests/ or benches/"
        );
        return;
    }
    if let Some(checked) = checked {
        build.checked(checked);
    }
    build.compile_or_exit();
}

/// The crate's source folders that exist, in [`SOURCE_DIRS`] order.
fn source_dirs(crate_dir: &Path) -> Vec<PathBuf> {
    SOURCE_DIRS
        .iter()
        .map(|dir| crate_dir.join(dir))
        .filter(|dir| dir.is_dir())
        .collect()
}

impl Build {
    /// What `gpu_build::build()` compiles for the crate in `crate_dir`: every kernel file its
    /// `include_gpu_binary!` calls name (in `src/`, `examples/`, `tests/`, `benches/`), each for
    /// the targets its calls ask, relative to `crate_dir`. Set the output directory, crate name
    /// and so on as for any build (`gpu-build prebuild` and tools use this).
    pub fn for_crate(crate_dir: &Path) -> crate::error::Result<Build> {
        let calls = find_calls(&source_dirs(crate_dir))
            .map_err(|e| crate::error::Error::new(crate::error::ErrorKind::Io, e))?;
        let mut build = Build::new();
        build.base_dir(crate_dir);
        for (path, requests) in calls {
            build.kernel_with_targets(path, requests);
        }
        Ok(build)
    }
}

/// Every distinct kernel file with the targets its calls ask for (calls naming the same file are
/// merged), in the order found (folders in order, files sorted within each).
pub(crate) fn find_calls(dirs: &[PathBuf]) -> Result<Vec<(PathBuf, Vec<TargetRequest>)>, String> {
    let mut files = Vec::new();
    for dir in dirs {
        let mut found = rust_files(dir)?;
        found.sort();
        files.extend(found);
    }
    let mut calls: Vec<(PathBuf, Vec<TargetRequest>)> = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file)
            .map_err(|e| format!("cannot read {}: {e}", file.display()))?;
        // A file that does not parse is reported by rustc; its calls cannot be read here.
        let Ok(syntax) = syn::parse_file(&text) else {
            continue;
        };
        let mut finder = Finder::default();
        finder.visit_file(&syntax);
        for call in finder.calls {
            let path = PathBuf::from(call.path.value());
            let requests = requests_of(&call);
            match calls.iter_mut().find(|(known, _)| *known == path) {
                Some((_, known)) => {
                    for request in requests {
                        if !known.contains(&request) {
                            known.push(request);
                        }
                    }
                }
                None => calls.push((path, requests)),
            }
        }
    }
    Ok(calls)
}

/// Targets of one call; unknown target names are left to the macro, which points at them.
fn requests_of(call: &IncludeCall) -> Vec<TargetRequest> {
    let Some(targets) = &call.targets else {
        return Vec::new();
    };
    targets
        .iter()
        .filter_map(|target| {
            let vendor = target.vendor?;
            let fallback = vendor.default_chips();
            Some(TargetRequest {
                vendor,
                chips: target.chips.iter().map(|(chip, _)| chip.clone()).collect(),
                fallback: fallback.iter().map(|c| c.to_string()).collect(),
            })
        })
        .collect()
}

/// Every `.rs` file under `dir`, following symbolic links; a link back to a folder above it is
/// skipped (walkdir reports the loop) rather than followed forever.
fn rust_files(dir: &Path) -> Result<Vec<PathBuf>, String> {
    let mut files = Vec::new();
    for entry in walkdir::WalkDir::new(dir).follow_links(true) {
        match entry {
            Ok(entry) => {
                if entry.file_type().is_file()
                    && entry.path().extension().is_some_and(|e| e == "rs")
                {
                    files.push(entry.into_path());
                }
            }
            Err(error) if error.loop_ancestor().is_some() => continue,
            Err(error) => {
                let at = error
                    .path()
                    .map_or_else(|| dir.display().to_string(), |p| p.display().to_string());
                return Err(format!("cannot read {at}: {error}"));
            }
        }
    }
    Ok(files)
}

#[derive(Default)]
struct Finder {
    calls: Vec<IncludeCall>,
}

impl Visit<'_> for Finder {
    fn visit_macro(&mut self, mac: &syn::Macro) {
        if mac
            .path
            .segments
            .last()
            .is_some_and(|s| s.ident == "include_gpu_binary")
        {
            // Malformed arguments are the macro's to report, with a span.
            if let Ok(call) = mac.parse_body::<IncludeCall>() {
                self.calls.push(call);
            }
        }
        syn::visit::visit_macro(self, mac);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_calls_in_code_but_not_in_comments_or_strings() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("nested")).unwrap();
        std::fs::write(
            dir.path().join("main.rs"),
            r#"
            gpu_embed::include_gpu_binary!("kernels/a.mlir", targets = [nvptx(sm_80), amdgpu]);
            // include_gpu_binary!("kernels/commented.mlir");
            const S: &str = "include_gpu_binary!(\"kernels/string.mlir\")";
            mod inner { include_gpu_binary!("kernels/b.mlir"); }
            fn f() { include_gpu_binary!("kernels/a.mlir", targets = [nvptx(sm_90)]); }
            "#,
        )
        .unwrap();
        std::fs::write(
            dir.path().join("nested/k.rs"),
            "include_gpu_binary!(\"kernels/c.ll\", targets = [cuda]);",
        )
        .unwrap();
        std::fs::write(dir.path().join("broken.rs"), "fn (").unwrap();
        // A link back up: skipped, not followed forever.
        std::os::unix::fs::symlink(dir.path(), dir.path().join("nested/loop")).unwrap();
        let calls = find_calls(&[dir.path().to_path_buf()]).unwrap();
        let paths: Vec<&str> = calls.iter().map(|(p, _)| p.to_str().unwrap()).collect();
        assert_eq!(paths, ["kernels/a.mlir", "kernels/b.mlir", "kernels/c.ll"]);
        let a = &calls[0].1;
        assert_eq!(a.len(), 3, "nvptx(sm_80), amdgpu and nvptx(sm_90), merged");
        assert_eq!(a[0].chips, ["sm_80"]);
        assert_eq!(a[1].fallback, crate::AMDGPU_DEFAULT_CHIPS);
        assert!(calls[1].1.is_empty(), "no targets: the file's own");
        assert!(
            calls[2].1.is_empty(),
            "unknown vendor names are left to the macro"
        );
    }

    #[test]
    fn examples_tests_and_benches_count_too() {
        let dir = tempfile::tempdir().unwrap();
        for (folder, kernel) in [
            ("src", "a"),
            ("examples", "b"),
            ("tests", "c"),
            ("benches", "d"),
        ] {
            std::fs::create_dir_all(dir.path().join(folder)).unwrap();
            std::fs::write(
                dir.path().join(folder).join("x.rs"),
                format!("include_gpu_binary!(\"kernels/{kernel}.mlir\");"),
            )
            .unwrap();
        }
        let dirs: Vec<PathBuf> = SOURCE_DIRS.iter().map(|d| dir.path().join(d)).collect();
        let calls = find_calls(&dirs).unwrap();
        let paths: Vec<&str> = calls.iter().map(|(p, _)| p.to_str().unwrap()).collect();
        assert_eq!(
            paths,
            [
                "kernels/a.mlir",
                "kernels/b.mlir",
                "kernels/c.mlir",
                "kernels/d.mlir"
            ]
        );
    }
}
