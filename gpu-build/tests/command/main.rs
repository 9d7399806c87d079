//! The `gpu-build` command's tests, in one binary: `compile`, `inspect`, `prebuild` and `cache`
//! (cli.rs), `run` on MLIR programs, ours and upstream's (run.rs), `run --device all` comparing
//! devices (every_device.rs), `run --device cuda|hip` against the CUDA and HIP driver double
//! (on_the_double.rs), and `run --check` on seeded bugs and correct programs (check.rs).

mod check;
mod cli;
mod every_device;
mod on_the_double;
mod run;
