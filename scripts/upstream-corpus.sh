#!/usr/bin/env bash
# Compile MLIR 22's own GPU integration tests (llvm-project mlir/test/Integration/GPU, the
# CUDA, ROCM, SYCL and SPIRV folders: 45 programs) with our compiler for every target and with
# upstream mlir-opt-22's own pipelines, and print one line per program and a total per target.
#
#   scripts/upstream-corpus.sh [INTEGRATION_GPU_DIR]
#
# The tests come from Debian's source of the LLVM release we link (scripts/setup.sh unpacks
# them into /opt/gpu-build/mlir-integration-tests). Each program is prepared as its RUN lines
# do before lowering: the transform dialect schedule applied where it has one, then kernels
# outlined into gpu.modules. Needs the CLI: cargo build -p gpu-build --features cli.
set -uo pipefail

corpus=${1:-/opt/gpu-build/mlir-integration-tests/GPU}
root=$(cd "$(dirname "$0")/.." && pwd)
gpu_build=${GPU_BUILD:-$root/target/debug/gpu-build}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
[ -x "$gpu_build" ] || { echo "no $gpu_build: run cargo build -p gpu-build --features cli" >&2; exit 2; }

# ok | fail | CRASH (killed by a signal: what must never happen)
verdict() {
  local rc=$1
  if [ "$rc" -eq 0 ]; then echo ok; elif [ "$rc" -gt 128 ]; then echo CRASH; else echo fail; fi
}

declare -A total
printf '%-62s %-6s %-6s %-6s | %-6s %-6s\n' program nvptx amdgpu host up:nv up:amd
for file in $(cd "$corpus" && find CUDA ROCM SYCL SPIRV -name '*.mlir' | sort); do
  name=${file//\//_}
  prepared=$work/$name
  source=$corpus/$file
  if grep -q "transform.named_sequence" "$source"; then
    mlir-opt-22 "$source" -transform-interpreter -test-transform-dialect-erase-schedule \
      -o "$work/scheduled.mlir" 2>/dev/null || cp "$source" "$work/scheduled.mlir"
    source=$work/scheduled.mlir
  fi
  if ! mlir-opt-22 "$source" -gpu-kernel-outlining -o "$prepared" 2>"$work/prepare.err"; then
    printf '%-62s not parsed by mlir-opt-22: %s\n' "$file" "$(head -1 "$work/prepare.err")"
    continue
  fi
  chip=sm_80
  case $file in CUDA/sm90/*) chip=sm_90a ;; CUDA/TensorCore/wmma-*) chip=sm_80 ;; esac

  results=()
  for target in "nvptx:$chip" amdgpu:gfx90a host; do
    timeout 300 "$gpu_build" compile "$prepared" -t "$target" -o "$work/out" --no-cache \
      >"$work/ours.log" 2>&1
    v=$(verdict $?)
    results+=("$v")
    total[${target%%:*}:$v]=$((${total[${target%%:*}:$v]:-0} + 1))
    if [ "$v" != ok ] && [ -n "${VERBOSE:-}" ]; then
      grep -m1 -E "error" "$work/ours.log" | cut -c1-200 | sed "s|^|    ${target%%:*}: |"
    fi
    rm -rf "$work/out"
  done
  # Upstream's NVVM pipeline outlines kernels itself, after converting nvgpu ops and types on
  # the whole program (which kernel arguments of nvgpu types need), so it gets the program.
  timeout 300 mlir-opt-22 "$source" \
    --gpu-lower-to-nvvm-pipeline="cubin-chip=$chip cubin-features=+ptx80 cubin-format=isa" -o /dev/null 2>/dev/null
  v=$(verdict $?); results+=("$v"); total[upstream-nvptx:$v]=$((${total[upstream-nvptx:$v]:-0} + 1))
  timeout 300 mlir-opt-22 "$prepared" --pass-pipeline="builtin.module(rocdl-attach-target{chip=gfx90a},gpu.module(strip-debuginfo,convert-vector-to-scf,convert-scf-to-cf,convert-gpu-to-rocdl{runtime=HIP}),gpu-module-to-binary{format=isa})" \
    -o /dev/null 2>/dev/null
  v=$(verdict $?); results+=("$v"); total[upstream-amdgpu:$v]=$((${total[upstream-amdgpu:$v]:-0} + 1))
  printf '%-62s %-6s %-6s %-6s | %-6s %-6s\n' "$file" "${results[@]}"
done

echo
for target in nvptx amdgpu host upstream-nvptx upstream-amdgpu; do
  printf '%-16s ok %3d  fail %3d  crash %3d\n' "$target" "${total[$target:ok]:-0}" \
    "${total[$target:fail]:-0}" "${total[$target:CRASH]:-0}"
done
