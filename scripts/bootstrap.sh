#!/usr/bin/env bash
# Sets up everything `make demo` and `make test` need on a fresh machine, idempotently:
# the system tools the sandboxes use, Python 3.13, uv (the version uv.lock pins), and the project
# venv (.venv) installed exactly from uv.lock. The embedded model's venv is built next by
# `prorl model setup` (Makefile), from its own lock. No pip is needed anywhere.
# The second run is a few hundred milliseconds: each step checks before it acts.
set -euo pipefail
cd "$(dirname "$0")/.."

export UV_PYTHON_DOWNLOADS=never
PRORL_HOME="${PRORL_HOME:-${XDG_CACHE_HOME:-$HOME/.cache}/prorl}"
step() { printf '\033[1m[setup]\033[0m %s\n' "$*"; }

# --- 1. system tools: one line each, "command apt-package  # why" -------------------------------
APT_TOOLS=(
  "bwrap bubblewrap"  # the default sandbox
  "tmux tmux"         # the tool benchmark's baseline
  "git git"           # SWE instances are git repositories
  "chromium chromium" # the HTML report test opens it headless
)
# Wanted, not required: without them only the test that runs the Slurm recipe is skipped.
APT_OPTIONAL=(
  "slurmctld slurm-wlm" # a one-node Slurm for the Slurm recipe's test
  "munged munge"        # Slurm's authentication
)
missing_from() {
  local entry cmd pkg
  for entry in "$@"; do
    read -r cmd pkg <<<"$entry"
    PATH="$PATH:/usr/sbin:/sbin" command -v "$cmd" >/dev/null 2>&1 || printf '%s\n' "$pkg"
  done
}
can_apt() { [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; }
apt_install() {
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -q "$@" >/dev/null 2>&1 \
    || { apt-get update -q >/dev/null && apt-get install -y -q "$@" >/dev/null; }
}
mapfile -t missing < <(missing_from "${APT_TOOLS[@]}")
if [ ${#missing[@]} -gt 0 ]; then
  if can_apt; then
    step "installing ${missing[*]} with apt-get"
    apt_install "${missing[@]}"
  else
    step "WARNING: missing ${missing[*]}; install them (e.g. 'sudo apt-get install ${missing[*]}')." \
         "Tests that need them are skipped."
  fi
fi
mapfile -t optional < <(missing_from "${APT_OPTIONAL[@]}")
if [ ${#optional[@]} -gt 0 ]; then
  if can_apt && apt-cache show "${optional[@]}" >/dev/null 2>&1; then
    step "installing ${optional[*]} with apt-get"
    apt_install "${optional[@]}" || step "WARNING: could not install ${optional[*]}; the Slurm recipe's test is skipped."
  else
    step "note: ${optional[*]} not installed (e.g. 'sudo apt-get install ${optional[*]}');" \
         "the test that runs the Slurm recipe under a one-node Slurm is skipped."
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

# --- 3. uv: exactly the version uv.lock pins (the project venv then carries the same one) --------
UV_VERSION="$(awk '/^name = "uv"$/ {getline; gsub(/[^0-9.]/, ""); print; exit}' uv.lock)"
[ -n "$UV_VERSION" ] || { echo "error: uv.lock pins no uv version" >&2; exit 1; }
uv_ok() { [ -x "$1" ] && [ "$("$1" --version 2>/dev/null | cut -d' ' -f2)" = "$UV_VERSION" ]; }
UV="$(command -v uv || true)"
if ! uv_ok "$UV"; then
  UV="$PRORL_HOME/uv-$UV_VERSION/bin/uv"
  if ! uv_ok "$UV"; then
    step "installing uv $UV_VERSION into $PRORL_HOME/uv-$UV_VERSION"
    rm -rf "$PRORL_HOME/uv-$UV_VERSION"
    "$PY" -m venv "$PRORL_HOME/uv-$UV_VERSION"
    # -qq: errors only. A machine's pip config may name index folders that hold no uv, which pip
    # warns about on every install: not the user's business here.
    "$PRORL_HOME/uv-$UV_VERSION/bin/python" -m pip install -qq --disable-pip-version-check "uv==$UV_VERSION"
    uv_ok "$UV" || { echo "error: could not install uv $UV_VERSION" >&2; exit 1; }
  fi
fi

# --- 4. the project venv, exactly as uv.lock says -------------------------------------------------
stamp_want="$(cat pyproject.toml uv.lock | sha256sum | cut -c1-16) $PY uv-$UV_VERSION"
if [ -f .venv/.prorl-stamp ] && [ "$(cat .venv/.prorl-stamp)" = "$stamp_want" ]; then
  exit 0
fi
if [ ! -x .venv/bin/python ]; then
  step "creating .venv with $PY"
  "$UV" venv -q -p "$PY" .venv
fi
# nemo-gym declares Requires-Python >=3.13.14; older 3.13 patch releases run it fine, so tell uv
# to assume 3.13.14 only when the interpreter is older (clusters have 3.13.14+). `uv sync` has no
# such override, hence export + `uv pip sync`: the same frozen lock, hashes checked, nothing
# resolved, and anything not in the lock removed.
override=()
if ! "$PY" -c 'import sys; sys.exit(sys.version_info < (3, 13, 14))'; then
  override=(--python-version 3.13.14)
fi
step "installing nemo-gym-prorl and its locked dependencies into .venv (first time: about 30 s)"
"$UV" export --frozen --extra dev --format requirements-txt --quiet --output-file .venv/requirements.lock.txt
"$UV" pip sync --quiet --python .venv/bin/python "${override[@]}" .venv/requirements.lock.txt
"$UV" pip check --quiet --python .venv/bin/python "${override[@]}"
# Byte-compiled by importing what the commands, servers and tests use (about 5,000 of the venv's
# 27,000 modules; `--compile-bytecode` compiled them all, 65 s of the 80 s on two cores), with the
# dependencies' SyntaxWarnings silenced here rather than printed by a user's first command.
env -u PYTHONDONTWRITEBYTECODE .venv/bin/python scripts/warm_bytecode.py
echo "$stamp_want" > .venv/.prorl-stamp
step "done: .venv is ready"
