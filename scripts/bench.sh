#!/usr/bin/env bash
# Runs the bunko-bench suite against a release build of Bunko and, if COUCH_URL is set,
# against that CouchDB too, then writes docs/performance.md: the machine, the commit, the
# exact commands, one table of both servers with ratios (Bunko/CouchDB), Bunko against its
# ceilings (storage engine alone, bare axum), and every workload's full table.
#
# Usage:
#   scripts/bench.sh [bunko-bench options...]        e.g. --scale smoke, --duration 5s
#
# Environment:
#   WORKLOADS    comma-separated workloads (default: all of them)
#   COUCH_URL    a CouchDB on this machine, e.g. http://127.0.0.1:5984 (optional)
#   COUCH_USER   its admin (default admin); COUCH_PASS its password (never printed)
#   COUCH_PID    its beam.smp pid, for peak RSS and CPU time (optional)
#   BENCH_OUT    where to write the report (default docs/performance.md)
#   BUNKO_ARGS   extra `bunko serve` options, e.g. "--compression none" (word-split)
#   CARGO_TARGET_DIR  as for cargo (default target)
#
# Everything runs on loopback; each workload is bounded in documents and time.
set -euo pipefail

cd "$(dirname "$0")/.."
root=$(pwd)
target="${CARGO_TARGET_DIR:-target}"
case "$target" in /*) ;; *) target="$root/$target" ;; esac
out="${BENCH_OUT:-docs/performance.md}"
all="load,write,read,changes,find,mongo,elemmatch,partition-scaling,view,search,txn,agg,limit,baseline"
workloads="${WORKLOADS:-$all}"
# limit and baseline run in bunko-bench's own process, with no server running (so that
# nothing else competes for the machine), and once: they are the same for every server.
# `baseline` goes first (sorted): after `limit`, whose store still compacts and holds
# ~400 MB, it measured a third lower (51k against 77k req/s alone, session 28).
local_workloads=$(tr ',' '\n' <<<"$workloads" | grep -xE 'limit|baseline' | sort | paste -sd, - || true)
server_workloads=$(tr ',' '\n' <<<"$workloads" | grep -vxE 'limit|baseline' | paste -sd, - || true)

work=$(mktemp -d -t bunko-bench-XXXXXX)
bunko_pid=""
cleanup() {
    if [[ -n "$bunko_pid" ]] && kill -0 "$bunko_pid" 2>/dev/null; then
        kill -TERM "$bunko_pid" 2>/dev/null || true
        wait "$bunko_pid" 2>/dev/null || true
    fi
    rm -rf "$work"
}
trap cleanup EXIT

echo "== building (release)" >&2
cargo build --release -p bunko -p bunko-bench >&2
bench="$target/release/bunko-bench"

status=0
local_cmd=()
if [[ -n "$local_workloads" ]]; then
    local_cmd=(bunko-bench --label bunko --workloads "$local_workloads" "$@")
    echo "== in-process ceilings: $local_workloads" >&2
    "$bench" "${local_cmd[@]:1}" --json "$work/bunko.jsonl" --markdown "$work/bunko.md" \
        | tee "$work/local.txt" || status=$?
fi

# The MongoDB listener only when the `mongo` or `agg` workload runs (they compare the two protocols).
mongo_listen=off
grep -qxE "mongo|agg" <<<"$(tr ',' '\n' <<<"$server_workloads")" && mongo_listen=127.0.0.1:0

echo "== starting bunko" >&2
BUNKO_ADMIN=admin:secret "$target/release/bunko" serve --data "$work/data" \
    --listen 127.0.0.1:0 --mongo-listen "$mongo_listen" ${BUNKO_ARGS:-} \
    >"$work/bunko.out" 2>"$work/bunko.log" &
bunko_pid=$!
url=""
for _ in $(seq 1 600); do
    url=$(sed -n 's/^bunko listening on \(http:.*\)/\1/p' "$work/bunko.out")
    mongo_addr=$(sed -n 's|^bunko listening on mongodb://||p' "$work/bunko.out")
    [[ "$mongo_listen" != off && -z "$mongo_addr" ]] && url=""
    [[ -n "$url" ]] && break
    if ! kill -0 "$bunko_pid" 2>/dev/null; then
        cat "$work/bunko.log" >&2
        echo "bunko exited before listening" >&2
        exit 1
    fi
    sleep 0.1
done
[[ -n "$url" ]] || { echo "bunko did not start listening" >&2; exit 1; }

# The commands as recorded in the report (output files left out).
bunko_cmd=()
if [[ -n "$server_workloads" ]]; then
    # --data-dir: load reports Bunko's disk size as the growth of its data directory.
    bunko_cmd=(bunko-bench --url "$url" --user admin --pid "$bunko_pid" --label bunko
        --data-dir "$work/data" --workloads "$server_workloads" "$@")
    echo "== bunko at $url (pid $bunko_pid)" >&2
    # The `mongo` workload's URL comes from the environment, so no password is recorded.
    BENCH_MONGO_URL="mongodb://admin:secret@${mongo_addr:-127.0.0.1:27017}/?directConnection=true" \
    BENCH_PASSWORD=secret "$bench" "${bunko_cmd[@]:1}" --json "$work/bunko.jsonl" \
        --markdown "$work/bunko.md" | tee "$work/bunko.txt" || status=$?
fi
kill -TERM "$bunko_pid" 2>/dev/null || true
wait "$bunko_pid" 2>/dev/null || true
bunko_pid=""

couch_cmd=()
if [[ -n "${COUCH_URL:-}" && -n "$server_workloads" ]]; then
    couch_cmd=(bunko-bench --url "$COUCH_URL" --user "${COUCH_USER:-admin}" --label couchdb
        --workloads "$server_workloads")
    [[ -n "${COUCH_PID:-}" ]] && couch_cmd+=(--pid "$COUCH_PID")
    couch_cmd+=("$@")
    echo "== couchdb at $COUCH_URL" >&2
    BENCH_PASSWORD="${COUCH_PASS:-}" "$bench" "${couch_cmd[@]:1}" --json "$work/couchdb.jsonl" \
        --markdown "$work/couchdb.md" | tee "$work/couchdb.txt" || status=$?
fi

compare=("$work/bunko.jsonl")
[[ -f "$work/couchdb.jsonl" ]] && compare+=("$work/couchdb.jsonl")

commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
if [[ -n "$(git status --porcelain 2>/dev/null)" ]]; then
    commit="$commit (with uncommitted changes)"
fi
cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)
mem=$(awk '/MemTotal/ {printf "%.0f GiB", $2 / 1048576}' /proc/meminfo)

{
    cat <<EOF
# Performance

This page is generated by \`scripts/bench.sh\`; do not edit the figures by hand, run the
script again. It runs \`bunko-bench\` (\`crates/bunko-bench\`) against a release build of
Bunko and, when \`COUCH_URL\` is given, against a CouchDB on the same machine, one after the
other. The workloads and what they measure are described in \`crates/bunko-bench/src/workloads/\`
(one module each). Throughput is closed-loop: every client sends its next request as soon as
the previous one answered. Latencies are per request (per \`_bulk_docs\` batch for \`load\`).
Peak RSS and CPU time are the server's, read from \`/proc\` during each case; for \`limit\`
they are bunko-bench's own process, for \`baseline\` its bare server's threads (RSS: the
process). \`CPU ms/1k\` is that CPU time per 1,000 items of the case's unit (documents,
requests or rows): what the work costs, not only how fast it went. \`client CPU ms/1k\` is
the same for bunko-bench's HTTP clients (the load generator), which share the machine's
cores with the server. The \`load\` rows in MB are one database's size
on disk after its 200k documents, as loaded and after compaction: CouchDB's \`sizes.file\`, and
for Bunko the growth of its data directory (\`crates/bunko-bench/src/workloads/disk.rs\`).

Figures are rough: the machine is shared (other builds may run during a case), and client
and server share its cores. Compare figures of one run with each other, not across runs.

- Date: $(date -u '+%Y-%m-%d %H:%M UTC')
- Machine: $(nproc) cores, ${cpu:-unknown CPU}, ${mem}
- Commit: ${commit}
- Bunko: \`BUNKO_ADMIN=admin:… bunko serve --data <temp dir> --listen 127.0.0.1:0 --mongo-listen ${mongo_listen}${BUNKO_ARGS:+ $BUNKO_ARGS}\` (release build; the \`mongo\` workload gets the MongoDB listener's URL from \`BENCH_MONGO_URL\`)
- Invocation: \`WORKLOADS=${workloads} scripts/bench.sh${*:+ $*}\`
- Commands (passwords from \`BENCH_PASSWORD\`; each also got \`--json\` and \`--markdown\`):
EOF
    if ((${#local_cmd[@]})); then
        echo "  - \`${local_cmd[*]}\` (before Bunko was started)"
    fi
    if ((${#bunko_cmd[@]})); then
        echo "  - \`${bunko_cmd[*]//$work/<temp dir>}\`"
    fi
    if ((${#couch_cmd[@]})); then
        echo "  - \`${couch_cmd[*]}\`"
    else
        echo "  - no CouchDB run (set COUCH_URL, COUCH_USER, COUCH_PASS, COUCH_PID)"
    fi
    echo
    echo "## Summary"
    echo
    "$bench" --compare "${compare[@]}"
    echo
    echo "## Every case"
    echo
    for md in "$work/bunko.md" "$work/couchdb.md"; do
        if [[ -f "$md" ]]; then cat "$md"; fi
    done
} >"$out.tmp"
mv "$out.tmp" "$out"
echo "== wrote $out" >&2
exit "$status"
