//! Bounded fuzzing of the front end and the whole pipeline. Seeds: the sample's kernels, the
//! tests' kernels (`tests/kernels`) and MLIR's own GPU integration tests (kernels outlined into
//! gpu.modules). Inputs are mutations of them (byte flips, truncations, token swaps and copies,
//! deleted or repeated lines, numbers changed, element types changed everywhere or at one place,
//! shapes changed, kernel attributes added with other element types and values, op names swapped
//! for others the seeds use, target attributes with values out of range, random chips, features,
//! flags and names), each compiled for every target family (NVPTX, AMDGPU, the host — a quarter
//! of them checked —, Vulkan and OpenCL) in a child process with a time limit, so an abort,
//! a crash, a panic or a hang is caught and reported with the input that caused it.
//!
//! `cargo test` runs 200 inputs; more, with another seed:
//! `GPU_BUILD_FUZZ_INPUTS=10000 GPU_BUILD_FUZZ_SEED=7 cargo test -p gpu-tests --test compile fuzz -- --nocapture`

use crate::child::{sample_project_kernels, ChildBuild, Job, Outcome, CHECKED};
use crate::common::*;
use crate::upstream_corpus::{prepare, programs, CORPUS};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

const DEFAULT_INPUTS: usize = 200;
const DEFAULT_SEED: u64 = 0x5eed_2026;
/// Far above any honest compile of these kernels for every target family: most take well under
/// a second, but the checked host build of `tests/kernels/vulkan.mlir`'s `reductions` kernel
/// takes 21 s alone on this machine's 2 cores and over 60 s while the rest of the suite runs
/// beside it; beyond this limit, a hang.
const INPUT_LIMIT: Duration = Duration::from_secs(240);

/// splitmix64: small, seedable, the same sequence everywhere.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }

    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

const CHIPS: &[&str] = &[
    "sm_80",
    "sm_90",
    "sm_90a",
    "sm_100",
    "sm_120",
    "sm_52",
    "sm_20",
    "sm_91",
    "sm_",
    "",
    "gfx90a",
    "gfx942",
    "gfx1100",
    "gfx90a:xnack+",
    "gfx90a:sramecc-:xnack+",
    "gfx9999",
    "gfx",
    "x86-64",
    "sm_80 ",
    "SM_80",
    "sm_80\\00",
];
const FEATURES: &[&str] = &[
    "",
    "+ptx60",
    "+ptx70",
    "+ptx80",
    "+ptx99",
    "+ptx",
    "-ptx80",
    "+sm_90",
    "+wavefrontsize64",
    "+wavefrontsize32,+wavefrontsize64",
    "-flat-address-space",
    "+foo",
    ",",
    "+xnack",
];
const OPT_LEVELS: &[&str] = &["0", "1", "2", "3", "4", "-1", "99", "4294967296", "\"2\""];
const FLAGS: &[&str] = &[
    "fast",
    "ftz",
    "daz",
    "finite_only",
    "unsafe_math",
    "no_wave64",
    "unknown_flag",
    "\"ptxas-cmd-options\" = [\"-v\"]",
    "\"ptxas-cmd-options\" = [\"--no-such-option\"]",
    "\"ptxas-cmd-options\" = 3",
    "collect-compiler-diagnostics",
];
const ABIS: &[&str] = &["\"400\"", "\"500\"", "\"600\"", "\"0\"", "\"x\"", "500"];
const NAMES: &[&str] = &[
    "weird-name.v2",
    "1abc",
    "a b",
    "ünïcödé",
    "$x",
    "%k",
    "_",
    "a.b.c",
    "fn",
    "self",
    "VectorAdd",
    "vadd",
    "k\\22quoted",
    "",
];

const NUMBERS: &[&str] = &[
    "0",
    "1",
    "2",
    "3",
    "7",
    "17",
    "64",
    "1024",
    "1025",
    "65536",
    "2147483647",
    "2147483648",
    "4294967296",
    "99999999999",
    "18446744073709551616",
];
const TYPES: &[&str] = &["f32", "f64", "f16", "bf16", "i32", "i64", "i1", "index"];

/// The runs of ASCII digits within `text[start..end]`.
fn digit_runs(text: &[u8], start: usize, end: usize) -> Vec<(usize, usize)> {
    let mut runs = Vec::new();
    let mut run = None;
    for (i, byte) in text.iter().enumerate().take(end).skip(start) {
        match (byte.is_ascii_digit(), run) {
            (true, None) => run = Some(i),
            (false, Some(s)) => {
                runs.push((s, i));
                run = None;
            }
            _ => {}
        }
    }
    if let Some(s) = run {
        runs.push((s, end));
    }
    runs
}

/// A target attribute with random parameters.
fn random_target(rng: &mut Rng) -> String {
    let vendor = *rng.pick(&["nvvm", "rocdl"]);
    let mut parameters = Vec::new();
    if rng.below(4) > 0 {
        parameters.push(format!("chip = \"{}\"", rng.pick(CHIPS)));
    }
    if rng.below(3) == 0 {
        parameters.push(format!("O = {}", rng.pick(OPT_LEVELS)));
    }
    if rng.below(3) == 0 {
        parameters.push(format!("features = \"{}\"", rng.pick(FEATURES)));
    }
    if rng.below(4) == 0 {
        let flags: Vec<&str> = (0..=rng.below(3)).map(|_| *rng.pick(FLAGS)).collect();
        parameters.push(format!("flags = {{{}}}", flags.join(", ")));
    }
    if vendor == "rocdl" && rng.below(4) == 0 {
        parameters.push(format!("abi = {}", rng.pick(ABIS)));
    }
    if rng.below(10) == 0 {
        parameters.push("link = [\"missing.bc\"]".to_string());
    }
    format!("#{vendor}.target<{}>", parameters.join(", "))
}

/// The byte ranges of the whitespace-separated tokens of `text`.
fn tokens(text: &[u8]) -> Vec<(usize, usize)> {
    let mut tokens = Vec::new();
    let mut start = None;
    for (i, byte) in text.iter().enumerate() {
        match (byte.is_ascii_whitespace(), start) {
            (true, Some(s)) => {
                tokens.push((s, i));
                start = None;
            }
            (false, None) => start = Some(i),
            _ => {}
        }
    }
    if let Some(s) = start {
        tokens.push((s, text.len()));
    }
    tokens
}

fn replace(text: &[u8], (start, end): (usize, usize), with: &[u8]) -> Vec<u8> {
    [&text[..start], with, &text[end..]].concat()
}

/// One mutation of `text`, and what it did.
fn mutate(text: Vec<u8>, rng: &mut Rng) -> (Vec<u8>, String) {
    let as_text = String::from_utf8_lossy(&text).into_owned();
    match rng.below(20) {
        0 => {
            let mut text = text;
            let count = 1 + rng.below(4);
            for _ in 0..count {
                let at = rng.below(text.len());
                text[at] = rng.next() as u8;
            }
            (text, format!("{count} bytes flipped"))
        }
        1 => {
            let at = rng.below(text.len());
            (text[..at].to_vec(), format!("truncated at byte {at}"))
        }
        2 => {
            let tokens = tokens(&text);
            let (a, b) = (*rng.pick(&tokens), *rng.pick(&tokens));
            let (first, second) = if a.0 <= b.0 { (a, b) } else { (b, a) };
            if first.1 > second.0 {
                return (text, "unchanged".into());
            }
            let first_bytes = text[first.0..first.1].to_vec();
            let second_bytes = text[second.0..second.1].to_vec();
            let (new_first, new_second, what) = if rng.below(2) == 0 {
                (second_bytes, first_bytes, "swapped")
            } else {
                (
                    second_bytes.clone(),
                    second_bytes,
                    "the second copied over the first",
                )
            };
            // The later token first, so the earlier one's offsets stay valid.
            let text = replace(&replace(&text, second, &new_second), first, &new_first);
            (
                text,
                format!("tokens at bytes {} and {}: {what}", first.0, second.0),
            )
        }
        3 => {
            let lines: Vec<&str> = as_text.lines().collect();
            let at = rng.below(lines.len());
            let mut out: Vec<&str> = lines.clone();
            let what = if rng.below(2) == 0 {
                out.remove(at);
                "deleted"
            } else {
                out.insert(at, lines[at]);
                "repeated"
            };
            (
                out.join("\n").into_bytes(),
                format!("line {} {what}", at + 1),
            )
        }
        4..=6 => {
            // Every target attribute of the first gpu.module replaced by random ones.
            let Some(open) = as_text.find("gpu.module @") else {
                return (text, "unchanged".into());
            };
            let Some(list_start) = as_text[open..].find('[').map(|i| open + i) else {
                return (text, "unchanged".into());
            };
            let Some(list_end) = as_text[list_start..].find(']').map(|i| list_start + i + 1) else {
                return (text, "unchanged".into());
            };
            let targets: Vec<String> = (0..=rng.below(2)).map(|_| random_target(rng)).collect();
            let list = format!("[{}]", targets.join(", "));
            let text = replace(as_text.as_bytes(), (list_start, list_end), list.as_bytes());
            (text, format!("targets {list}"))
        }
        7 | 8 => {
            // A number changed: sizes, bounds, constants, dimensions.
            let numbers: Vec<(usize, usize)> = tokens(&text)
                .into_iter()
                .flat_map(|(start, end)| digit_runs(&text, start, end))
                .collect();
            if numbers.is_empty() {
                return (text, "unchanged".into());
            }
            let at = *rng.pick(&numbers);
            let new = *rng.pick(NUMBERS);
            let old = String::from_utf8_lossy(&text[at.0..at.1]).into_owned();
            (
                replace(&text, at, new.as_bytes()),
                format!("number {old} at byte {} became {new}", at.0),
            )
        }
        9 => {
            // One element type replaced by another everywhere.
            let (old, new) = (*rng.pick(TYPES), *rng.pick(TYPES));
            let text = as_text.replace(old, new).into_bytes();
            (text, format!("type {old} became {new}"))
        }
        10 | 11 => one_element_type(&as_text, rng),
        12 | 13 => shape(&as_text, rng),
        14 | 15 => kernel_attribute(&as_text, rng),
        16 | 17 => op_name(&as_text, rng),
        _ => {
            // A symbol renamed everywhere it appears.
            let symbols: Vec<&str> = as_text
                .split('@')
                .skip(1)
                .filter_map(|rest| {
                    let end = rest
                        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                        .unwrap_or(rest.len());
                    (end > 0).then(|| &rest[..end])
                })
                .collect();
            if symbols.is_empty() {
                return (text, "unchanged".into());
            }
            let old = *rng.pick(&symbols);
            let new = if rng.below(8) == 0 {
                "x".repeat(5000)
            } else {
                rng.pick(NAMES).to_string()
            };
            let renamed = as_text
                .replace(&format!("@{old}("), &format!("@\"{new}\"("))
                .replace(&format!("@{old} "), &format!("@\"{new}\" "))
                .replace(&format!("@{old}\n"), &format!("@\"{new}\"\n"));
            (
                renamed.into_bytes(),
                format!("@{old} renamed to @\"{}\"", &new[..new.len().min(40)]),
            )
        }
    }
}

/// Where each whole word `word` starts in `text` (not inside a longer identifier).
fn word_starts(text: &str, word: &str) -> Vec<usize> {
    let part = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '.';
    text.match_indices(word)
        .map(|(at, _)| at)
        .filter(|&at| {
            !text[..at].chars().next_back().is_some_and(part)
                && !text[at + word.len()..].chars().next().is_some_and(part)
        })
        .collect()
}

/// One element type, at one of the places it is written, replaced by another.
fn one_element_type(text: &str, rng: &mut Rng) -> (Vec<u8>, String) {
    let places: Vec<(usize, &str)> = TYPES
        .iter()
        .flat_map(|ty| word_starts(text, ty).into_iter().map(move |at| (at, *ty)))
        .collect();
    if places.is_empty() {
        return (text.as_bytes().to_vec(), "unchanged".into());
    }
    let (at, old) = *rng.pick(&places);
    let new = *rng.pick(TYPES);
    (
        replace(text.as_bytes(), (at, at + old.len()), new.as_bytes()),
        format!("type {old} at byte {at} became {new}"),
    )
}

const DIMENSIONS: &[&str] = &[
    "?",
    "0",
    "1",
    "3",
    "16",
    "1024",
    "4294967296",
    "?x?",
    "2x2x2",
    "",
];

/// One memref, vector or tensor type with its first dimension changed, added or removed, wherever
/// that type is written (so the values that carry it still agree, and the change reaches the
/// verifier and the lowerings rather than stopping at the parser).
fn shape(text: &str, rng: &mut Rng) -> (Vec<u8>, String) {
    let shaped: Vec<usize> = ["memref<", "vector<", "tensor<"]
        .iter()
        .flat_map(|open| text.match_indices(open).map(|(at, _)| at))
        .collect();
    if shaped.is_empty() {
        return (text.as_bytes().to_vec(), "unchanged".into());
    }
    let start = *rng.pick(&shaped);
    let open = start + text[start..].find('<').unwrap() + 1;
    // The whole type, to its matching `>`.
    let mut depth = 1;
    let Some(close) = text[open..].char_indices().find_map(|(i, c)| {
        match c {
            '<' => depth += 1,
            '>' => depth -= 1,
            _ => {}
        }
        (depth == 0).then_some(open + i)
    }) else {
        return (text.as_bytes().to_vec(), "unchanged".into());
    };
    let old_type = &text[start..=close];
    let inside = &text[open..close];
    // The first dimension, with its `x`: `16x` of `16x32xf32`, `?x` of `?xf32`.
    let dimension = inside
        .find('x')
        .filter(|&x| x > 0 && inside[..x].chars().all(|c| c.is_ascii_digit() || c == '?'))
        .map_or(0, |x| x + 1);
    let new = *rng.pick(DIMENSIONS);
    let new = if new.is_empty() {
        String::new()
    } else {
        format!("{new}x")
    };
    let kept = if rng.below(3) == 0 { 0 } else { dimension };
    let new_type = format!("{}{new}{}>", &text[start..open], &inside[kept..]);
    (
        text.replace(old_type, &new_type).into_bytes(),
        format!("type {old_type} became {new_type} everywhere"),
    )
}

/// Kernel attributes of every target, with element types and values of any kind.
fn random_kernel_attribute(rng: &mut Rng) -> String {
    let ty = *rng.pick(TYPES);
    let values: Vec<&str> = (0..rng.below(4)).map(|_| *rng.pick(NUMBERS)).collect();
    let array = if values.is_empty() {
        format!("array<{ty}>")
    } else {
        format!("array<{ty}: {}>", values.join(", "))
    };
    let name = *rng.pick(&[
        "known_block_size",
        "known_grid_size",
        "nvvm.maxntid",
        "nvvm.reqntid",
        "nvvm.cluster_dim",
        "rocdl.reqd_work_group_size",
    ]);
    match rng.below(6) {
        0 => format!("nvvm.maxnreg = {} : {ty}", rng.pick(NUMBERS)),
        1 => format!(
            "rocdl.flat_work_group_size = \"{},{}\"",
            rng.pick(NUMBERS),
            rng.pick(NUMBERS)
        ),
        2 => format!(
            "spirv.entry_point_abi = #spirv.entry_point_abi<workgroup_size = [{}]>",
            values.join(", ")
        ),
        _ => format!("{name} = {array}"),
    }
}

/// One kernel given one more attribute (its own, or one of another target).
fn kernel_attribute(text: &str, rng: &mut Rng) -> (Vec<u8>, String) {
    let kernels: Vec<usize> = word_starts(text, "kernel")
        .into_iter()
        .filter(|&at| text[..at].trim_end().ends_with(')'))
        .collect();
    if kernels.is_empty() {
        return (text.as_bytes().to_vec(), "unchanged".into());
    }
    let at = *rng.pick(&kernels) + "kernel".len();
    let attribute = random_kernel_attribute(rng);
    let after = text[at..].trim_start();
    let (span, new) = if let Some(rest) = after.strip_prefix("attributes {") {
        let open = text.len() - rest.len();
        ((open, open), format!("{attribute}, "))
    } else {
        ((at, at), format!(" attributes {{{attribute}}}"))
    };
    (
        replace(text.as_bytes(), span, new.as_bytes()),
        format!("kernel at byte {at} given `{attribute}`"),
    )
}

/// The ops named in `text`: `dialect.op` words that follow `= ` or start a line.
fn op_names(text: &str) -> Vec<(usize, &str)> {
    let mut found = Vec::new();
    for (line_start, line) in text.lines().scan(0, |offset, line| {
        let start = *offset;
        *offset += line.len() + 1;
        Some((start, line))
    }) {
        let trimmed = line.trim_start();
        let op_start = match trimmed.find(" = ") {
            Some(eq) if trimmed.starts_with('%') => eq + 3,
            _ => 0,
        };
        let candidate = &trimmed[op_start..];
        let end = candidate
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '.'))
            .unwrap_or(candidate.len());
        let name = &candidate[..end];
        if name.contains('.') && name.chars().next().is_some_and(|c| c.is_ascii_lowercase()) {
            found.push((line_start + (line.len() - trimmed.len()) + op_start, name));
        }
    }
    found
}

/// Every op name the seeds use, for [`op_name`] to draw from.
static OP_NAMES: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();

/// Ops written the same way, so that one swapped for another still parses and reaches the
/// verifier and the lowerings (an `arith.addf` of integers, a `math.tanh` on every target).
const OP_GROUPS: &[&[&str]] = &[
    &[
        "arith.addf",
        "arith.subf",
        "arith.mulf",
        "arith.divf",
        "arith.remf",
        "arith.maximumf",
        "arith.minimumf",
        "arith.maxnumf",
        "arith.minnumf",
        "math.powf",
        "math.atan2",
        "math.copysign",
    ],
    &[
        "arith.addi",
        "arith.subi",
        "arith.muli",
        "arith.divsi",
        "arith.divui",
        "arith.remsi",
        "arith.remui",
        "arith.andi",
        "arith.ori",
        "arith.xori",
        "arith.shli",
        "arith.shrsi",
        "arith.shrui",
        "arith.maxsi",
        "arith.minsi",
        "arith.maxui",
        "arith.minui",
        "arith.ceildivsi",
        "arith.floordivsi",
        "index.add",
        "arith.mulhsi",
    ],
    &[
        "math.exp",
        "math.exp2",
        "math.expm1",
        "math.log",
        "math.log2",
        "math.log10",
        "math.log1p",
        "math.sqrt",
        "math.rsqrt",
        "math.sin",
        "math.cos",
        "math.tan",
        "math.tanh",
        "math.sinh",
        "math.cosh",
        "math.asin",
        "math.acos",
        "math.atan",
        "math.erf",
        "math.absf",
        "math.ceil",
        "math.floor",
        "math.round",
        "math.roundeven",
        "math.trunc",
        "math.cbrt",
        "arith.negf",
    ],
    &["math.absi", "math.ctlz", "math.cttz", "math.ctpop"],
    &[
        "gpu.thread_id",
        "gpu.block_id",
        "gpu.block_dim",
        "gpu.grid_dim",
        "gpu.cluster_id",
        "gpu.cluster_dim",
        "gpu.global_id",
        "gpu.cluster_block_id",
    ],
    &[
        "gpu.lane_id",
        "gpu.subgroup_id",
        "gpu.num_subgroups",
        "gpu.subgroup_size",
    ],
    &[
        "arith.extf",
        "arith.truncf",
        "arith.sitofp",
        "arith.uitofp",
        "arith.fptosi",
        "arith.fptoui",
        "arith.bitcast",
        "arith.extsi",
        "arith.extui",
        "arith.trunci",
        "arith.index_cast",
        "arith.index_castui",
    ],
    &[
        "gpu.barrier",
        "nvvm.barrier0",
        "rocdl.barrier",
        "gpu.return",
    ],
    &["memref.load", "memref.atomic_rmw", "vector.load"],
    &["gpu.alloc", "memref.alloc", "memref.alloca"],
];

/// One op swapped for another: mostly for one written the same way ([`OP_GROUPS`]), sometimes
/// for any op the seeds use (another arity, another syntax).
fn op_name(text: &str, rng: &mut Rng) -> (Vec<u8>, String) {
    let ops = op_names(text);
    let grouped: Vec<(usize, &str, &[&str])> = ops
        .iter()
        .filter_map(|&(at, name)| {
            let group = OP_GROUPS.iter().find(|group| group.contains(&name))?;
            Some((at, name, *group))
        })
        .collect();
    let known = OP_NAMES.get().map_or(&[][..], Vec::as_slice);
    let (at, old, new) = if !grouped.is_empty() && rng.below(4) > 0 {
        let (at, old, group) = *rng.pick(&grouped);
        (at, old, rng.pick(group).to_string())
    } else if !ops.is_empty() && !known.is_empty() {
        let (at, old) = *rng.pick(&ops);
        (at, old, rng.pick(known).clone())
    } else {
        return (text.as_bytes().to_vec(), "unchanged".into());
    };
    (
        replace(text.as_bytes(), (at, at + old.len()), new.as_bytes()),
        format!("op {old} at byte {at} became {new}"),
    )
}

/// The seeds: the sample's kernels, the tests' kernels and upstream's integration tests with
/// their kernels outlined, each as (file name, text).
fn seeds() -> Vec<(String, Vec<u8>)> {
    let base = workspace().join("sample-project");
    let mut seeds: Vec<(String, Vec<u8>)> = sample_project_kernels()
        .iter()
        .map(|k| (k.clone(), std::fs::read(base.join(k)).unwrap()))
        .collect();
    let tests = workspace().join("tests/kernels");
    let mut names: Vec<_> = std::fs::read_dir(&tests)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".mlir"))
        .collect();
    names.sort();
    for name in names {
        let text = std::fs::read(tests.join(&name)).unwrap();
        seeds.push((format!("kernels/tests_{name}"), text));
    }
    let corpus = Path::new(CORPUS);
    assert!(
        corpus.join("CUDA").is_dir(),
        "{CORPUS} is missing: run scripts/setup.sh (it unpacks MLIR's GPU integration tests)"
    );
    let scratch = tempfile::tempdir().unwrap();
    for program in programs(corpus) {
        let name = program.replace(['/', '-'], "_").replace(".mlir", "");
        let (outlined, _) = prepare(&corpus.join(&program), scratch.path(), &name);
        seeds.push((
            format!("kernels/upstream_{name}.mlir"),
            std::fs::read(outlined).unwrap(),
        ));
    }
    let mut ops: Vec<String> = seeds
        .iter()
        .flat_map(|(_, text)| {
            op_names(&String::from_utf8_lossy(text))
                .into_iter()
                .map(|(_, name)| name.to_string())
                .collect::<Vec<_>>()
        })
        .collect();
    ops.sort();
    ops.dedup();
    let _ = OP_NAMES.set(ops);
    seeds
}

/// The inputs of a run: each a seed kernel with one mutation, or two, and whether its host
/// objects are checked.
fn inputs(count: usize, seed: u64) -> Vec<(String, Vec<u8>, String, bool)> {
    let seeds = seeds();
    let mut rng = Rng(seed);
    (0..count)
        .map(|_| {
            let (name, mut text) = rng.pick(&seeds).clone();
            let mut steps = Vec::new();
            let mutations = if rng.below(4) == 0 { 2 } else { 1 };
            for _ in 0..mutations {
                if text.is_empty() {
                    break;
                }
                let (mutated, what) = mutate(text, &mut rng);
                text = mutated;
                steps.push(what);
            }
            let checked = rng.below(4) == 0;
            (name, text, steps.join("; "), checked)
        })
        .collect()
}

fn env_number(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(default)
}

/// Where inputs that crashed the compiler are kept for a closer look.
fn crash_dir() -> PathBuf {
    workspace().join("target/fuzz-crashes")
}

struct Finding {
    input: PathBuf,
    mutation: String,
    outcome: Outcome,
}

fn run_input(scratch: &Path, index: usize, seed_name: &str, text: &[u8], checked: bool) -> Outcome {
    let dir = scratch.join(format!("input-{index}"));
    let kernel = seed_name.to_string();
    std::fs::create_dir_all(dir.join("kernels")).unwrap();
    std::fs::write(dir.join(&kernel), text).unwrap();
    let out = dir.join("out");
    let outside = dir.join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    let outcome = ChildBuild::new(Job::EveryTarget, &dir, &[kernel], &out, &outside)
        .env(CHECKED, if checked { "1" } else { "0" })
        .run(INPUT_LIMIT);
    if !outcome.succeeded() {
        assert!(
            !out.join(gpu_manifest::MANIFEST_PATH).exists(),
            "input {index}: a failed build left a manifest"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
    outcome
}

#[test]
fn mutated_kernels_never_crash_the_compiler() {
    let count = env_number("GPU_BUILD_FUZZ_INPUTS", DEFAULT_INPUTS as u64) as usize;
    let seed = env_number("GPU_BUILD_FUZZ_SEED", DEFAULT_SEED);
    let inputs = inputs(count, seed);
    let scratch = tempfile::tempdir().unwrap();
    let next = AtomicUsize::new(0);
    let compiled = AtomicUsize::new(0);
    let rejected = AtomicUsize::new(0);
    let findings = Mutex::new(Vec::new());
    // Per target family: how many inputs it compiled.
    let per_target = Mutex::new(std::collections::BTreeMap::<String, usize>::new());
    // GPU_BUILD_FUZZ_LOG=FILE: each input's mutation and the errors it got, to see what the
    // mutations reach.
    let log = std::env::var_os("GPU_BUILD_FUZZ_LOG")
        .map(|path| Mutex::new(std::fs::File::create(path).expect("the fuzz log can be written")));
    let started = Instant::now();
    let workers = std::thread::available_parallelism()
        .map_or(2, |n| n.get())
        .min(4);
    std::thread::scope(|scope| {
        for _ in 0..workers {
            scope.spawn(|| loop {
                let index = next.fetch_add(1, Ordering::Relaxed);
                let Some((name, text, mutation, checked)) = inputs.get(index) else {
                    break;
                };
                let outcome = run_input(scratch.path(), index, name, text, *checked);
                if let Some(log) = &log {
                    let errors: Vec<&str> = outcome
                        .stderr
                        .lines()
                        .filter(|line| line.starts_with("gpu-build child: error: "))
                        .map(|line| &line[..line.len().min(300)])
                        .collect();
                    let entry = format!("{index} {name}: {mutation}\n  {}\n", errors.join("\n  "));
                    let _ = std::io::Write::write_all(&mut *log.lock().unwrap(), entry.as_bytes());
                }
                let families = outcome
                    .stderr
                    .lines()
                    .find_map(|line| line.strip_prefix("gpu-build child: compiled for ["))
                    .map(|list| list.trim_end_matches(']').to_string());
                for family in families.iter().flat_map(|list| list.split(", ")) {
                    if !family.is_empty() {
                        *per_target
                            .lock()
                            .unwrap()
                            .entry(family.to_string())
                            .or_default() += 1;
                    }
                }
                if outcome.succeeded() {
                    compiled.fetch_add(1, Ordering::Relaxed);
                } else if outcome.failed_cleanly() {
                    rejected.fetch_add(1, Ordering::Relaxed);
                } else {
                    // A crash, or an input only LLVM's fatal-error handler caught: both need a
                    // check that gives a real diagnostic.
                    std::fs::create_dir_all(crash_dir()).unwrap();
                    let input = crash_dir().join(format!("seed{seed}-input{index}.mlir"));
                    std::fs::write(&input, text).unwrap();
                    findings.lock().unwrap().push(Finding {
                        input,
                        mutation: format!(
                            "{name}: {mutation}{}",
                            if *checked { " (host checked)" } else { "" }
                        ),
                        outcome,
                    });
                }
            });
        }
    });
    let findings = findings.into_inner().unwrap();
    let per_target: Vec<String> = per_target
        .into_inner()
        .unwrap()
        .iter()
        .map(|(family, n)| format!("{family} {n}"))
        .collect();
    eprintln!(
        "fuzz: {count} inputs (seed {seed}) in {:.1?}: {} compiled for every target family, {} \
         rejected with an error by one or more; compiled per family: {}; {} stopped by LLVM's \
         fatal-error handler, {} crashed",
        started.elapsed(),
        compiled.into_inner(),
        rejected.into_inner(),
        per_target.join(", "),
        findings
            .iter()
            .filter(|f| f.outcome.stopped_by_llvm())
            .count(),
        findings.iter().filter(|f| f.outcome.crashed()).count(),
    );
    let report: Vec<String> = findings
        .iter()
        .map(|f| {
            let tail: String = f
                .outcome
                .stderr
                .chars()
                .rev()
                .take(600)
                .collect::<Vec<_>>()
                .into_iter()
                .rev()
                .collect();
            format!(
                "{} ({}): status {:?}, timed out {}:\n{tail}",
                f.input.display(),
                f.mutation,
                f.outcome.status,
                f.outcome.timed_out
            )
        })
        .collect();
    assert!(
        findings.is_empty(),
        "{} inputs crashed the compiler or reached LLVM's fatal-error handler:\n{}",
        findings.len(),
        report.join("\n\n")
    );
}
