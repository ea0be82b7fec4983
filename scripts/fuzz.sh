#!/usr/bin/env bash
# Runs every fuzz target of crates/bunko-fuzz coverage-guided (libFuzzer through cargo-bolero,
# on the stable toolchain, without sanitizers), each for SECONDS (default 3600), all at once
# at the lowest CPU priority, and prints each target's runs and coverage at the end.
#
#   scripts/fuzz.sh [SECONDS]
#   TARGETS="wire_messages query_strings" scripts/fuzz.sh 600     # some targets only
#
# cargo-bolero is installed into .deps/cargo-bolero on first use. Corpora and crash inputs
# go to crates/bunko-fuzz/tests/__fuzz__/ (ignored by git; `cargo test` replays them); a
# crash input is a regression test to add beside the code it broke.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-3600}"
root="$(pwd)/.deps/cargo-bolero"
if [ ! -x "$root/bin/cargo-bolero" ]; then
  cargo install cargo-bolero --version 0.13.5 --locked --root "$root"
fi
export PATH="$root/bin:$PATH"
targets="${TARGETS:-document_bodies key_encodings_keep_collation_order
storage_keys_round_trip_and_keep_tuple_order garbage_keys_are_errors_not_panics
selectors_parse_and_match_without_panics selector_text_from_the_wire query_strings
wire_messages stored_values_read_back_exactly}"
logs="target/fuzz/logs"
mkdir -p "$logs"
# Build once, then start every target.
cargo bolero test -p bunko-fuzz document_bodies --sanitizer NONE -T 1s >/dev/null 2>&1 || true
pids=()
for t in $targets; do
  nice -n 19 cargo bolero test -p bunko-fuzz "$t" --sanitizer NONE -T "${seconds}s" \
    >"$logs/$t.log" 2>&1 &
  pids+=("$!")
done
status=0
for pid in "${pids[@]}"; do wait "$pid" || status=1; done
for t in $targets; do
  summary=$(grep -E '^#[0-9]+' "$logs/$t.log" | tail -n 1 || true)
  done_line=$(grep -E '^Done [0-9]+ runs' "$logs/$t.log" || echo "no 'Done' line: see $logs/$t.log")
  printf '%-46s %s | %s\n' "$t" "$done_line" "$summary"
done
exit "$status"
