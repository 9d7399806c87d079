#!/usr/bin/env bash
# Installs what building and testing this workspace needs on Debian 12, skipping what is there:
# LLVM/MLIR 22 (headers, libraries, tools), lld (the program and its libraries), the ROCm device
# libraries, Debian's HIP runtime and headers, Mesa's lavapipe (a Vulkan driver on the CPU), the
# Vulkan loader, the Khronos validation layer and spirv-val (the Vulkan target's tests), glslang
# (benches/spirv_vs_vendor.rs compiles its GLSL peers with it), PoCL and
# the OpenCL ICD loader (the host target's peer in benches/host_vs_peers.rs), Oclgrind (the checked
# host run's peer in benches/checked_vs_oclgrind.rs, which points the loader at its ICD library),
# Intel's CPU Runtime for OpenCL from PyPI (the OpenCL driver's tests: it runs the opencl target's
# SPIR-V on any x86-64 CPU) with Debian's OpenCL headers (the OpenCL bindings), the stores the
# shared-cache tests start on loopback (redis-server, nginx with its WebDAV modules, moto's S3
# server from PyPI), the Level Zero loader and headers (Intel GPUs: bindings and discovery),
# NVIDIA's CUDA compiler wheel from PyPI (ptxas + libdevice) and CUDA runtime wheel (cuda.h), and
# the ROCm 6 HIP headers and runtime from Debian unstable, unpacked (not installed) under
# /opt/gpu-build/hip6 for the driver-binding tests, and MLIR's GPU integration tests from Debian's
# LLVM source; and records where LLVM 22 is in cargo's configuration. Safe to run again.
set -euo pipefail

packages=(llvm-22-dev llvm-22-tools libmlir-22-dev mlir-22-tools lld-22 liblld-22-dev libpolly-22-dev libclang-22-dev clang-22
          rocm-device-libs libamdhip64-5 libamdhip64-dev zlib1g-dev libzstd-dev libxml2-dev libffi-dev python3-pip
          valgrind mesa-vulkan-drivers libvulkan1 vulkan-validationlayers spirv-tools glslang-tools
          pocl-opencl-icd ocl-icd-libopencl1 opencl-c-headers oclgrind
          redis-server nginx libnginx-mod-http-dav-ext
          libze1 libze-dev)
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

# Where LLVM 22 is, for its bindings (llvm-sys, mlir-sys, tblgen): without these variables
# mlir-sys and tblgen run the first `llvm-config` on PATH, Debian's default LLVM (14), and fail.
# Recorded in cargo's own configuration ([env] of $CARGO_HOME/config.toml), so every crate this
# user builds with gpu-build, in this workspace or not, finds LLVM 22 with nothing set by hand.
# The names carry the LLVM version: other LLVM versions' bindings are not affected. And
# MLIR_SYS_LINK_SHARED=1: mlir-sys links MLIR over LLVM's shared library, which llvm-sys links
# (see gpu-build/build.rs: binaries of ~100 MB instead of ~300 MB). Values a user set there already
# are kept.
python3 - "${CARGO_HOME:-$HOME/.cargo}/config.toml" <<'PYTHON'
import pathlib, sys, tomllib
path = pathlib.Path(sys.argv[1])
prefix = "/usr/lib/llvm-22"
wanted = {name: prefix for name in ("LLVM_SYS_221_PREFIX", "MLIR_SYS_220_PREFIX", "TABLEGEN_220_PREFIX")}
wanted["MLIR_SYS_LINK_SHARED"] = "1"
text = path.read_text() if path.exists() else ""
config = tomllib.loads(text)
missing = {name: value for name, value in wanted.items() if name not in config.get("env", {})}
if missing:
    entries = "".join(f'{name} = "{value}"\n' for name, value in missing.items())
    lines = text.splitlines(keepends=True)
    if "[env]\n" in lines:
        at = lines.index("[env]\n") + 1
        text = "".join(lines[:at]) + entries + "".join(lines[at:])
    else:
        separator = "" if not text or text.endswith("\n\n") else ("\n" if text.endswith("\n") else "\n\n")
        text += separator + "# Where LLVM 22 is, for gpu-build's LLVM and MLIR bindings (gpu-build's scripts/setup.sh).\n[env]\n" + entries
    try:
        tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        sys.exit(f"setup: cannot add LLVM 22's prefix to {path} ({error}); add to its [env] table:\n{entries}")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    print(f"setup: recorded where LLVM 22 is, and how to link it, for cargo in {path} ({', '.join(missing)})", file=sys.stderr)
PYTHON

python=python3
pip_install() {
  "$python" -m pip install --quiet --disable-pip-version-check "$1" ||
    "$python" -m pip install --quiet --disable-pip-version-check --break-system-packages "$1"
}
if ! "$python" -c 'import importlib.util, sys; sys.exit(importlib.util.find_spec("nvidia.cuda_nvcc") is None)' 2>/dev/null; then
  echo "setup: installing nvidia-cuda-nvcc-cu12 (ptxas, libdevice) from PyPI" >&2
  pip_install nvidia-cuda-nvcc-cu12
fi
# An S3-compatible server for the shared-cache tests (tests/tests/compile/remote_cache.rs); pinned.
moto=moto[server]==5.1.0
if ! "$python" -m pip show moto 2>/dev/null | grep -x "Version: ${moto#*==}" >/dev/null; then
  echo "setup: installing $moto (an S3 server for the shared-cache tests) from PyPI" >&2
  pip_install "$moto"
fi
# cuda.h for the CUDA driver bindings (gpu-embed/tests/embed/bindings.rs); pinned: the checked-in
# bindings are generated from exactly this header.
cuda_runtime=nvidia-cuda-runtime-cu12==12.9.79
if ! "$python" -m pip show nvidia-cuda-runtime-cu12 2>/dev/null | grep -x "Version: ${cuda_runtime#*==}" >/dev/null; then
  echo "setup: installing $cuda_runtime (cuda.h) from PyPI" >&2
  pip_install "$cuda_runtime"
fi

# ROCm 6's HIP headers and runtime, from Debian unstable: the bindings of ROCm 6's device
# properties are generated from these headers, and the tests check the real library exports
# what the bindings load. Unpacked, not installed, so the system keeps Debian 12's packages.
hip6=/opt/gpu-build/hip6
if [ ! -f "$hip6/usr/include/hip/hip_runtime_api.h" ] || ! ls "$hip6"/usr/lib/*/libamdhip64.so.6 >/dev/null 2>&1; then
  echo "setup: unpacking libamdhip64-dev and libamdhip64-6 (ROCm 6) from Debian unstable into $hip6" >&2
  sudo_cmd=""
  [ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
  scratch=$(mktemp -d)
  mkdir -p "$scratch/lists/partial" "$scratch/cache/archives/partial"
  echo "deb http://deb.debian.org/debian sid main" > "$scratch/sources.list"
  sid=(-o Dir::Etc::sourcelist="$scratch/sources.list" -o Dir::Etc::sourceparts=/dev/null
       -o Dir::State::Lists="$scratch/lists" -o Dir::Cache="$scratch/cache" -o APT::Sandbox::User=root)
  apt-get -qq "${sid[@]}" update
  (cd "$scratch" && apt-get -qq "${sid[@]}" download libamdhip64-dev libamdhip64-6)
  $sudo_cmd mkdir -p "$hip6"
  for deb in "$scratch"/*.deb; do $sudo_cmd dpkg-deb -x "$deb" "$hip6"; done
  rm -rf "$scratch"
fi

# MLIR's own GPU integration tests (llvm-project mlir/test/Integration/GPU), from Debian's source
# of the very LLVM release installed above: the upstream corpus the compile tests measure us
# against mlir-opt-22 with (tests/tests/compile/upstream_corpus.rs). Only that folder is kept.
corpus=/opt/gpu-build/mlir-integration-tests
release=$(dpkg-query -W -f='${Version}' mlir-22-tools | sed -E 's/^[0-9]+://; s/-[^-]*$//')
if [ "$(cat "$corpus/RELEASE" 2>/dev/null)" != "$release" ]; then
  echo "setup: unpacking MLIR $release's GPU integration tests from Debian's llvm-toolchain-22 source into $corpus" >&2
  sudo_cmd=""
  [ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
  scratch=$(mktemp -d)
  tarball=llvm-toolchain-22_$release.orig.tar.xz
  curl -sSfL -o "$scratch/$tarball" "http://deb.debian.org/debian/pool/main/l/llvm-toolchain-22/$tarball" ||
    curl -sSfL -o "$scratch/$tarball" "https://snapshot.debian.org/archive/debian/now/pool/main/l/llvm-toolchain-22/$tarball"
  tar -xJf "$scratch/$tarball" -C "$scratch" --wildcards '*/mlir/test/Integration/GPU/*'
  $sudo_cmd rm -rf "$corpus"
  $sudo_cmd mkdir -p "$corpus"
  $sudo_cmd cp -r "$scratch"/*/mlir/test/Integration/GPU "$corpus/"
  echo "$release" | $sudo_cmd tee "$corpus/RELEASE" >/dev/null
  rm -rf "$scratch"
fi

# Intel's CPU Runtime for OpenCL, from PyPI, pinned, into a prefix of its own: an OpenCL driver
# that takes SPIR-V (clCreateProgramWithIL) on any x86-64 CPU, so the OpenCL driver's tests run the
# opencl target's objects on every machine. The wheels' libraries all land in $intel/lib, where
# libintelocl.so finds them (its RUNPATH is $ORIGIN). Its own ICD file names a conda prefix that
# does not exist; ours names the installed library, and the ICD loader lists it beside PoCL.
intel=/opt/gpu-build/intel-opencl
intel_wheels=(intel-opencl-rt==2026.2.0 intel-cmplr-lib-rt==2026.2.0 intel-cmplr-lic-rt==2026.2.0 tbb==2023.2.0)
intel_icd=/etc/OpenCL/vendors/gpu-build-intel-cpu.icd
if [ "$(cat "$intel/WHEELS" 2>/dev/null)" != "${intel_wheels[*]}" ] || [ ! -f "$intel/lib/libintelocl.so" ]; then
  echo "setup: installing Intel's CPU Runtime for OpenCL (${intel_wheels[*]}) from PyPI into $intel" >&2
  sudo_cmd=""
  [ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
  $sudo_cmd rm -rf "$intel"
  $sudo_cmd "$python" -m pip install --quiet --disable-pip-version-check --no-warn-script-location --root-user-action=ignore \
    --no-deps --prefix "$intel" "${intel_wheels[@]}"
  echo "${intel_wheels[*]}" | $sudo_cmd tee "$intel/WHEELS" >/dev/null
fi
if [ "$(cat "$intel_icd" 2>/dev/null)" != "$intel/lib/libintelocl.so" ]; then
  sudo_cmd=""
  [ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
  $sudo_cmd mkdir -p /etc/OpenCL/vendors
  echo "$intel/lib/libintelocl.so" | $sudo_cmd tee "$intel_icd" >/dev/null
fi
