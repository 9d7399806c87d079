//! `gpu-build inspect`: what a build produced, as a person reads it.

use crate::resources::{self, Usage};
use gpu_build::manifest::{Format, Manifest, Object, Vendor, MANIFEST_PATH};
use std::fmt::Write;
use std::path::{Path, PathBuf};

/// The description of `path`: a manifest, a directory holding one, or one object.
pub fn inspect(path: &Path) -> Result<String, String> {
    if path.is_dir() {
        for (manifest, out_dir) in [
            (path.join(MANIFEST_PATH), path.to_path_buf()),
            (path.join("manifest.json"), parent(path)),
        ] {
            if manifest.is_file() {
                return describe_manifest(&manifest, &out_dir);
            }
        }
        return Err(format!(
            "{} holds no gpu-build manifest ({MANIFEST_PATH}); give an OUT_DIR, a manifest or an object",
            path.display()
        ));
    }
    if path.extension().is_some_and(|e| e == "json") {
        // `<OUT_DIR>/gpu-build/manifest.json`: object paths are relative to OUT_DIR.
        return describe_manifest(path, &parent(&parent(path)));
    }
    describe_object(path)
}

fn parent(path: &Path) -> PathBuf {
    path.parent()
        .map_or_else(|| PathBuf::from("."), Path::to_path_buf)
}

fn read(path: &Path) -> Result<Vec<u8>, String> {
    std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))
}

fn size(bytes: u64) -> String {
    if bytes < 10 * 1024 {
        format!("{bytes} B")
    } else {
        format!("{:.1} KiB", bytes as f64 / 1024.0)
    }
}

fn describe_manifest(path: &Path, out_dir: &Path) -> Result<String, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let manifest = Manifest::from_json(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{}: {} gpu.modules, written by {}",
        path.display(),
        manifest.modules.len(),
        manifest.generator
    );
    let (mut objects_size, mut embedded_total) = (0, 0);
    for module in &manifest.modules {
        let _ = writeln!(out, "\ngpu.module @{} ({})", module.name, module.source);
        let rust_module = gpu_build::manifest::call::module_name(&module.name);
        for kernel in &module.kernels {
            let _ = writeln!(out, "  kernel @{}{}", kernel.name, kernel.signature);
            let launch = kernel.rust_signature().replacen(
                "unsafe fn ",
                &format!("unsafe fn {rust_module}::"),
                1,
            );
            let _ = writeln!(out, "    launch: {launch}");
        }
        let _ = writeln!(out, "  objects (size, then what the program embeds):");
        for object in &module.objects {
            let embedded = embedded_size(object, out_dir);
            objects_size += object.size;
            embedded_total += embedded.unwrap_or(0);
            let _ = writeln!(
                out,
                "    {:<7} {:<26} {:<4} {:>10} {:>10}  {}{}",
                object.vendor.name(),
                object.chip,
                object.format.to_string(),
                size(object.size),
                embedded.map_or("linked".to_string(), size),
                object.path,
                object
                    .requires
                    .map_or(String::new(), |requirement| format!("  ({requirement})"))
            );
            for usage in usages(object, out_dir) {
                let _ = writeln!(out, "      @{}: {}", usage.kernel, usage.summary);
            }
        }
    }
    let _ = writeln!(
        out,
        "\nall objects: {}, embedded as {} (zstd frames; the host object is linked)",
        size(objects_size),
        size(embedded_total)
    );
    Ok(out)
}

/// The bytes the program embeds for `object`: its zstd frame's, else (a manifest from before
/// frames) its own; `None` for the host object, linked into the program.
fn embedded_size(object: &Object, out_dir: &Path) -> Option<u64> {
    if object.abi.links_into_crate() {
        return None;
    }
    Some(match &object.compressed {
        Some(frame) => std::fs::metadata(out_dir.join(frame)).map_or(object.size, |m| m.len()),
        None => object.size,
    })
}

/// The resource usage an object records, or a line saying why there is none.
fn usages(object: &Object, out_dir: &Path) -> Vec<Usage> {
    let path = out_dir.join(&object.path);
    let result = match (object.vendor, object.format) {
        (Vendor::Nvptx, Format::Bin) => read(&path).and_then(|b| resources::cubin(&b)),
        (Vendor::Amdgpu, Format::Bin) => read(&path).and_then(|b| resources::hsaco(&b)),
        _ => Ok(Vec::new()),
    };
    result.unwrap_or_else(|why| {
        vec![Usage {
            kernel: "?".to_string(),
            summary: format!("cannot read the resource usage: {why}"),
        }]
    })
}

fn describe_object(path: &Path) -> Result<String, String> {
    let bytes = read(path)?;
    let extension = path.extension().and_then(|e| e.to_str()).unwrap_or("");
    let mut out = format!("{}: {}\n", path.display(), size(bytes.len() as u64));
    let usages = match extension {
        "cubin" => resources::cubin(&bytes)?,
        "hsaco" => resources::hsaco(&bytes)?,
        "ptx" => {
            let text = String::from_utf8_lossy(&bytes);
            for line in text.lines() {
                let line = line.trim_start();
                if let Some(rest) = line
                    .strip_prefix(".visible .entry ")
                    .or_else(|| line.strip_prefix(".entry "))
                {
                    let name = rest.split(['(', ' ']).next().unwrap_or(rest);
                    let _ = writeln!(out, "  .entry {name}");
                }
            }
            return Ok(out);
        }
        "o" => {
            out.push_str("  a host object (its kernels are described by the manifest)\n");
            return Ok(out);
        }
        _ => {
            return Err(format!(
                "{}: not a manifest, an OUT_DIR or an object gpu-build writes (.ptx, .cubin, .hsaco, .o)",
                path.display()
            ))
        }
    };
    for usage in usages {
        let _ = writeln!(out, "  @{}: {}", usage.kernel, usage.summary);
    }
    Ok(out)
}
