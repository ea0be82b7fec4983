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

# shellcheck source=scratch-bunko.sh
source "$root/scripts/scratch-bunko.sh"
start_bunko mango off
echo "bunko at $url (pid $server), suite from $tests"

cd "$couch"
COUCH_HOST="$url" COUCH_USER=admin COUCH_PASS="$password" \
    "$venv/bin/nose2" -s src/mango/test -c src/mango/unittest.cfg "$@"
