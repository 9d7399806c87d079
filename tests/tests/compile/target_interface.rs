//! The target interface stays narrow: what a target only states is data in its `Description`,
//! and `Target` with its backends' traits (`LlvmTarget`, `MlirSerializer`) has at most ten
//! methods, each one code only the target can run (MLIR's `TargetAttrInterface` has two,
//! `SerializeGPUModuleBase` adds its hooks).

use crate::common::workspace;

/// The traits a target implements.
const TRAITS: &[&str] = &["Target", "LlvmTarget", "MlirSerializer"];
const MOST_METHODS: usize = 10;

/// The methods of `trait name` in `source`: each `fn` one indent in, up to the trait's `}`.
fn methods(source: &str, name: &str) -> Vec<String> {
    let header = format!("pub(crate) trait {name}: Sync {{");
    let Some(start) = source.find(&header) else {
        panic!("interface.rs has no `{header}`");
    };
    source[start + header.len()..]
        .lines()
        .take_while(|line| *line != "}")
        .filter_map(|line| line.strip_prefix("    fn "))
        .map(|rest| {
            rest.split(['(', '<'])
                .next()
                .unwrap_or_default()
                .to_string()
        })
        .collect()
}

fn interface() -> String {
    std::fs::read_to_string(workspace().join("gpu-build/src/targets/interface.rs")).unwrap()
}

#[test]
fn target_and_its_backend_traits_have_at_most_ten_methods() {
    let source = interface();
    let all: Vec<String> = TRAITS
        .iter()
        .flat_map(|name| {
            let found = methods(&source, name);
            assert!(!found.is_empty(), "found no method of `{name}`");
            found
                .into_iter()
                .map(move |method| format!("{name}::{method}"))
        })
        .collect();
    assert!(
        all.len() <= MOST_METHODS,
        "{} methods, at most {MOST_METHODS}: {}; make what a target only states data in its \
         Description (or its LlvmBackend)",
        all.len(),
        all.join(", ")
    );
}

#[test]
fn the_count_reads_every_method_and_fails_past_the_limit() {
    let seeded = "pub(crate) trait Target: Sync {\n    /// Doc.\n    fn a(&self) -> u8;\n    \
                  fn b<'a>(&self, x: &'a str) {}\n    fn c(\n        &self,\n    );\n}\n\
                  fn outside() {}\n";
    assert_eq!(methods(seeded, "Target"), ["a", "b", "c"]);
    let counted: usize = TRAITS
        .iter()
        .map(|name| methods(&interface(), name).len())
        .sum();
    assert!(counted > 3, "the real interface reads as {counted} methods");
}
