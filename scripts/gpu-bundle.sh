#!/usr/bin/env bash
# Builds, here, every binary that exercises a GPU path, into one folder that runs on a bare GPU
# machine (a driver, nvcc and compute-sanitizer; no Rust toolchain, no registry, 15 minutes):
#
#   scripts/gpu-bundle.sh [OUT]          # default OUT: target/gpu-bundle; prints its size
#   OUT/run.sh                           # there: every check, a line each, then "N passed, N failed"
#
# In the bundle: the GPU tests (their #[ignore]d tests, and their host tests), the sample and its
# `streams` example, the launch-overhead and overlap benchmarks, stripped; and the shared libraries
# they link beyond a base system (BASE_LIBRARIES below; checked with ldd). GPU drivers (libcuda,
# libamdhip64, libvulkan) are opened at run time and are the machine's own. Left out: `gpu-build
# run`'s programs (tests/run.rs) need LLVM and MLIR at run time, which a bare GPU machine lacks.
#
# GPU_BUNDLE_PROFILE=dev builds with the test profile instead of release (what the test of this
# script uses, reusing `cargo test`'s build).
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-target/gpu-bundle}
profile=${GPU_BUNDLE_PROFILE:-release}
limit_mib=48

# Libraries every Linux machine that runs a GPU driver has (glibc, the C++ runtime GPU drivers
# themselves link); anything else a binary links is copied into the bundle.
BASE_LIBRARIES="linux-vdso.so.1 ld-linux-x86-64.so.2 ld-linux-aarch64.so.1 libc.so.6 libm.so.6
  libpthread.so.0 libdl.so.2 librt.so.1 libgcc_s.so.1 libstdc++.so.6"

# Checks: a test binary (a test target of the workspace), the module of it that runs, and what
# it checks on a GPU. Each crate keeps its integration tests in one binary, a module per concern.
TESTS=(
  "sample gpu launches: every sample kernel, every argument kind, checked against Rust"
  "embed device device facts, fills, copies, slices, memrefs of rank 0-3 through stubs"
  "embed contexts one context per device across threads"
  "runtime host_semantics memrefs of every rank and layout on the GPU"
  "runtime kernel_handles kernels by name, module selection by chip"
  "runtime device_lookup device discovery and the default device"
  "runtime graphs CUDA/HIP graphs captured and replayed"
  "runtime peers_and_managed peer copies, managed memory"
)

rm -rf "$out"
mkdir -p "$out/bin" "$out/lib"

cargo_args=(--message-format=json)
[ "$profile" = release ] && cargo_args+=(--release)
executables() { python3 -c '
import json, sys
for line in sys.stdin:
    try:
        message = json.loads(line)
    except ValueError:
        continue
    if message.get("reason") == "compiler-artifact" and message.get("executable"):
        kinds = message["target"]["kind"]
        print(message["target"]["name"], kinds[0], message["executable"])
'; }

# With --workspace, as `cargo test --workspace` builds them: the same features, so a bundle
# after the test suite (the dev profile) rebuilds nothing.
artifacts=$(mktemp)
tests=()
for binary in $(printf '%s\n' "${TESTS[@]}" | cut -d' ' -f1 | sort -u); do
  tests+=(--test "$binary")
done
cargo test "${cargo_args[@]}" --no-run --workspace "${tests[@]}" | executables >>"$artifacts"
cargo build "${cargo_args[@]}" --workspace --bin sample-project --example streams \
  --bench launch_overhead --bench overlap | executables >>"$artifacts"

while read -r name kind path; do
  case "$kind" in
    bench) target="$out/bin/bench-$name" ;;
    example) target="$out/bin/example-$name" ;;
    bin) target="$out/bin/$name" ;;
    *) target="$out/bin/test-$name" ;;
  esac
  strip -o "$target" "$path"
  chmod +x "$target"
done < <(sort -u "$artifacts")
rm -f "$artifacts"

# Shared libraries beyond the base system.
for binary in "$out"/bin/*; do
  # `name => path (address)`, or `path (address)` for the loader and the vDSO.
  ldd "$binary" | awk '/=>/ {print $1, $3; next} {n = split($1, p, "/"); print p[n], ""}' |
    while read -r soname path; do
      if ! grep -qw -- "$soname" <<<"$BASE_LIBRARIES"; then
        if [ -z "$path" ] || [ ! -f "$path" ]; then
          echo "gpu-bundle: $binary needs $soname, which is not on this machine" >&2
          exit 1
        fi
        cp -L "$path" "$out/lib/"
      fi
    done
done

printf '%s\n' "${TESTS[@]}" >"$out/checks.txt"
cp scripts/gpu-bundle-run.sh "$out/run.sh"
chmod +x "$out/run.sh"

bytes=$(du -sb "$out" | cut -f1)
mib=$(((bytes + 1048575) / 1048576))
echo "gpu-bundle: $out: $(ls "$out/bin" | wc -l) binaries, $(ls "$out/lib" | wc -l) libraries, ${mib} MiB (limit ${limit_mib} MiB)"
if [ "$mib" -gt "$limit_mib" ]; then
  echo "gpu-bundle: over the ${limit_mib} MiB a device lease carries" >&2
  exit 1
fi
