//! Bounded fuzzing of the front end and the whole pipeline. Inputs are mutations of the sample
//! kernels (byte flips, truncations, token swaps and copies, deleted or repeated lines, numbers
//! and element types changed, target attributes with values out of range, random chips,
//! features, flags and names), each compiled
//! for NVPTX, AMDGPU and the host in a child process with a time limit, so an abort, a crash, a
//! panic or a hang is caught and reported with the input that caused it.
//!
//! `cargo test` runs 200 inputs; more, with another seed:
//! `GPU_BUILD_FUZZ_INPUTS=2000 GPU_BUILD_FUZZ_SEED=7 cargo test -p gpu-tests --test compile fuzz -- --nocapture`

use crate::child::{sample_project_kernels, ChildBuild, Job, Outcome};
use crate::common::*;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

const DEFAULT_INPUTS: usize = 200;
const DEFAULT_SEED: u64 = 0x5eed_2026;
/// Far above any honest compile of these kernels (well under a second); beyond it, a hang.
const INPUT_LIMIT: Duration = Duration::from_secs(60);

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
    match rng.below(12) {
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

/// The inputs of a run: each a seed kernel with one mutation, or two.
fn inputs(count: usize, seed: u64) -> Vec<(String, Vec<u8>, String)> {
    let kernels = sample_project_kernels();
    let base = workspace().join("sample-project");
    let seeds: Vec<(String, Vec<u8>)> = kernels
        .iter()
        .map(|k| (k.clone(), std::fs::read(base.join(k)).unwrap()))
        .collect();
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
            (name, text, steps.join("; "))
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

fn run_input(scratch: &Path, index: usize, seed_name: &str, text: &[u8]) -> Outcome {
    let dir = scratch.join(format!("input-{index}"));
    let kernel = seed_name.to_string();
    std::fs::create_dir_all(dir.join("kernels")).unwrap();
    std::fs::write(dir.join(&kernel), text).unwrap();
    let out = dir.join("out");
    let outside = dir.join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    let outcome =
        ChildBuild::new(Job::OwnTargets, &dir, &[kernel], &out, &outside).run(INPUT_LIMIT);
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
    let started = Instant::now();
    let workers = std::thread::available_parallelism()
        .map_or(2, |n| n.get())
        .min(4);
    std::thread::scope(|scope| {
        for _ in 0..workers {
            scope.spawn(|| loop {
                let index = next.fetch_add(1, Ordering::Relaxed);
                let Some((name, text, mutation)) = inputs.get(index) else {
                    break;
                };
                let outcome = run_input(scratch.path(), index, name, text);
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
                        mutation: format!("{name}: {mutation}"),
                        outcome,
                    });
                }
            });
        }
    });
    let findings = findings.into_inner().unwrap();
    eprintln!(
        "fuzz: {count} inputs (seed {seed}) in {:.1?}: {} compiled, {} rejected with an error, \
         {} stopped by LLVM's fatal-error handler, {} crashed",
        started.elapsed(),
        compiled.into_inner(),
        rejected.into_inner(),
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
