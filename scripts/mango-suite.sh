#!/usr/bin/env bash
# Runs CouchDB's own Mango test suite (src/mango/test/*.py of an apache/couchdb checkout)
# against a freshly started Bunko, and prints nose2's summary.
#
# Usage:
#   scripts/mango-suite.sh /path/to/couchdb [nose2 args...]     e.g. 02-basic-find-test
#
# The suite is not part of this repository, nor of CI. Its Python packages (the pins of
# the checkout's src/mango/requirements.txt: nose2, requests, hypothesis) go into
# .venv-mango/ (ignored by git). Bunko runs from a release build on a free loopback port,
# with a temporary data directory that is removed afterwards; `BUNKO_BIN=path/to/bunko`
# runs that binary instead (e.g. a debug build) and skips the release build.
set -euo pipefail

couch="${1:?usage: scripts/mango-suite.sh /path/to/couchdb [nose2 args...]}"
shift
tests="$couch/src/mango/test"
[ -f "$tests/mango.py" ] || { echo "no Mango suite in $tests" >&2; exit 2; }

cd "$(dirname "$0")/.."
root=$(pwd)
venv="$root/.venv-mango"
if [ ! -x "$venv/bin/nose2" ]; then
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet -r "$couch/src/mango/requirements.txt"
fi

target="${CARGO_TARGET_DIR:-$root/target}"
bin="${BUNKO_BIN:-}"
if [ -z "$bin" ]; then
    cargo build --release --locked -p bunko
    bin="$target/release/bunko"
fi
data=$(mktemp -d)
log="$data.log"
password="mango-$RANDOM$RANDOM"
BUNKO_ADMIN="admin:$password" "$bin" serve --data "$data" \
    --listen 127.0.0.1:0 --mongo-listen off >"$log" 2>&1 &
server=$!
cleanup() {
    kill "$server" 2>/dev/null || true
    wait "$server" 2>/dev/null || true
    rm -rf "$data" "$log"
}
trap cleanup EXIT

url=""
for _ in $(seq 100); do
    url=$(grep -o 'http://127.0.0.1:[0-9]*' "$log" | head -n1 || true)
    [ -n "$url" ] && break
    sleep 0.1
done
[ -n "$url" ] || { echo "bunko did not start:" >&2; cat "$log" >&2; exit 1; }
echo "bunko at $url (pid $server), suite from $tests"

cd "$couch"
COUCH_HOST="$url" COUCH_USER=admin COUCH_PASS="$password" \
    "$venv/bin/nose2" -s src/mango/test -c src/mango/unittest.cfg "$@"
