#!/usr/bin/env bash
# Regenerates gpu-embed's driver bindings (gpu-embed/src/driver/sys/) from the vendors' headers
# that scripts/setup.sh installs; review the difference before committing it. To bind a new entry
# point, add it to the lists in gpu-embed/tests/embed/bindings.rs and run this before using it.
set -euo pipefail
cd "$(dirname "$0")/.."
GPU_EMBED_REGENERATE=1 cargo test -p gpu-embed --test embed bindings::checked_in_bindings_match_the_headers
git --no-pager diff --stat -- gpu-embed/src/driver/sys
