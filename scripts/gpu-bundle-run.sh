#!/usr/bin/env bash
# The GPU bundle's run.sh (scripts/gpu-bundle.sh copies it in): runs every check the bundle holds,
# from any directory, with nothing but a base system, and prints a line per check and a final
# "N passed, N failed". On a machine without a GPU the GPU checks are skipped, saying so, and the
# host checks run.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
export LD_LIBRARY_PATH="$here/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
logs="$here/logs"
mkdir -p "$logs"
passed=0
failed=0
skipped=0

# A GPU with its driver: NVIDIA's device nodes or AMD's KFD.
gpu=""
if [ -e /dev/nvidiactl ] || [ -e /dev/nvidia0 ]; then
  gpu=nvidia
elif [ -e /dev/kfd ]; then
  gpu=amd
fi
sanitizer=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1 || true)
# Host tests that need Vulkan run where its loader is (Mesa's lavapipe or a GPU's driver).
host_skips=(--skip memcheck)
if ! ldconfig -p 2>/dev/null | grep -q 'libvulkan.so.1' && ! ls /usr/lib/*/libvulkan.so.1 >/dev/null 2>&1; then
  host_skips+=(--skip vulkan)
fi

# check NAME LOG COMMAND...: runs it, records the result.
check() {
  local name=$1 log=$2
  shift 2
  if "$@" >"$log" 2>&1; then
    passed=$((passed + 1))
    local counts
    counts=$(grep -E "^test result:" "$log" | tail -1 | sed -E 's/^test result: ok\. ([0-9]+) passed.*/\1 tests/')
    echo "PASS  $name${counts:+ ($counts)}"
  else
    failed=$((failed + 1))
    echo "FAIL  $name (log: $log)"
    grep -E "^test .* FAILED$|panicked at" "$log" | head -5 | sed 's/^/        /'
  fi
}

skip() {
  skipped=$((skipped + 1))
  echo "SKIP  $1 ($2)"
}

# Each check: a test binary and the module of it that runs (the harness's filter `MODULE::`).
while read -r test module what; do
  binary="$here/bin/test-$test"
  [ -x "$binary" ] || { failed=$((failed + 1)); echo "FAIL  $module: $test missing from the bundle"; continue; }
  check "host: $module" "$logs/$module.host.log" "$binary" "$module::" "${host_skips[@]}" --test-threads=1
  if [ -z "$gpu" ]; then
    skip "gpu: $module — $what" "no device"
    continue
  fi
  check "gpu: $module — $what" "$logs/$module.gpu.log" "$binary" "$module::" --ignored --test-threads=1
done <"$here/checks.txt"

launches=("sample gpu" "runtime kernel_handles")
for launch in "${launches[@]}"; do
  read -r test module <<<"$launch"
  if [ "$gpu" != nvidia ]; then
    skip "compute-sanitizer: $module" "${gpu:-no device}${gpu:+: not an NVIDIA GPU}"
  elif [ -z "$sanitizer" ]; then
    skip "compute-sanitizer: $module" "compute-sanitizer not found"
  else
    check "compute-sanitizer: $module" "$logs/$module.sanitizer.log" \
      "$sanitizer" --error-exitcode 1 "$here/bin/test-$test" "$module::" --ignored --test-threads=1
  fi
done

for program in sample-project example-streams bench-launch_overhead bench-overlap; do
  if [ -z "$gpu" ] && [ "$program" != sample-project ]; then
    skip "$program" "no device"
    continue
  fi
  check "$program" "$logs/$program.log" "$here/bin/$program"
done

echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
