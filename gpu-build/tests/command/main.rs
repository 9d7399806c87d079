//! The `gpu-build` command's tests, in one binary: `compile`, `inspect`, `prebuild` and `cache`
//! (cli.rs), and `run` on MLIR programs, ours and upstream's (run.rs).

mod cli;
mod run;
