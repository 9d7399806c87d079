//! The `gpu-build` command: `compile` writes what a build script writes, byte for byte;
//! `inspect` describes an OUT_DIR with the resource usage ptxas and LLVM report; `prebuild`
//! writes a crate's prebuilt folder; bad arguments are clear errors.

use gpu_build::{Build, CacheSetting};
use std::path::{Path, PathBuf};
use std::process::Command;

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn gpu_build(args: &[&str]) -> (bool, String, String) {
    gpu_build_with(args, &[])
}

/// `gpu-build ARGS` with the variables `env` set, outside of any cargo build (no `TARGET`, no
/// rustc flags that would change the host objects).
fn gpu_build_with(args: &[&str], env: &[(&str, &str)]) -> (bool, String, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_gpu-build"))
        .args(args)
        .envs(env.iter().copied())
        .env_remove("TARGET")
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .output()
        .unwrap();
    (
        output.status.success(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// Every file under `dir` with its bytes; scratch space and the record of what the build read
/// (this machine's paths, beside the outputs) aside.
fn tree(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut files: Vec<_> = walkdir::WalkDir::new(dir)
        .into_iter()
        .map(|e| e.unwrap())
        .filter(|e| e.file_type().is_file())
        .map(|e| {
            let path = e.path().strip_prefix(dir).unwrap().to_path_buf();
            (path, std::fs::read(e.path()).unwrap())
        })
        .filter(|(path, _)| {
            !path.starts_with("gpu-build/scratch") && !path.ends_with("gpu-build-record.json")
        })
        .collect();
    files.sort();
    files
}

fn rustc_host() -> String {
    let output = Command::new("rustc").arg("-vV").output().unwrap();
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .find_map(|l| l.strip_prefix("host: ").map(String::from))
        .unwrap()
}

/// The sample crate's build, as its build script runs it (`gpu_build::build()`), into `out`.
fn build_script_outputs(out: &Path) {
    let mut build = Build::for_crate(&workspace().join("sample-project")).unwrap();
    build
        .out_dir(out)
        .crate_name("sample-project")
        .host_target(&rustc_host())
        .cache(CacheSetting::Off)
        .quiet(true);
    build.compile().unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn compile_writes_what_the_build_script_writes() {
    let (script, cli) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    build_script_outputs(script.path());
    let sample = workspace().join("sample-project");
    let kernels = [
        "vadd",
        "saxpy",
        "reduce",
        "math",
        "matmul",
        "stencil",
        "block_total",
    ]
    .map(|k| format!("kernels/{k}.mlir"));
    let mut args = vec!["compile", "--crate-name", "sample-project", "--no-cache"];
    let out = cli.path().to_str().unwrap();
    let base = sample.to_str().unwrap();
    args.extend(["--out", out, "--base-dir", base]);
    args.extend([
        "-t",
        "nvptx:sm_80,sm_90",
        "-t",
        "amdgpu:gfx90a,gfx1100",
        "-t",
        "host",
        "-t",
        "vulkan",
        "-t",
        "opencl",
    ]);
    args.extend(kernels.iter().map(String::as_str));
    let (ok, _, stderr) = gpu_build(&args);
    assert!(ok, "{stderr}");
    assert!(
        stderr.contains("wrote 63 objects of 7 gpu.modules"),
        "{stderr}"
    );
    let (ours, theirs) = (tree(cli.path()), tree(script.path()));
    let names =
        |files: &[(PathBuf, Vec<u8>)]| files.iter().map(|(p, _)| p.clone()).collect::<Vec<_>>();
    assert_eq!(names(&ours), names(&theirs));
    let differing: Vec<_> = ours
        .iter()
        .zip(&theirs)
        .filter(|(a, b)| a.1 != b.1)
        .map(|(a, _)| a.0.display().to_string())
        .collect();
    assert!(differing.is_empty(), "different bytes: {differing:?}");
}

/// `ptxas -v`'s `Used N registers` for one kernel of `ptx` built for `chip` at `O2`.
fn ptxas_registers(ptx: &Path, chip: &str) -> u32 {
    let wheel = Command::new("python3")
        .args([
            "-c",
            "import nvidia.cuda_nvcc as m; print(list(m.__path__)[0])",
        ])
        .output()
        .unwrap();
    let ptxas = PathBuf::from(String::from_utf8_lossy(&wheel.stdout).trim()).join("bin/ptxas");
    let dir = tempfile::tempdir().unwrap();
    let output = Command::new(ptxas)
        .args(["-v", "-arch", chip, "--opt-level", "2"])
        .arg(ptx)
        .arg("-o")
        .arg(dir.path().join("k.cubin"))
        .output()
        .unwrap();
    let log = String::from_utf8_lossy(&output.stderr);
    log.split("Used ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no register count in {log}"))
}

/// `.vgpr_count` of the hsaco's metadata as `llvm-readobj-22 --notes` prints it.
fn readobj_vgprs(hsaco: &Path) -> u32 {
    let output = Command::new("llvm-readobj-22")
        .arg("--notes")
        .arg(hsaco)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&output.stdout);
    text.lines()
        .find_map(|l| l.trim().strip_prefix(".vgpr_count:"))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("no .vgpr_count in {text}"))
}

#[test]
fn inspect_describes_an_out_dir_with_the_objects_resource_usage() {
    let out = tempfile::tempdir().unwrap();
    build_script_outputs(out.path());
    let (ok, stdout, stderr) = gpu_build(&["inspect", out.path().to_str().unwrap()]);
    assert!(ok, "{stderr}");
    assert!(
        stdout.contains("gpu.module @reduce (kernels/reduce.mlir)"),
        "{stdout}"
    );
    assert!(
        stdout.contains(
            "launch: unsafe fn reduce::block_sum(queue: impl Into<Queue>, config: &LaunchConfig, \
             arg0: impl AsMemref<'views, f32, 1>"
        ),
        "{stdout}"
    );
    let dir = out.path().join("gpu-build/kernels_reduce_mlir/reduce");
    // An object's line ends with what loading it asks of the driver; its resources follow.
    let object_and_usage = |object: &str| -> (String, String) {
        let lines: Vec<&str> = stdout.lines().collect();
        let at = lines
            .iter()
            .position(|line| line.contains(&format!("kernels_reduce_mlir/reduce/{object}")))
            .unwrap_or_else(|| panic!("no line for {object} in:\n{stdout}"));
        (lines[at].to_string(), lines[at + 1].to_string())
    };
    for chip in ["sm_80", "sm_90"] {
        let registers = ptxas_registers(&dir.join(format!("{chip}.ptx")), chip);
        let (object, usage) = object_and_usage(&format!("{chip}.cubin"));
        assert!(
            object.ends_with(", a CUDA 12.x driver or newer)")
                && object.contains("  (built by CUDA 12."),
            "{object}"
        );
        let expected = format!(
            "      @block_sum: {registers} registers, 1024 B static shared memory, 0 B stack frame"
        );
        assert_eq!(usage, expected, "{stdout}");
        let (object, _) = object_and_usage(&format!("{chip}.ptx"));
        assert!(object.contains("  (PTX ISA "), "{object}");
    }
    // Each object's size and then what the program embeds (its zstd frame's size), and the
    // totals.
    let (object, _) = object_and_usage("gfx90a.hsaco");
    let frame = std::fs::metadata(dir.join("gfx90a.hsaco.zst"))
        .unwrap()
        .len();
    let bytes = std::fs::metadata(dir.join("gfx90a.hsaco")).unwrap().len();
    assert!(frame < bytes, "{frame} >= {bytes}");
    assert!(object.contains(&format!(" B {:>8} B  ", frame)), "{object}");
    assert!(
        stdout.contains("\nall objects: ") && stdout.contains(", embedded as "),
        "{stdout}"
    );
    let vgprs = readobj_vgprs(&dir.join("gfx90a.hsaco"));
    let (object, usage) = object_and_usage("gfx90a.hsaco");
    assert!(
        object.ends_with("gfx90a.hsaco  (code object v5, ROCm 5.2 or newer)"),
        "{object}"
    );
    assert!(
        usage.starts_with(&format!("      @block_sum: {vgprs} VGPRs,")),
        "{stdout}"
    );
    assert!(stdout.contains("1024 B LDS"), "{stdout}");

    // One object by itself.
    let (ok, stdout, _) = gpu_build(&["inspect", dir.join("sm_80.ptx").to_str().unwrap()]);
    assert!(ok && stdout.contains(".entry block_sum"), "{stdout}");
}

#[test]
fn prebuild_writes_the_crates_prebuilt_folder() {
    let dir = tempfile::tempdir().unwrap();
    let krate = dir.path();
    std::fs::create_dir_all(krate.join("src")).unwrap();
    std::fs::create_dir_all(krate.join("kernels")).unwrap();
    std::fs::write(
        krate.join("Cargo.toml"),
        "[package]\nname = \"kernlib\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
    )
    .unwrap();
    std::fs::copy(
        workspace().join("sample-project/kernels/vadd.mlir"),
        krate.join("kernels/vadd.mlir"),
    )
    .unwrap();
    std::fs::write(
        krate.join("src/lib.rs"),
        "gpu_embed::include_gpu_binary!(\"kernels/vadd.mlir\", targets = [nvptx(sm_80), host]);\n",
    )
    .unwrap();
    let (ok, _, stderr) = gpu_build(&["prebuild", krate.to_str().unwrap()]);
    assert!(ok, "{stderr}");
    let record = std::fs::read_to_string(krate.join("gpu-prebuilt/prebuilt.json")).unwrap();
    assert!(record.contains("\"crate_name\": \"kernlib\""), "{record}");
    assert!(
        record.contains(&format!("\"{}\"", rustc_host())),
        "{record}"
    );
    assert!(krate
        .join("gpu-prebuilt/gpu-build/host/libgpu_host_kernels_kernlib.a")
        .is_file());
}

#[test]
fn bad_arguments_are_clear_errors() {
    let (ok, _, stderr) = gpu_build(&["compile", "--out", "/tmp/x", "-t", "nvidia", "k.mlir"]);
    assert!(!ok);
    assert!(
        stderr.contains("unknown target vendor `nvidia`")
            && stderr.contains("nvptx, amdgpu, host, vulkan or opencl"),
        "{stderr}"
    );
    let (ok, _, stderr) = gpu_build(&[
        "compile",
        "--out",
        "/tmp/x",
        "-T",
        "b.mlir=vulkan",
        "k.mlir",
    ]);
    assert!(
        !ok && stderr.contains("`b.mlir` is not one of the files to compile"),
        "{stderr}"
    );
    let (ok, _, stderr) = gpu_build(&["compile", "--out", "/tmp/x", "-T", "k.mlir", "k.mlir"]);
    assert!(
        !ok && stderr.contains("expected FILE=VENDOR[:CHIPS]"),
        "{stderr}"
    );
    let (ok, _, stderr) = gpu_build(&["inspect", "/nonexistent/manifest.json"]);
    assert!(
        !ok && stderr.starts_with("error: cannot read /nonexistent/manifest.json"),
        "{stderr}"
    );
    let (ok, _, stderr) = gpu_build(&["compile", "--help"]);
    assert!(ok, "{stderr}");
}

/// The typo MLIR 22's parser crashes on (a dense array of `index` elements) is an error at its
/// line from `compile` and from `run`: exit status 1, nothing written.
#[test]
fn a_construct_that_crashes_mlirs_parser_is_an_error_at_its_line() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("k.mlir");
    std::fs::write(
        &file,
        "func.func @f() attributes {x = array<index: 1>} { return }\n",
    )
    .unwrap();
    let out = dir.path().join("out");
    let expected = "k.mlir:1:38: error: a dense array attribute cannot hold `index` elements \
                    (MLIR 22 crashes on it); write array<i32: …> or array<i64: …>";
    let file = file.to_str().unwrap();
    for args in [
        vec![
            "compile",
            "-t",
            "host",
            "-t",
            "vulkan",
            "--out",
            out.to_str().unwrap(),
            file,
        ],
        vec!["run", "--device", "host", file],
    ] {
        let output = Command::new(env!("CARGO_BIN_EXE_gpu-build"))
            .args(&args)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(1), "{args:?}: {stderr}");
        assert!(
            stderr.contains(expected) && !stderr.contains("crashed"),
            "{args:?}: {stderr}"
        );
    }
    let left: Vec<_> = std::fs::read_dir(&out).unwrap().collect();
    assert!(
        left.is_empty(),
        "a failed build left {left:?} in its output folder"
    );
}

/// The optimized LLVM IR `gpu-build compile -t host` writes for the sample's `kernels/<module>.mlir`
/// (with `env` besides `GPU_BUILD_DUMP=llvm`).
fn optimized_host_ir(module: &str, env: &[(&str, &str)]) -> String {
    let out = tempfile::tempdir().unwrap();
    let sample = workspace().join("sample-project");
    let kernel = format!("kernels/{module}.mlir");
    let mut env = env.to_vec();
    env.push(("GPU_BUILD_DUMP", "llvm"));
    let (ok, _, stderr) = gpu_build_with(
        &[
            "compile",
            "-t",
            "host",
            "--no-cache",
            "--base-dir",
            sample.to_str().unwrap(),
            "--out",
            out.path().to_str().unwrap(),
            &kernel,
        ],
        &env,
    );
    assert!(ok, "{stderr}");
    let dumps = out
        .path()
        .join(format!("gpu-build/kernels_{module}_mlir/{module}"));
    let optimized = std::fs::read_dir(&dumps)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .find(|path| path.to_string_lossy().ends_with(".opt.ll"))
        .expect("the optimized LLVM IR dump");
    std::fs::read_to_string(optimized).unwrap()
}

/// Whether a block of `ir` whose label contains `copy` (a loop copy's suffix) enters a vector
/// body.
fn copy_enters_vector_body(ir: &str, copy: &str) -> bool {
    ir.split("\n\n").any(|block| {
        block
            .lines()
            .next()
            .is_some_and(|label| label.contains(copy) && label.contains(':'))
            && block.contains("label %vector.body")
    })
}

/// A thread loop behind a guard that passes every thread of most blocks runs an unguarded copy
/// there (`exit_thread_loops_at_guards.cpp`'s versioning), which the vectorizer takes: the tree
/// reduction's `i < n` (whose other side stores a zero) and the stencil's border test
/// `x == 0 || x >= cols - 1` (comparisons combined with `or`, one of them `==`) each leave a
/// `.unguarded` loop that enters a vector body. Without the versioning neither has one
/// (baseline x86-64 has no masked loads).
#[test]
fn thread_loops_guarded_by_id_tests_are_versioned_and_vectorized_on_the_host() {
    for module in ["reduce", "stencil"] {
        let ir = optimized_host_ir(module, &[]);
        assert!(
            copy_enters_vector_body(&ir, ".unguarded"),
            "{module}: no unguarded copy of a thread loop enters a vector body"
        );
    }
}

/// Checked host objects (`GPU_EMBED_CHECK=1` at build time): a thread loop whose accesses a test
/// before the loop finds in bounds for every thread runs a copy without the checks, and the
/// vectorizer takes that copy, as it takes the unchecked loop.
#[test]
fn checked_thread_loops_in_bounds_run_a_vectorized_copy_without_the_checks() {
    for module in ["saxpy", "stencil"] {
        let ir = optimized_host_ir(module, &[("GPU_EMBED_CHECK", "1")]);
        assert!(ir.contains("@check.site"), "{module}: not a checked object");
        assert!(
            copy_enters_vector_body(&ir, ".checked"),
            "{module}: no check-free copy of a thread loop enters a vector body"
        );
    }
    // The matmul's thread loop around its k loop gets the copy, and its products are vectors
    // of threads, 8 at x86-64-v3 (AVX2). Seeded: when a hook's reported index (the k) made the
    // k loop look like a thread loop itself, only the k loop got a copy, one thread at a time
    // (pairs of products at most).
    let matmul = optimized_host_ir("matmul", &[("GPU_EMBED_CHECK", "1")]);
    assert!(
        matmul.contains("fmul contract <8 x float>"),
        "matmul: the checked object multiplies no vector of 8 threads"
    );
}

/// Checked host objects: the tree reduction's step (`row[t] += row[t + stride]` for `t <
/// stride`, between barriers) touches no workgroup byte another thread writes, which a test
/// before its thread loop finds (`workgroup_nest.cpp`'s race-free test): the loop's copy, the one
/// that adds, tells the runtime's shadow nothing, in the object for this CPU level (x86-64-v4,
/// the AVX-512 copy). Its first region's stores, of a variable not yet written, go to the
/// runtime a row at a time instead (the row hook's three `i64`s: offset, stride, bytes).
#[test]
fn checked_race_free_thread_loops_run_a_copy_without_workgroup_hooks() {
    let ir = optimized_host_ir("reduce", &[("GPU_EMBED_CHECK", "1")]);
    // The workgroup hook takes the offset and the bytes; the row hook the offset, the stride and
    // the bytes.
    let per_access = |block: &str| passes_variable_then_i64s(block, 2);
    let per_row = |block: &str| passes_variable_then_i64s(block, 3);
    let function = ir
        .split("\ndefine ")
        .find(|f| {
            f.lines()
                .next()
                .is_some_and(|l| l.contains("x86-64-v4.blocks("))
        })
        .expect("the x86-64-v4 blocks entry");
    let blocks: Vec<&str> = function.split("\n\n").collect();
    let label = |block: &str| block.trim_start().lines().next().unwrap_or("").to_string();
    assert!(
        blocks
            .iter()
            .any(|b| label(b).contains(".checked") && b.contains("fadd float")),
        "no copy of the tree step"
    );
    for block in &blocks {
        assert!(
            !(label(block).contains(".checked") && per_access(block)),
            "a loop copy tells the shadow of its accesses:\n{block}"
        );
    }
    assert!(blocks.iter().any(|b| per_row(b)), "no row hook call");
}

/// The tiled matmul's rows of threads run four at a time where the processor has registers for
/// them (thread_rows.cpp): at x86-64-v3 and x86-64-v4 every vector of the second tile loaded
/// from workgroup memory serves four rows' products (one row per load before: seeded by turning
/// the pass off, this fails).
#[test]
fn host_thread_rows_share_the_tile_loads_of_the_matmul() {
    let ir = optimized_host_ir("matmul", &[]);
    for cpu in ["x86-64-v3", "x86-64-v4"] {
        let function = ir
            .split("\ndefine ")
            .find(|f| {
                f.lines()
                    .next()
                    .is_some_and(|l| l.contains(&format!("{cpu}.blocks(")))
            })
            .unwrap_or_else(|| panic!("the {cpu} blocks entry"));
        let tile_loads: Vec<&str> = function
            .lines()
            .filter(|l| l.contains("x float>, ptr addrspace(3)") && l.contains("@__wg_matmul_1"))
            .filter_map(|l| l.trim().split(" = load ").next())
            .collect();
        assert!(
            !tile_loads.is_empty(),
            "{cpu}: no vector load of the second tile"
        );
        for load in &tile_loads {
            let products = function
                .lines()
                .filter(|l| l.contains(" fmul ") && l.split([' ', ',']).any(|word| word == *load))
                .count();
            assert!(
                products >= 4,
                "{cpu}: {load} serves {products} products, not the four rows'"
            );
        }
    }
}

/// The block sum's last region, which only thread 0 works in (`if (thread == 0)` after
/// `gpu.all_reduce`, with the total kept in a register from the thread that computed it), runs
/// that thread alone at every CPU level: its thread loop starts at the thread whose id matches,
/// tested once per row (`%in_row`), instead of testing every thread of the block (seeded: with
/// exit_thread_loops_at_guards.cpp's enterAtMatch off, no entry has the test).
#[test]
fn host_regions_of_thread_zero_run_one_thread() {
    let ir = optimized_host_ir("block_total", &[]);
    for entry in [
        "block_total.x86-64-v3.blocks(",
        "block_total.x86-64-v4.blocks(",
        "block_total.blocks(",
    ] {
        let function = ir
            .split("\ndefine ")
            .find(|f| f.lines().next().is_some_and(|l| l.contains(entry)))
            .unwrap_or_else(|| panic!("the entry {entry}"));
        assert!(
            function.contains("%in_row"),
            "{entry}: the thread-0 region walks every thread"
        );
    }
}

/// Whether `block` calls a hook with a workgroup variable's description followed by `count`
/// `i64` arguments (each a plain value or a name) and then an `i32` (the thread ids).
fn passes_variable_then_i64s(block: &str, count: usize) -> bool {
    block
        .match_indices("@check.variable, ")
        .any(|(at, prefix)| {
            let mut rest = &block[at + prefix.len()..];
            for _ in 0..count {
                let Some(after) = rest.strip_prefix("i64 ") else {
                    return false;
                };
                let Some(comma) = after.find(", ") else {
                    return false;
                };
                rest = &after[comma + 2..];
            }
            rest.starts_with("i32 ")
        })
}

/// `gpu-build compile` of the sample's vadd.mlir for `targets` into `out`, with `env` set.
fn compile_sample_vadd(
    targets: &[&str],
    out: &Path,
    env: &[(&str, &str)],
) -> (bool, String, String) {
    let sample = workspace().join("sample-project");
    let mut args = vec!["compile"];
    for target in targets {
        args.extend(["-t", target]);
    }
    args.extend([
        "--base-dir",
        sample.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "kernels/vadd.mlir",
    ]);
    gpu_build_with(&args, env)
}

/// The first entry file of the local cache at `cache`.
fn first_entry(cache: &Path) -> PathBuf {
    walkdir::WalkDir::new(cache.join("v1"))
        .into_iter()
        .map(|e| e.unwrap())
        .find(|e| e.file_type().is_file())
        .unwrap()
        .into_path()
}

/// `gpu-build cache`: statistics after a build, every entry re-hashed (a damaged one found and
/// removed), emptied.
#[test]
fn cache_stats_verify_and_clear() {
    let (out, cache) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let dir = cache.path().to_str().unwrap();
    let (ok, _, stderr) = compile_sample_vadd(
        &["host", "nvptx:sm_80"],
        out.path(),
        &[("GPU_BUILD_CACHE_DIR", dir)],
    );
    assert!(ok, "{stderr}");
    let (ok, stats, stderr) = gpu_build(&["cache", "stats", "--dir", dir]);
    assert!(ok, "{stderr}");
    let local = stats
        .lines()
        .find(|l| l.starts_with("local"))
        .expect(&stats);
    let columns: Vec<&str> = local.split_whitespace().collect();
    // store, builds, hits, misses, rejected, untrusted, read (2 words), writes, written (2),
    // failures.
    assert_eq!(
        (columns[1], columns[2], columns[3], columns[8]),
        ("1", "0", "2", "2"),
        "{stats}"
    );
    let (ok, verified, stderr) = gpu_build(&["cache", "verify", "--dir", dir]);
    assert!(ok, "{stderr}");
    assert!(verified.contains("2 entries intact"), "{verified}");
    // Damage one entry: verify finds it and removes it.
    let entry = first_entry(cache.path());
    let mut bytes = std::fs::read(&entry).unwrap();
    bytes[100] ^= 1;
    std::fs::write(&entry, bytes).unwrap();
    let (_, verified, _) = gpu_build(&["cache", "verify", "--dir", dir]);
    assert!(
        verified.contains("1 entries intact") && verified.contains("1 damaged and removed"),
        "{verified}"
    );
    assert!(!entry.exists());
    let (ok, cleared, stderr) = gpu_build(&["cache", "clear", "--dir", dir]);
    assert!(
        ok && cleared.contains("removed 1 entries"),
        "{cleared}{stderr}"
    );
    let (_, stats, _) = gpu_build(&["cache", "stats", "--dir", dir]);
    assert!(stats.contains("no builds recorded yet"), "{stats}");
}

/// `gpu-build cache keygen` writes the secret to a new owner-only file (never printed, never
/// overwritten) and prints the public key; a build signing with it stores signed entries in a
/// directory store, and `gpu-build cache signer` names the key, locally and in the store, and
/// says whether `GPU_BUILD_CACHE_TRUSTED_KEYS` trusts it.
#[cfg(feature = "remote-cache")]
#[test]
fn cache_keygen_and_signer() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let secret = dir.path().join("ci.key");
    let secret_arg = secret.to_str().unwrap();
    let (ok, public, stderr) = gpu_build(&["cache", "keygen", "--secret", secret_arg]);
    assert!(ok, "{stderr}");
    let public = public.trim().to_string();
    assert!(
        public.starts_with("gpu-build-cache-public-key:"),
        "{public}"
    );
    let secret_text = std::fs::read_to_string(&secret).unwrap();
    let digits = secret_text.trim().rsplit(':').next().unwrap();
    assert_eq!(digits.len(), 64);
    assert!(!stderr.contains(digits) && !public.contains(digits));
    let mode = std::fs::metadata(&secret).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600, "owner-only");
    let (ok, _, stderr) = gpu_build(&["cache", "keygen", "--secret", secret_arg]);
    assert!(!ok && stderr.contains("never overwrites"), "{stderr}");
    assert_eq!(std::fs::read_to_string(&secret).unwrap(), secret_text);

    let (out, cache, store) = (
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
    );
    let store_url = format!("file://{}", store.path().display());
    let (ok, _, stderr) = compile_sample_vadd(
        &["host"],
        out.path(),
        &[
            ("GPU_BUILD_CACHE_DIR", cache.path().to_str().unwrap()),
            ("GPU_BUILD_CACHE_URL", &store_url),
            ("GPU_BUILD_CACHE_SIGNING_KEY_FILE", secret_arg),
        ],
    );
    assert!(ok, "{stderr}");
    let entry = first_entry(cache.path());
    let digest = entry.file_name().unwrap().to_str().unwrap().to_string();
    let cache_arg = cache.path().to_str().unwrap();
    let (ok, shown, stderr) = gpu_build(&["cache", "signer", "--dir", cache_arg, &digest[..8]]);
    assert!(
        ok && shown.contains(&format!("signed by {public}")),
        "{shown}{stderr}"
    );
    let (ok, shown, stderr) = gpu_build_with(
        &["cache", "signer", "--remote", &digest],
        &[
            ("GPU_BUILD_CACHE_URL", &store_url),
            ("GPU_BUILD_CACHE_TRUSTED_KEYS", &public),
        ],
    );
    assert!(
        ok && shown.contains(&format!("signed by {public} (trusted")),
        "{shown}{stderr}"
    );
    // A changed byte: the signature no longer verifies, and signer says so.
    let mut bytes = std::fs::read(&entry).unwrap();
    bytes[100] ^= 1;
    std::fs::write(&entry, bytes).unwrap();
    let (ok, _, stderr) = gpu_build(&["cache", "signer", entry.to_str().unwrap()]);
    assert!(
        !ok && stderr.contains("not an intact cache entry"),
        "{stderr}"
    );
}
