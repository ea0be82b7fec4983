#!/usr/bin/env bash
# Runs the MongoDB drivers' specification tests in the unified test format through pymongo's
# own runner (test/unified_format.py of a mongodb/mongo-python-driver checkout) against a
# freshly started Bunko, and prints pytest's counts per suite.
#
# Usage:
#   scripts/mongo-spec.sh /path/to/mongo-python-driver [suite...] [-- pytest args...]
#
# Suites: crud (the default), retryable-writes, retryable-reads, sessions, transactions,
# change-streams, collection_management, index_management (the unified part),
# run_command, command_monitoring, read_write_concern (the operation tests),
# causal_consistency, or `all`. The checkout and its tests are not part of this repository nor
# of CI. The checkout's pymongo and pytest go into .deps/mongo-spec-venv/ (ignored by git).
# Bunko runs from a release build on free loopback ports, with a temporary data directory
# that is removed afterwards; `BUNKO_BIN=path/to/bunko` runs that binary instead (e.g. a
# debug build) and skips the release build. The runner logs in as the server admin
# (DB_USER/DB_PASSWORD), whom `usersInfo` on `admin` lists, so it creates no user; the
# server runs with `--mongo-test-commands`, so the tests that need the `failCommand` fail
# point run too.
# Each suite's full pytest output is kept in $LOGS (default: a temporary directory).
set -euo pipefail

driver="${1:?usage: scripts/mongo-spec.sh /path/to/mongo-python-driver [suite...] [-- pytest args...]}"
shift
[ -f "$driver/test/unified_format.py" ] || { echo "no unified runner in $driver/test" >&2; exit 2; }
suites=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do suites+=("$1"); shift; done
[ "${1:-}" = "--" ] && shift
[ ${#suites[@]} -eq 0 ] && suites=(crud)
[ "${suites[0]}" = "all" ] &&
    suites=(crud retryable-writes retryable-reads sessions transactions change-streams
        collection_management index_management run_command command_monitoring
        read_write_concern causal_consistency)

# The test file (and pytest filter) of each suite.
suite_args() {
    case "$1" in
        crud) echo "test/test_crud_unified.py" ;;
        retryable-writes) echo "test/test_retryable_writes_unified.py" ;;
        retryable-reads) echo "test/test_retryable_reads_unified.py" ;;
        sessions) echo "test/test_sessions_unified.py" ;;
        transactions) echo "test/test_transactions_unified.py" ;;
        change-streams) echo "test/test_change_stream.py -k Unified" ;;
        collection_management) echo "test/test_collection_management.py" ;;
        index_management) echo "test/test_index_management.py -k IndexManagement" ;;
        run_command) echo "test/test_run_command.py" ;;
        command_monitoring) echo "test/test_command_monitoring.py" ;;
        read_write_concern) echo "test/test_read_write_concern_spec.py -k TestOperation" ;;
        causal_consistency) echo "test/test_causal_consistency.py" ;;
        *) echo "unknown suite $1" >&2; return 2 ;;
    esac
}
for suite in "${suites[@]}"; do suite_args "$suite" >/dev/null; done

cd "$(dirname "$0")/.."
root=$(pwd)
venv="$root/.deps/mongo-spec-venv"
stamp="$venv/.installed"
revision=$(git -C "$driver" rev-parse HEAD 2>/dev/null || echo unknown)
if [ "$(cat "$stamp" 2>/dev/null)" != "$revision" ]; then
    python3 -m venv --clear "$venv"
    "$venv/bin/pip" install --quiet --disable-pip-version-check "$driver" \
        -r "$driver/requirements/test.txt" -r "$driver/requirements/zstd.txt"
    echo "$revision" >"$stamp"
fi

# shellcheck source=scratch-bunko.sh
source "$root/scripts/scratch-bunko.sh"
start_bunko spec 127.0.0.1:0 --mongo-test-commands
logs="${LOGS:-$(mktemp -d)}"
addr="mongodb://$mongo"
port="${mongo##*:}"
echo "bunko at $addr (pid $server), runner from $driver ($revision), logs in $logs"

cd "$driver"
for suite in "${suites[@]}"; do
    # shellcheck disable=SC2046 # the suite's file and filter are separate words
    DB_IP=127.0.0.1 DB_PORT="$port" DB_USER=admin DB_PASSWORD="$password" \
        "$venv/bin/python" -m pytest -p no:cacheprovider -o addopts= -q --no-header \
        -o log_cli_level=ERROR -rfE $(suite_args "$suite") "$@" >"$logs/$suite.log" 2>&1 || true
    echo "$suite: $(grep -E '^(=+ )?[0-9]+ (passed|failed|skipped|error)' "$logs/$suite.log" | tail -n1 | tr -d '=')"
done
