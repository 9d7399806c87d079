//! The `gpu-build` command's tests, in one binary: `compile`, `inspect`, `prebuild` and `cache`
//! (cli.rs), `run` on MLIR programs, ours and upstream's (run.rs), `run --device all` comparing
//! devices (every_device.rs), and `run --check` on seeded bugs and correct programs (check.rs).

mod check;
mod cli;
mod every_device;
mod run;
