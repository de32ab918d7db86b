#!/usr/bin/env bash
# NeMo RL GRPO or DAPO training with ProRL rollouts through NeMo Gym: the launch lines and what
# they need. NeMo RL (GPUs, its own uv environment) is not installed here: run this on the cluster
# from a NeMo RL checkout. NeMo RL starts Gym itself from the recipe's `env.nemo_gym` block and
# adds `policy_base_url` (one URL per vLLM data-parallel rank); the prorl_agent sends every turn
# straight to those ranks.
#
#   bash examples/nemo_rl_launch.sh [grpo|dapo] [math|stem|code|swe|mixed] [--dry-run] [-- overrides]
#
# Needs: NEMO_RL_DIR (a NeMo RL checkout; `uv` on PATH), this repository's .venv (for `prorl data`).
# The recipes: configs/nemo_rl/{grpo,dapo}_prorl_<domain>.yaml. --dry-run prints the commands and
# checks everything that can be checked without NeMo RL: the recipe and the data it names.
set -euo pipefail
REPO="$(cd "$(dirname "$0")/.." && pwd)"
ALGO="${1:-grpo}" DOMAIN="${2:-math}"
shift $(( $# > 2 ? 2 : $# ))
DRY=0
if [ "${1:-}" = "--dry-run" ]; then DRY=1; shift; fi
[ "${1:-}" = "--" ] && shift
case "$ALGO" in grpo|dapo) ;; *) echo "error: algorithm must be grpo or dapo, not '$ALGO'" >&2; exit 2;; esac
RECIPE="$REPO/configs/nemo_rl/${ALGO}_prorl_${DOMAIN}.yaml"
[ -f "$RECIPE" ] || { echo "error: no recipe $RECIPE" >&2; exit 2; }
DATA="${DATA_DIR:-$REPO/data/prorl}"

# 1. the task rows in NeMo RL's Gym format (train/validation JSONL per domain)
prepare=("$REPO/.venv/bin/prorl" data prepare --domain "$( [ "$DOMAIN" = mixed ] && echo all || echo "$DOMAIN")" --out "$DATA")
# 2. training: the recipe, with the data paths made absolute (the recipe's are relative to NeMo RL)
train_data="$DATA/$DOMAIN/train.jsonl" val_data="$DATA/$DOMAIN/validation.jsonl"
launch=(uv run examples/nemo_gym/run_grpo_nemo_gym.py --config "$RECIPE"
        "data.train.data_path=$train_data" "data.validation.data_path=$val_data" "$@")

echo "recipe:  $RECIPE"
echo "data:    ${prepare[*]}"
echo "train:   cd \${NEMO_RL_DIR} && NEMO_GYM_EXTRA_ROOTS=$REPO ${launch[*]}"
if [ "$DRY" = 1 ]; then
  exit 0
fi
: "${NEMO_RL_DIR:?set NEMO_RL_DIR to a NeMo RL checkout}"
[ -f "$NEMO_RL_DIR/examples/nemo_gym/run_grpo_nemo_gym.py" ] \
  || { echo "error: $NEMO_RL_DIR is not a NeMo RL checkout (no examples/nemo_gym/run_grpo_nemo_gym.py)" >&2; exit 2; }
"${prepare[@]}"
if [ "$DOMAIN" = mixed ]; then  # the mixed recipe trains on every domain's rows together
  mkdir -p "$DATA/mixed"
  for split in train validation; do
    cat "$DATA"/{math,stem,code,swe}/"$split.jsonl" > "$DATA/mixed/$split.jsonl"
  done
fi
cd "$NEMO_RL_DIR"
NEMO_GYM_EXTRA_ROOTS="$REPO" exec "${launch[@]}"
