#!/usr/bin/env bash
# Runs CouchDB's Elixir integration suite (test/elixir of an apache/couchdb checkout, e.g. the
# tag 3.4.3) against a freshly started Bunko and prints passed/run per test file.
#
# Usage:
#   scripts/elixir-suite.sh /path/to/couchdb [test files...]   e.g. test/elixir/test/basics_test.exs
#
# Not part of this repository's tests or CI. Needs Elixir >= 1.18 (`mix` on PATH) and the
# checkout built (`./configure … && make`, so its src/*/ebin exist) with its mix
# dependencies (`MIX_ENV=integration mix deps.get`; this script compiles them). Without file
# arguments it runs every `*_test.exs` but search, nouveau, resharding and the cluster
# quorum tests, with the checkout's own include and skip lists, as `make elixir` does.
# Bunko runs from a release build on 127.0.0.1:15984, where the suite expects its server
# (its replication tests name that address), with the suite's default admin (`adm:pass`)
# and a temporary data directory that is removed afterwards; `BUNKO_BIN=path/to/bunko` runs
# that binary instead and skips the release build.
set -euo pipefail

couch="$(cd "${1:?usage: scripts/elixir-suite.sh /path/to/couchdb [test files...]}" && pwd)"
shift
[ -f "$couch/test/elixir/test/test_helper.exs" ] || { echo "no Elixir suite in $couch" >&2; exit 2; }
command -v mix >/dev/null || { echo "mix (Elixir >= 1.18) is not on PATH" >&2; exit 2; }

cd "$(dirname "$0")/.."
root=$(pwd)
if curl -s -o /dev/null http://127.0.0.1:15984/; then
    echo "127.0.0.1:15984 is taken: the suite needs its server there" >&2
    exit 2
fi
# shellcheck source=scratch-bunko.sh
source "$root/scripts/scratch-bunko.sh"
SCRATCH_LISTEN=127.0.0.1:15984 SCRATCH_USER=adm SCRATCH_PASSWORD=pass start_bunko elixir off --node-name node1@127.0.0.1
echo "bunko at $url (pid $server), suite from $couch/test/elixir"
# The handlers CouchDB's own test cluster (dev/run) turns on: the JWT and proxy tests need them.
handlers='{chttpd_auth, jwt_authentication_handler}, {chttpd_auth, proxy_authentication_handler}, {chttpd_auth, cookie_authentication_handler}, {chttpd_auth, default_authentication_handler}'
curl -sf -u adm:pass -X PUT "$url/_node/_local/_config/chttpd/authentication_handlers" \
    -d "\"$handlers\"" >/dev/null
# CouchDB lets anonymous requests through to each database's security (its default
# `require_valid_user = false`); Bunko's default refuses them (README).
curl -sf -u adm:pass -X PUT "$url/_node/_local/_config/chttpd/require_valid_user" \
    -d '"false"' >/dev/null

cd "$couch"
export MIX_ENV=integration ELIXIR_ERL_OPTIONS=+fnu
mix compile >/dev/null
if [ $# -eq 0 ]; then
    set -- $(ls test/elixir/test/*_test.exs |
        grep -vE 'search|nouveau|reshard|cluster_with_quorum|cluster_without_quorum')
fi
report="$couch/_build/integration/lib/couchdbtest/test-junit-report.xml"
rm -f "$report"
status=0
EX_COUCH_URL="$url" EX_USERNAME=adm EX_PASSWORD=pass \
    mix test --trace --formatter JUnitFormatter --formatter ExUnit.CLIFormatter \
    --include test/elixir/test/config/suite.elixir \
    --exclude test/elixir/test/config/skip.elixir "$@" || status=$?

# passed/run per file from the JUnit report (a module's file is named in its source).
python3 - "$report" "$@" <<'EOF'
import re, sys, xml.etree.ElementTree as ET
files = {}
for path in sys.argv[2:]:
    for name in re.findall(r"^defmodule (\S+) do", open(path, encoding="utf-8").read(), re.M):
        files[name] = path.rsplit("/", 1)[-1]
total = [0, 0]
print("\n| file | passed | run |\n|---|---|---|")
for suite in sorted(ET.parse(sys.argv[1]).getroot().iter("testsuite"),
                    key=lambda s: files.get(s.get("name")[7:], s.get("name"))):
    run = int(suite.get("tests")) - int(suite.get("skipped"))
    passed = run - int(suite.get("failures")) - int(suite.get("errors"))
    total = [total[0] + passed, total[1] + run]
    print(f"| {files.get(suite.get('name')[7:], suite.get('name'))} | {passed} | {run} |")
print(f"| total | {total[0]} | {total[1]} |")
EOF
exit "$status"
