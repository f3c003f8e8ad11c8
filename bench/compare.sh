#!/usr/bin/env bash
# Side-by-side: tinyagents and LangChain v1 on the same agent shapes, in one
# invocation, on this machine. Makes a virtual environment with the pinned
# LangChain (bench/requirements.txt), runs our bench (cargo bench --bench
# compare) and LangChain's (bench/langchain_bench.py), and prints per-hook,
# per-layer and per-token overheads with the ratios.
#
#   bash bench/compare.sh            # default rounds
#   ROUNDS=500 bash bench/compare.sh # more rounds for LangChain
set -euo pipefail
cd "$(dirname "$0")/.."
venv=${VENV:-target/langchain-venv}
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --upgrade pip
  "$venv/bin/pip" install --quiet -r bench/requirements.txt
fi
ours=$(cargo bench --quiet -p tinyagents --bench compare 2>/dev/null | tail -n 1)
theirs=$("$venv/bin/python" bench/langchain_bench.py "${ROUNDS:-200}")
"$venv/bin/python" - "$ours" "$theirs" <<'PY'
import json, sys
ours, theirs = json.loads(sys.argv[1]), json.loads(sys.argv[2])
rows = [
    ("agent turn, no middleware", "agent_turn_us"),
    ("agent turn, 10 no-op before/after middleware", "agent_turn_10_noop_before_after_us"),
    ("per before/after hook", "per_hook_us"),
    ("agent turn, 10 wrap layers", "agent_turn_10_wraps_us"),
    ("per wrap layer", "per_wrap_layer_us"),
    ("tool round trip", "tool_round_trip_us"),
    ("streaming 1,000 tokens", "stream_1000_tokens_us"),
    ("per streamed token", "per_token_us"),
]
print(f"{'':48} {'tinyagents':>12} {'LangChain':>12} {'ratio':>10}")
for label, key in rows:
    a, b = ours[key], theirs[key]
    ratio = f"{b / a:,.0f}x" if a > 0 else "-"
    print(f"{label:48} {a:10.3f}us {b:10.1f}us {ratio:>10}")
PY
