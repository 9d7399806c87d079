#!/usr/bin/env bash
# A new user's first build, measured: the guide's getting-started crate (every block of
# docs/guide/01-getting-started.md whose first line is `// file: PATH` or `# file: PATH`), made in
# a new folder outside this workspace with gpu-embed and gpu-build from this checkout, built once
# with an empty target folder and nothing set in the environment (what scripts/setup.sh records
# in cargo's configuration is all it has). Prints the wall time and the size of `target/`:
#
#   scripts/first-build.sh [RUNS]     # default 1 run; each starts from nothing
#
# Registry crates come from cargo's download cache (the workspace's Cargo.lock pins them), so the
# time is compiling and linking, not downloading.
set -euo pipefail
cd "$(dirname "$0")/.."
workspace=$PWD
runs=${1:-1}
for run in $(seq "$runs"); do
  crate=$(mktemp -d /tmp/first-build.XXXXXX)
  python3 - "$workspace" "$crate" <<'PYTHON'
import pathlib, re, sys
workspace, crate = map(pathlib.Path, sys.argv[1:])
chapter = (workspace / "docs/guide/01-getting-started.md").read_text()
for block in re.findall(r"^```[^\n]*\n(.*?)^```", chapter, re.S | re.M):
    first, _, body = block.partition("\n")
    name = re.match(r"(?://|#) file: (\S+)$", first)
    if not name:
        continue
    path = crate / name.group(1)
    if name.group(1) == "Cargo.toml":
        body = body.replace('gpu-embed = "0.1"', f'gpu-embed = {{ path = "{workspace}/gpu-embed" }}')
        body = body.replace('gpu-build = "0.1"', f'gpu-build = {{ path = "{workspace}/gpu-build" }}')
        body += "\n[workspace]\n"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(body)
PYTHON
  cp Cargo.lock "$crate/"
  start=$(date +%s%N)
  (cd "$crate" && env -u LLVM_SYS_221_PREFIX -u MLIR_SYS_220_PREFIX -u TABLEGEN_220_PREFIX -u MLIR_SYS_LINK_SHARED \
     CARGO_TARGET_DIR="$crate/target" cargo build --quiet)
  end=$(date +%s%N)
  size=$(du -sm "$crate/target" | cut -f1)
  tenths=$(( (end - start) / 100000000 ))
  printf 'run %s: first build %d.%d s, target/ %s MB\n' "$run" $((tenths / 10)) $((tenths % 10)) "$size"
  [ -n "${FIRST_BUILD_KEEP:-}" ] && echo "kept: $crate" || rm -rf "$crate"
done
