#!/usr/bin/env bash
# Installs what building and testing this workspace needs on Debian 12, skipping what is there:
# LLVM/MLIR 22 (headers, static libraries, tools), lld, the ROCm device libraries, and NVIDIA's
# CUDA compiler wheel from PyPI (ptxas + libdevice). Safe to run again.
set -euo pipefail

packages=(llvm-22-dev libmlir-22-dev mlir-22-tools lld-22 libpolly-22-dev libclang-22-dev clang-22
          rocm-device-libs libamdhip64-5 zlib1g-dev libzstd-dev libxml2-dev libffi-dev python3-pip)
missing=()
for package in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}" >&2
  sudo_cmd=""
  [ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq "${missing[@]}" >/dev/null
fi

python=python3
if ! "$python" -c 'import importlib.util, sys; sys.exit(importlib.util.find_spec("nvidia.cuda_nvcc") is None)' 2>/dev/null; then
  echo "setup: installing nvidia-cuda-nvcc-cu12 (ptxas, libdevice) from PyPI" >&2
  "$python" -m pip install --quiet --disable-pip-version-check nvidia-cuda-nvcc-cu12 ||
    "$python" -m pip install --quiet --disable-pip-version-check --break-system-packages nvidia-cuda-nvcc-cu12
fi
