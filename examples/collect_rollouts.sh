#!/usr/bin/env bash
# NeMo Gym's own `ng_collect_rollouts` with our configs: `prorl gym up` starts the Gym stack
# (head server, prorl_agent, the prorl_math resources server with bubblewrap sandboxes, Gym's
# vllm_model) in this venv, with Gym's observability on (its default); ng_collect_rollouts runs the
# example rows through the agent, reading the stack's model-call capture; Gym's health checks,
# ng_perf and reward profile read the result; `prorl show`
# renders it; `prorl gym down` stops exactly what was started (KEEP_UP=1: the stack stays up for
# more collection, and `prorl gym down --state-dir OUT_DIR/gym` stops it).
#
#   bash examples/collect_rollouts.sh [OUT_DIR]         (MODEL_URL=http://host:port to reuse a vLLM)
#
# Env: MODEL_URL (default: start the embedded vLLM-CPU model), with MODEL_NAME (its served name)
#      and MODEL_API_KEY_FILE (its key, as `prorl model serve` writes it) when it has a key;
#      DOMAIN (math), ROWS (2), REPEATS (2), HEAD_PORT (11000), MAX_TURNS (4), MAX_TOKENS (128),
#      KEEP_UP (unset).
set -euo pipefail
cd "$(dirname "$0")/.."
OUT="$(realpath -m "${1:-outputs/examples/collect_rollouts}")"
DOMAIN="${DOMAIN:-math}" ROWS="${ROWS:-2}" REPEATS="${REPEATS:-2}" HEAD_PORT="${HEAD_PORT:-11000}"
BIN="$(pwd)/.venv/bin"
export RAY_AUTH_MODE=disabled NEMO_GYM_EXTRA_ROOTS="$(pwd)"
mkdir -p "$OUT"

agent=++prorl_agent.responses_api_agents.prorl_agent
overrides=("$agent.agent.max_turns=${MAX_TURNS:-4}" "$agent.llm.sampling.max_tokens=${MAX_TOKENS:-128}")
model=(--serve-model)
[ -n "${MODEL_URL:-}" ] && model=(--model-url "$MODEL_URL")
[ -n "${MODEL_NAME:-}" ] && model+=(--model-name "$MODEL_NAME")
# The stack's model clients (the agent, Gym's model server) send the reused server's key.
[ -n "${MODEL_API_KEY_FILE:-}" ] && overrides+=("++policy_api_key=$(cat "$MODEL_API_KEY_FILE")")

"$BIN/prorl" gym up --domain "$DOMAIN" "${model[@]}" --head-port "$HEAD_PORT" --state-dir "$OUT/gym" -- "${overrides[@]}"
[ -n "${KEEP_UP:-}" ] || trap '"$BIN/prorl" gym down --state-dir "$OUT/gym"' EXIT

head -n "$ROWS" "resources_servers/prorl_$DOMAIN/data/example.jsonl" > "$OUT/inputs.jsonl"
(cd "$OUT" && "$BIN/ng_collect_rollouts" "+head_server.port=$HEAD_PORT" +agent_name=prorl_agent \
  "+input_jsonl_fpath=$OUT/inputs.jsonl" "+output_jsonl_fpath=$OUT/rollouts.jsonl" "+num_repeats=$REPEATS" \
  +observability_enabled=true "+model_call_capture_dir=$OUT/gym/model-calls") | tee "$OUT/collect.log"

"$BIN/prorl" show "$OUT/rollouts.jsonl" | head -n 60
