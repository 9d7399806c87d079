#!/usr/bin/env bash
# On a machine with an NVIDIA or AMD GPU, its driver and a Rust toolchain (a bare GPU machine gets
# scripts/gpu-bundle.sh's bundle instead): build, run every GPU test and the sample
# project, measure launch overhead, and print a summary. Exits non-zero if anything failed.
set -uo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
log=$(mktemp)
status=0
cargo test -p sample-project --test sample gpu:: -- --ignored --nocapture 2>&1 | tee "$log" || status=1
# Device facts, fills and slices; memrefs of rank 0 to 3, strided and offset views, through the
# generated stubs.
cargo test -p gpu-embed --test embed device:: -- --ignored --nocapture 2>&1 | tee -a "$log" || status=1
cargo test -p gpu-embed --test embed contexts:: -- --ignored --nocapture 2>&1 | tee -a "$log" || status=1
cargo test -p gpu-tests --test runtime host_semantics:: -- --ignored --nocapture 2>&1 | tee -a "$log" || status=1
cargo test -p gpu-tests --test runtime kernel_handles:: -- --ignored --nocapture 2>&1 | tee -a "$log" || status=1
cargo test -p gpu-tests --test runtime device_lookup:: -- --ignored --nocapture 2>&1 | tee -a "$log" || status=1
cargo test -p gpu-tests --test runtime graphs:: -- --ignored --nocapture 2>&1 | tee -a "$log" || status=1
cargo test -p gpu-tests --test runtime peers_and_managed:: -- --ignored --nocapture 2>&1 | tee -a "$log" || status=1
# MLIR's GPU integration tests and ours as whole programs (`gpu-build run`) on the GPU.
cargo test -p gpu-build --features cli --test command run:: -- --ignored --nocapture 2>&1 | tee -a "$log" || status=1
cargo run -p sample-project || status=1
cargo run -p sample-project --example streams || status=1
cargo bench -p sample-project --bench launch_overhead || status=1
# Copies overlapped with kernels over two streams vs the same work on one.
cargo bench -p sample-project --bench overlap || status=1
echo
echo "== GPU test summary"
grep -E "^test result:|^test .* (ok|FAILED)$" "$log"
[ "$status" -eq 0 ] && echo "all GPU checks passed" || echo "some GPU checks FAILED"
exit "$status"
