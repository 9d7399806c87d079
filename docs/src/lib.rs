//! The README and the user guide (`docs/guide/`), each included here as the documentation of a
//! module, so that `cargo test -p gpu-guide` compiles every Rust code block in them as a doc
//! test and runs it (on the host device here; on a GPU where there is one). `build.rs` blocks
//! are compiled, not run (`no_run`). The kernel files the examples embed are in `kernels/`, and
//! the calls below make the build script compile them for every target the examples name.
#![doc = include_str!("../../README.md")]

macro_rules! chapters {
    ($($name:ident = $file:literal),* $(,)?) => {
        $(
            #[doc = include_str!($file)]
            pub mod $name {}
        )*
    };
}

chapters! {
    getting_started = "../guide/01-getting-started.md",
    kernels = "../guide/02-kernels.md",
    building = "../guide/03-building.md",
    targets = "../guide/04-targets.md",
    runtime = "../guide/05-runtime.md",
    host_target = "../guide/06-host-target.md",
    programs = "../guide/07-programs.md",
    shipping = "../guide/08-shipping.md",
    cli = "../guide/09-cli.md",
    troubleshooting = "../guide/10-troubleshooting.md",
    contributing = "../../CONTRIBUTING.md",
}

/// The kernels the examples embed, compiled by the build script for the targets they name.
#[allow(dead_code)]
mod examples {
    gpu_embed::include_gpu_binary!("kernels/vadd.mlir", targets = [nvptx, amdgpu, host]);
    gpu_embed::include_gpu_binary!("kernels/reduce.mlir", targets = [nvptx, amdgpu, host]);
    gpu_embed::include_gpu_binary!("kernels/matmul.mlir", targets = [nvptx, amdgpu, host]);
    gpu_embed::include_gpu_binary!("kernels/two_modules.mlir", targets = [nvptx, amdgpu, host]);
    gpu_embed::include_gpu_binary!("kernels/memrefs.mlir", targets = [nvptx, amdgpu, host]);
}
