# Sourced by the scripts that run outside test suites against Bunko: starts a scratch Bunko
# on free loopback ports with a temporary data directory, removed (and the server stopped)
# when the calling script exits.
#
#   root=<repository root>; source scripts/scratch-bunko.sh; start_bunko PREFIX MONGO_LISTEN [ARGS...]
#
# runs a release build (built first), or `BUNKO_BIN=path/to/bunko` without building, with
# the server admin `admin` whose password starts with PREFIX; MONGO_LISTEN is `off` or
# `127.0.0.1:0`; more `bunko serve` options may follow. Sets `server` (pid), `password`, `url` (HTTP) and `mongo` (host:port, when
# on). `SCRATCH_LISTEN` (default `127.0.0.1:0`), `SCRATCH_USER` (default `admin`) and
# `SCRATCH_PASSWORD` fix the HTTP address and the admin, for suites that expect them.

start_bunko() {
    local bin="${BUNKO_BIN:-}"
    if [ -z "$bin" ]; then
        cargo build --release --locked -p bunko
        bin="${CARGO_TARGET_DIR:-$root/target}/release/bunko"
    fi
    scratch_data=$(mktemp -d)
    scratch_log="$scratch_data.log"
    password="${SCRATCH_PASSWORD:-$1-$RANDOM$RANDOM}"
    BUNKO_ADMIN="${SCRATCH_USER:-admin}:$password" "$bin" serve --data "$scratch_data" \
        --listen "${SCRATCH_LISTEN:-127.0.0.1:0}" --mongo-listen "$2" "${@:3}" >"$scratch_log" 2>&1 &
    server=$!
    trap stop_bunko EXIT
    url=""
    mongo=""
    for _ in $(seq 100); do
        url=$(grep -o 'http://127.0.0.1:[0-9]*' "$scratch_log" | head -n1 || true)
        mongo=$(grep -o 'mongodb://127.0.0.1:[0-9]*' "$scratch_log" | head -n1 || true)
        [ -n "$url" ] && { [ "$2" = off ] || [ -n "$mongo" ]; } && break
        sleep 0.1
    done
    [ -n "$url" ] || { echo "bunko did not start:" >&2; cat "$scratch_log" >&2; exit 1; }
    mongo="${mongo#mongodb://}"
}

stop_bunko() {
    kill "$server" 2>/dev/null || true
    wait "$server" 2>/dev/null || true
    rm -rf "$scratch_data" "$scratch_log"
}
