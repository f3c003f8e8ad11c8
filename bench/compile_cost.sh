#!/usr/bin/env bash
# Compile cost of the DSL: a crate of 100 middleware written with the macros
# against the same 100 written by hand (each a before_model and an
# after_model hook). Both crates share one target directory; dependencies
# are built first, then each crate is rebuilt from a touched source three
# times and the median is taken. Prints both times and the ratio.
#
#   bash bench/compile_cost.sh
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
work=target/compile-cost
rm -rf "$work"
mkdir -p "$work"
N=${N:-100}

gen() { # $1 = crate name, $2 = "macros" | "hand"
  local dir="$work/$1"
  mkdir -p "$dir/src"
  cat > "$dir/Cargo.toml" <<TOML
[package]
name = "$1"
version = "0.0.0"
edition = "2021"
publish = false

[dependencies]
tinyagents = { path = "$root/tinyagents" }
async-trait = "0.1"

[workspace]
TOML
  {
    echo "#![allow(dead_code, missing_docs)]"
    echo "use tinyagents::prelude::*;"
    for i in $(seq 1 "$N"); do
      if [ "$2" = macros ]; then
        cat <<RS
pub struct M$i;
#[middleware(name = "m$i")]
impl M$i {
    #[before_model]
    async fn before(&self, request: &mut ModelRequest) -> Result<()> {
        request.params.max_tokens = Some($i);
        Ok(())
    }
    #[after_model]
    async fn after(&self, response: &mut ModelResponse) -> Result<()> {
        response.usage.output_tokens += $i;
        Ok(())
    }
}
RS
      else
        cat <<RS
pub struct M$i;
#[async_trait::async_trait]
impl<S: Send + Sync + 'static, C: Send + Sync + 'static> Middleware<S, C> for M$i {
    fn name(&self) -> &str {
        "m$i"
    }
    fn hooks(&self) -> HookSet {
        HookSet::BEFORE_MODEL | HookSet::AFTER_MODEL
    }
    async fn before_model(&self, _ctx: &mut RunContext<C>, _state: &S, request: &mut ModelRequest) -> Result<()> {
        request.params.max_tokens = Some($i);
        Ok(())
    }
    async fn after_model(&self, _ctx: &mut RunContext<C>, _state: &S, response: &mut ModelResponse) -> Result<()> {
        response.usage.output_tokens += $i;
        Ok(())
    }
}
RS
      fi
    done
  } > "$dir/src/lib.rs"
}

gen dsl_macros macros
gen dsl_hand hand
export CARGO_TARGET_DIR="$root/$work/target"
for c in dsl_macros dsl_hand; do (cd "$work/$c" && cargo build --quiet); done # dependencies, once

time_build() {
  local samples=()
  for _ in 1 2 3; do
    touch "$work/$1/src/lib.rs"
    local t0 t1
    t0=$(date +%s.%N)
    (cd "$work/$1" && cargo build --quiet)
    t1=$(date +%s.%N)
    samples+=("$(python3 -c "print(round($t1 - $t0, 2))")")
  done
  printf '%s\n' "${samples[@]}" | sort -n | sed -n 2p
}

macros=$(time_build dsl_macros)
hand=$(time_build dsl_hand)
echo "100 middleware, debug build of the crate alone (median of 3):"
echo "  with the DSL macros: ${macros}s"
echo "  written by hand:     ${hand}s"
echo "  ratio: $(python3 -c "print(round($macros / $hand, 2))")x"
