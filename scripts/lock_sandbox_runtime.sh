#!/usr/bin/env bash
# Regenerates the sandbox runtime's lock (nemo_gym_prorl/sandbox/runtime.lock.txt) from its
# inputs (runtime.in): every package pinned with hashes, resolved once for every Python >= 3.10
# (`--universal`), so `prorl sandbox setup` installs exactly this set with `--no-deps`.
set -euo pipefail
cd "$(dirname "$0")/.."
export UV_PYTHON_DOWNLOADS=never
PRORL_HOME="${PRORL_HOME:-${XDG_CACHE_HOME:-$HOME/.cache}/prorl}"
UV="${UV:-$(command -v uv || echo "$PRORL_HOME/uv-venv/bin/uv")}"
[ -x "$UV" ] || { echo "error: uv not found (run scripts/bootstrap.sh, or set UV=/path/to/uv)" >&2; exit 1; }
dir=nemo_gym_prorl/sandbox
"$UV" pip compile --quiet --universal --python-version 3.10 --generate-hashes \
  --custom-compile-command "scripts/lock_sandbox_runtime.sh" \
  "$dir/runtime.in" -o "$dir/runtime.lock.txt"
echo "wrote $dir/runtime.lock.txt ($(grep -c '==' "$dir/runtime.lock.txt") packages)"
