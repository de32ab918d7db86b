#!/usr/bin/env bash
# Sets up everything `make demo` and `make test` need on a fresh machine, idempotently:
# Python 3.13, uv, the project venv (.venv), and the system tools the sandboxes use.
# The second run is a few hundred milliseconds: each step checks before it acts.
set -euo pipefail
cd "$(dirname "$0")/.."

export UV_PYTHON_DOWNLOADS=never
PRORL_HOME="${PRORL_HOME:-${XDG_CACHE_HOME:-$HOME/.cache}/prorl}"
step() { printf '\033[1m[setup]\033[0m %s\n' "$*"; }

# --- 1. system tools: bubblewrap (the default sandbox) and tmux (the benchmark's baseline) ----
missing=()
command -v bwrap >/dev/null 2>&1 || missing+=(bubblewrap)
command -v tmux >/dev/null 2>&1 || missing+=(tmux)
command -v chromium >/dev/null 2>&1 || missing+=(chromium)  # the HTML report test opens it headless
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    step "installing ${missing[*]} with apt-get"
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y -q "${missing[@]}" >/dev/null 2>&1 \
      || { apt-get update -q >/dev/null && apt-get install -y -q "${missing[@]}" >/dev/null; }
  else
    step "WARNING: missing ${missing[*]}; install them (e.g. 'sudo apt-get install ${missing[*]}')." \
         "Tests that need them are skipped."
  fi
fi

# --- 2. a Python 3.13 interpreter: PATH first, then pyenv's versions --------------------------
find_python() {
  local c
  # A pyenv shim can be on PATH for a version that is not selected: only trust what really runs.
  for c in python3.13 "$(command -v pyenv >/dev/null 2>&1 && pyenv root)"/versions/3.13*/bin/python3.13 \
           "$HOME"/.pyenv/versions/3.13*/bin/python3.13; do
    if [ -n "$c" ] && command -v "$c" >/dev/null 2>&1 \
       && "$c" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 13))' >/dev/null 2>&1; then
      command -v "$c"; return 0
    fi
  done
  return 1
}
PY="${PRORL_PYTHON:-$(find_python || true)}"
[ -n "$PY" ] || { echo "error: no Python 3.13 found (set PRORL_PYTHON=/path/to/python3.13)" >&2; exit 1; }

# --- 3. uv: on PATH, or installed once into our own small venv --------------------------------
UV="$(command -v uv || true)"
if [ -z "$UV" ]; then
  UV="$PRORL_HOME/uv-venv/bin/uv"
  if [ ! -x "$UV" ]; then
    step "installing uv into $PRORL_HOME/uv-venv"
    "$PY" -m venv "$PRORL_HOME/uv-venv"
    "$PRORL_HOME/uv-venv/bin/pip" install -q uv
  fi
fi

# --- 4. the project venv -----------------------------------------------------------------------
stamp_want="$(cat pyproject.toml | sha256sum | cut -c1-16) $PY"
if [ -f .venv/.prorl-stamp ] && [ "$(cat .venv/.prorl-stamp)" = "$stamp_want" ]; then
  exit 0
fi
if [ ! -x .venv/bin/python ]; then
  step "creating .venv with $PY"
  "$UV" venv -q -p "$PY" .venv
fi
# nemo-gym declares Requires-Python >=3.13.14; older 3.13 patch releases run it fine, so tell the
# resolver to assume 3.13.14 only when the interpreter is older (clusters have 3.13.14+).
override=()
if ! "$PY" -c 'import sys; sys.exit(sys.version_info < (3, 13, 14))'; then
  override=(--python-version 3.13.14)
fi
step "installing nemo-gym-prorl and its dependencies into .venv (first time: about a minute)"
"$UV" pip install --python .venv/bin/python "${override[@]}" -e '.[dev]'
echo "$stamp_want" > .venv/.prorl-stamp
step "done: .venv is ready"
