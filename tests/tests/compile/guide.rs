//! Every MLIR code block of the README, the guide (`docs/guide/`) and CONTRIBUTING.md compiles:
//! for the targets its `gpu.module`s name in their attributes, and for the host too; a block
//! that names none, for NVIDIA, AMD and the host (what `targets = [nvptx, amdgpu, host]` builds).
//! The Rust blocks are the `gpu-guide` crate's doc tests.

use crate::common::*;
use gpu_build::Vendor;

/// The documents whose code blocks are tested.
fn documents() -> Vec<std::path::PathBuf> {
    let root = workspace();
    let mut documents = vec![root.join("README.md"), root.join("CONTRIBUTING.md")];
    let mut chapters: Vec<_> = std::fs::read_dir(root.join("docs/guide"))
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|e| e == "md"))
        .collect();
    chapters.sort();
    documents.extend(chapters);
    documents
}

/// The blocks fenced as `lang` in `text`, with the line each starts on.
fn blocks(text: &str, lang: &str) -> Vec<(usize, String)> {
    fenced_blocks(text)
        .into_iter()
        .filter(|block| block.info.split(',').next() == Some(lang))
        .map(|block| (block.line, block.body.join("\n") + "\n"))
        .collect()
}

/// The vendors a block's target attributes name, in `Vendor::ALL` order.
fn named_vendors(block: &str) -> Vec<Vendor> {
    [
        ("#nvvm.target", Vendor::Nvptx),
        ("#rocdl.target", Vendor::Amdgpu),
    ]
    .into_iter()
    .filter(|(attribute, _)| block.contains(attribute))
    .map(|(_, vendor)| vendor)
    .collect()
}

#[test]
fn every_mlir_block_of_the_guide_compiles_for_the_targets_it_names() {
    let mut compiled = 0;
    for document in documents() {
        let text = std::fs::read_to_string(&document).unwrap();
        for (line, block) in blocks(&text, "mlir") {
            let mut vendors = named_vendors(&block);
            if vendors.is_empty() {
                vendors = vec![Vendor::Nvptx, Vendor::Amdgpu];
            }
            vendors.push(Vendor::Host);
            let where_ = format!("{}:{line}", document.display());
            let out = tempfile::tempdir().unwrap();
            let kernel = out.path().join("block.mlir");
            std::fs::write(&kernel, &block).unwrap();
            let mut build = build_in(&out.path().join("out"));
            build.kernel(&kernel);
            for vendor in &vendors {
                build.target(*vendor, &[]);
            }
            let report = build
                .compile()
                .unwrap_or_else(|error| panic!("{where_}: the block does not compile:\n{error}"));
            for vendor in &vendors {
                assert!(
                    !objects_of(&report, *vendor).is_empty(),
                    "{where_}: no {vendor} object"
                );
            }
            compiled += 1;
        }
    }
    println!("{compiled} MLIR blocks compiled");
    assert!(compiled >= 3, "{compiled}");
}

#[test]
fn a_broken_mlir_block_fails_the_check() {
    // The check above is only worth something if a block that does not compile fails it.
    let text = "```mlir\ngpu.module @m {\n  gpu.func @k() kernel {\n    %x = arith.addi %y, %y : i32\n    gpu.return\n  }\n}\n```\n";
    let (_, block) = blocks(text, "mlir").remove(0);
    let error = compile_error("block.mlir", block.as_bytes(), |b| {
        b.target(Vendor::Host, &[]);
    });
    assert!(
        error
            .to_string()
            .contains("block.mlir:3:21: error: use of undeclared SSA value"),
        "{error}"
    );
}
