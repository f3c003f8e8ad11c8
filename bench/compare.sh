#!/usr/bin/env bash
# Side-by-side: tinyagents and LangChain v1 on the same agent shapes, on this
# machine. Makes a virtual environment with the pinned LangChain
# (bench/requirements.txt), builds our bench once (tinyagents/benches/compare.rs),
# then runs the two sides *interleaved*: REPS repetitions, each one process of
# ours and one of LangChain's (bench/langchain_bench.py), the order alternating
# from one repetition to the next, so both sides see the same machine load.
# Prints, per row, each side's median over the repetitions with its spread
# (min–max), and the ratio of the medians.
#
#   bash bench/compare.sh                   # 5 repetitions, 200 LangChain rounds each
#   REPS=9 ROUNDS=500 bash bench/compare.sh # more of both
#   JSON=1 bash bench/compare.sh            # also print every repetition's raw JSON
set -euo pipefail
cd "$(dirname "$0")/.."
reps=${REPS:-5}
rounds=${ROUNDS:-200}
if [ "$reps" -lt 5 ]; then
  echo "REPS=$reps: at least 5 repetitions are needed for a median and a spread" >&2
  exit 2
fi
venv=${VENV:-target/langchain-venv}
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --upgrade pip
  "$venv/bin/pip" install --quiet -r bench/requirements.txt
fi

# Build our side once and find the executable, so each repetition is one
# fresh process of the bench itself (not of cargo).
ours_bin=$(cargo bench --quiet -p tinyagents --bench compare --no-run --message-format=json 2>/dev/null |
  "$venv/bin/python" -c '
import json, sys
for line in sys.stdin:
    try:
        m = json.loads(line)
    except ValueError:
        continue
    if m.get("reason") == "compiler-artifact" and m.get("target", {}).get("name") == "compare" and m.get("executable"):
        print(m["executable"])
')
if [ ! -x "$ours_bin" ]; then
  echo "could not build the compare bench (cargo bench -p tinyagents --bench compare --no-run)" >&2
  exit 1
fi

samples=$(mktemp)
trap 'rm -f "$samples"' EXIT
for ((i = 1; i <= reps; i++)); do
  if ((i % 2)); then order="ours theirs"; else order="theirs ours"; fi
  for side in $order; do
    if [ "$side" = ours ]; then
      out=$("$ours_bin" --bench | tail -n 1)
    else
      out=$("$venv/bin/python" bench/langchain_bench.py "$rounds" | tail -n 1)
    fi
    echo "$side $out" >>"$samples"
    [ -n "${JSON:-}" ] && echo "rep $i $side: $out" >&2
  done
  echo "repetition $i/$reps done ($order)" >&2
done

"$venv/bin/python" - "$samples" "$reps" <<'PY'
import json, statistics, sys

path, reps = sys.argv[1], int(sys.argv[2])
runs = {"ours": [], "theirs": []}
with open(path) as f:
    for line in f:
        side, _, payload = line.partition(" ")
        runs[side].append(json.loads(payload))
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


def stats(side, key):
    values = [r[key] for r in runs[side]]
    return statistics.median(values), min(values), max(values)


print(f"bench/compare.sh: {reps} interleaved repetitions per side; median [min – max] in µs")
print(f"{'':46} {'tinyagents':>28} {'LangChain':>30} {'ratio':>8}")
for label, key in rows:
    a, a_lo, a_hi = stats("ours", key)
    b, b_lo, b_hi = stats("theirs", key)
    ratio = f"{b / a:,.0f}x" if a > 0 and b > 0 else "-"
    ours_cell = f"{a:.3f} [{a_lo:.3f} – {a_hi:.3f}]"
    theirs_cell = f"{b:.1f} [{b_lo:.1f} – {b_hi:.1f}]"
    print(f"{label:46} {ours_cell:>28} {theirs_cell:>30} {ratio:>8}")
    if min(a_lo, b_lo) < 0:
        print(f"{'':46} (a negative sample: the difference is within the noise of this machine)")
PY
