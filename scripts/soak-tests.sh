#!/usr/bin/env bash
# Soak the test suite: build every test binary of the workspace once per
# feature set, then run each binary N times with `--test-threads=1` and N
# times with the default thread count, and print runs and failures per binary.
# A test that depends on timing, order or another test's leftovers shows up
# here as a failure count above zero.
#
# usage: scripts/soak-tests.sh N
#
# Environment (all optional):
#   SOAK_FEATURES  feature sets to soak, any of "default all"   (default: "default all")
#   SOAK_THREADS   thread modes, any of "1 default"             (default: "1 default")
#   SOAK_ONLY      extended regex: soak only binaries whose name matches
#                  (names look like `tinyagents-tests::it`, `tinyagents::lib`)
#   SOAK_ARGS      extra arguments for every run, e.g. a test-name filter:
#                  SOAK_ONLY=::it SOAK_ARGS="builtin_logging::" soaks one module
#   SOAK_SKIP      extended regex: skip binaries whose name matches
#   SOAK_TIMEOUT   seconds one run may take before it counts as a failure (hang) (default 600)
#   SOAK_LOGS      directory for the snapshots and the output of failed runs (default: target/soak)
#   FAKELLM_URL    the fakellm server the `provider_fakellm` tests (feature `fakellm`)
#                  need; without it they are skipped (`--skip provider_fakellm::`)
#                  and the line says so
#   SOAK_REUSE     1: run the snapshots a previous soak left in SOAK_LOGS, without building
#
# Every feature set is built first; the executables are found with `cargo test
# --no-run --message-format=json` and copied (debug info stripped) to
# $SOAK_LOGS/bin-<feature set>, so an edit or build made while the soak runs
# cannot swap a binary mid-soak; each copy runs from its
# package's directory with the variables cargo sets for tests. The trybuild
# binary (package tinyagents-ui-tests) runs in place: trybuild locates its
# build through its own path. Doc tests are not executables and are not soaked
# (`cargo test --doc` runs them).
# Exit status: 0 when every run passed, 1 otherwise.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

n=${1:?usage: scripts/soak-tests.sh N (runs per binary, feature set and thread mode)}
[[ $n =~ ^[1-9][0-9]*$ ]] || { echo "N must be a positive integer, got '$n'" >&2; exit 2; }
features=${SOAK_FEATURES:-default all}
threads=${SOAK_THREADS:-1 default}
only=${SOAK_ONLY:-}
skip=${SOAK_SKIP:-}
limit=${SOAK_TIMEOUT:-600}
logs=${SOAK_LOGS:-$root/target/soak}
mkdir -p "$logs"
command -v jq >/dev/null || { echo "soak-tests.sh needs jq" >&2; exit 2; }

# As `cargo test` does: proc-macro crates' test binaries link the toolchain's
# libstd dynamically.
export LD_LIBRARY_PATH="$(rustc --print target-libdir):$root/target/debug/deps${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

# manifest path -> package name, to name the binaries.
packages=$(cargo metadata --no-deps --format-version 1 |
  jq -c '[.packages[] | {key: .manifest_path, value: .name}] | from_entries')

summary=$(mktemp)
trap 'rm -f "$summary"' EXIT
status=0

# Each feature set is built, snapshotted and run before the next is built: a
# test that starts one of the workspace's programs finds it through a path
# cargo compiled in (`CARGO_BIN_EXE_<name>`), and the next set's build
# replaces that program with one of other features. Within a set the test
# executables are copies: a source edit or build made meanwhile changes
# nothing in them (the programs they start must not be rebuilt meanwhile).
for set in $features; do
  case $set in
    default) flags=() ;;
    all) flags=(--all-features) ;;
    *) echo "unknown feature set '$set' (expected default or all)" >&2; exit 2 ;;
  esac
  bin="$logs/bin-$set"
  if [[ ${SOAK_REUSE:-} == 1 && -s $bin/snapshot.tsv ]]; then
    echo "==> reusing the snapshot in $bin (features: $set)" >&2
  else
    echo "==> building the test binaries (features: $set)" >&2
    rm -rf "$bin"
    mkdir -p "$bin"
    # One line per test executable: name <TAB> executable <TAB> package directory.
    cargo test --workspace --no-run --message-format=json "${flags[@]}" 2>"$logs/build-$set.log" |
      jq -r --argjson pkgs "$packages" \
        'select(.reason == "compiler-artifact" and .profile.test and .executable != null)
         | ($pkgs[.manifest_path] // "unknown") as $p
         | [ $p + "::" + (if (.target.kind | index("lib")) then "lib" else .target.name end),
             .executable, (.manifest_path | sub("/Cargo.toml$"; "")) ] | @tsv' >"$bin/list.tsv" || {
      echo "build failed (features: $set); see $logs/build-$set.log" >&2
      exit 1
    }
    while IFS=$'\t' read -r name exe dir; do
      if [[ ${name%%::*} == tinyagents-ui-tests ]]; then
        printf '%s\t%s\t%s\n' "$name" "$exe" "$dir"
      else
        copy="$bin/${name//::/-}"
        strip --strip-debug -o "$copy" "$exe" 2>/dev/null || cp "$exe" "$copy"
        printf '%s\t%s\t%s\n' "$name" "$copy" "$dir"
      fi
    done <"$bin/list.tsv" >"$bin/snapshot.tsv"
  fi

  # Run them.
  while IFS=$'\t' read -r name exe dir; do
    [[ -n $only && ! $name =~ $only ]] && continue
    [[ -n $skip && $name =~ $skip ]] && continue
    pkg=${name%%::*}
    extra=(${SOAK_ARGS:-})
    note=""
    if [[ $set == all && $name == tinyagents-tests::it && -z ${FAKELLM_URL:-} ]]; then
      # Its fakellm tests need a server: start one as .ci/run's start_fakellm does.
      extra+=(--skip provider_fakellm::)
      note=" (provider_fakellm skipped: FAKELLM_URL is not set)"
    fi
    for mode in $threads; do
      case $mode in
        1) args=(--test-threads=1 "${extra[@]}") ;;
        default) args=("${extra[@]}") ;;
        *) echo "unknown thread mode '$mode' (expected 1 or default)" >&2; exit 2 ;;
      esac
      fails=0
      start=$SECONDS
      for ((i = 1; i <= n; i++)); do
        out="$logs/$set-${name//::/-}-threads_$mode-run$i.log"
        if (cd "$dir" && CARGO_MANIFEST_DIR="$dir" CARGO_PKG_NAME="$pkg" \
              timeout "$limit" "$exe" "${args[@]}") >"$out" 2>&1; then
          rm -f "$out"
        else
          fails=$((fails + 1))
          echo "FAIL $set $name threads=$mode run $i: $out" >&2
        fi
      done
      printf '%-8s %-52s threads=%-8s runs=%-4d failures=%-4d (%ds)%s\n' \
        "$set" "$name" "$mode" "$n" "$fails" "$((SECONDS - start))" "$note" | tee -a "$summary"
      ((fails == 0)) || status=1
    done
  done <"$bin/snapshot.tsv"
done

echo
echo "==> summary (runs per line: $n)"
sort -k1,1 -k2,2 "$summary"
total=$(wc -l <"$summary")
failed=$(grep -c 'failures=[1-9]' "$summary" || true)
echo "lines: $total, lines with failures: $failed"
exit $status
