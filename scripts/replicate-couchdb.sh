#!/usr/bin/env bash
# Replicates between a real CouchDB (COUCH_URL, with admin credentials in the URL, e.g.
# http://admin:pass@127.0.0.1:5984) and a freshly started Bunko, both ways: the same
# scenarios as crates/bunko/tests/e2e/replication.rs (push, pull, conflicts, deletions,
# attachments, continuous, resume from checkpoint, checkpoints shared by both replicators).
# Not part of the test suite or CI; prints one PASS/FAIL line per check. Bunko runs from a
# release build; `BUNKO_BIN=path/to/bunko` runs that binary instead (e.g. a debug build) and
# skips the release build.
#
# Usage: COUCH_URL=http://admin:pass@127.0.0.1:5984 scripts/replicate-couchdb.sh
set -euo pipefail

couch="${COUCH_URL:?set COUCH_URL to a CouchDB with admin credentials in the URL}"
couch="${couch%/}"
cd "$(dirname "$0")/.."
root=$(pwd)
# shellcheck source=scratch-bunko.sh
source "$root/scripts/scratch-bunko.sh"
start_bunko repl off
bunko="${url/http:\/\//http://admin:$password@}"
echo "bunko at $url, couchdb at ${couch#*@}"

failures=0
check() { # name, command...
    local name=$1; shift
    if "$@"; then echo "PASS $name"; else echo "FAIL $name"; failures=$((failures + 1)); fi
}
j() { curl -fsS -H 'Content-Type: application/json' "$@"; }
field() { python3 -c "import json,sys; d=json.load(sys.stdin); print(eval('d'+sys.argv[1]))" "$1"; }
same_docs() { # server1 db1 server2 db2
    diff <(j "$1/$2/_all_docs?include_docs=true&conflicts=true" | field "['rows']") \
         <(j "$3/$4/_all_docs?include_docs=true&conflicts=true" | field "['rows']") >/dev/null
}

db="bunko_repl_$RANDOM"
j -X DELETE "$couch/$db" >/dev/null 2>&1 || true
j -X PUT "$couch/$db" >/dev/null
j -X POST "$couch/$db/_bulk_docs" -d '{"docs": [
  {"_id": "1", "firstName": "Thomas", "lastName": "Andersen"},
  {"_id": "2", "firstName": "Jane", "lastName": "Doe"},
  {"_id": "files", "_attachments": {"a.txt": {"content_type": "text/plain", "data": "44OJ44Kt44Ol44Oh44Oz44OI"}}}
]}' >/dev/null

# CouchDB -> Bunko (pull by Bunko), then Bunko -> CouchDB into a new database (push).
j -X POST "$bunko/_replicate" -d "{\"source\": \"$couch/$db\", \"target\": \"copy\", \"create_target\": true}" >/dev/null
check "couchdb -> bunko copies documents and attachments" same_docs "$couch" "$db" "$bunko" copy
check "attachment data on bunko" test "$(curl -fsS "$bunko/copy/files/a.txt")" = "ドキュメント"
j -X POST "$bunko/_replicate" -d "{\"source\": \"copy\", \"target\": \"$couch/${db}_back\", \"create_target\": true}" >/dev/null
check "bunko -> couchdb copies documents" same_docs "$bunko" copy "$couch" "${db}_back"

# Conflicts both ways.
rev=$(j "$couch/$db/1" | field "['_rev']")
j -X PUT "$couch/$db/1" -d "{\"_rev\": \"$rev\", \"firstName\": \"couch\"}" >/dev/null
j -X PUT "$bunko/copy/1" -d "{\"_rev\": \"$rev\", \"firstName\": \"bunko\"}" >/dev/null
rev2=$(j "$couch/$db/2" | field "['_rev']")
j -X DELETE "$couch/$db/2?rev=$rev2" >/dev/null
j -X POST "$couch/_replicate" -d "{\"source\": \"$couch/$db\", \"target\": \"$bunko/copy\"}" >/dev/null
j -X POST "$couch/_replicate" -d "{\"source\": \"$bunko/copy\", \"target\": \"$couch/$db\"}" >/dev/null
check "conflicts and deletions agree after couchdb's replicator" same_docs "$couch" "$db" "$bunko" copy

# CouchDB's replicator pushes compressible attachments gzipped ("encoding": "gzip"), and
# pulls Bunko's as multipart/mixed; an attachment added on each side gives the same revision.
python3 -c "
import base64, json
text = base64.b64encode(''.join(f'{i}: 文書\\n' for i in range(20000)).encode()).decode()
atts = {'t.txt': 'text/plain', 'b.bin': 'application/octet-stream'}
print(json.dumps({'_attachments': {n: {'content_type': t, 'data': text} for n, t in atts.items()}}))
" | j -X PUT "$couch/$db/texts" -d @- >/dev/null
j -X POST "$couch/_replicate" -d "{\"source\": \"$couch/$db\", \"target\": \"$bunko/copy\"}" >/dev/null
check "couchdb's replicator pushes gzipped attachments to bunko" same_docs "$couch" "$db" "$bunko" copy
check "pushed attachment data on bunko" cmp -s <(curl -fsS "$couch/$db/texts/t.txt") <(curl -fsS "$bunko/copy/texts/t.txt")
rev=$(j "$couch/$db/texts" | field "['_rev']")
on_couch=$(curl -fsS -X PUT "$couch/$db/texts/more.txt?rev=$rev" -H 'Content-Type: text/plain' --data-binary 'ブンコ' | field "['rev']")
on_bunko=$(curl -fsS -X PUT "$bunko/copy/texts/more.txt?rev=$rev" -H 'Content-Type: text/plain' --data-binary 'ブンコ' | field "['rev']")
check "the same attachment edit gives the same revision on both" test "$on_couch" = "$on_bunko"
curl -fsS -X PUT "$bunko/copy/texts/bunko.txt?rev=$on_bunko" -H 'Content-Type: text/plain' --data-binary '書いた' >/dev/null
j -X POST "$couch/_replicate" -d "{\"source\": \"$bunko/copy\", \"target\": \"$couch/$db\"}" >/dev/null
check "couchdb's replicator pulls attachments written on bunko" same_docs "$couch" "$db" "$bunko" copy
check "pulled attachment data on couchdb" test "$(curl -fsS "$couch/$db/texts/bunko.txt")" = "書いた"

# Bunko's replicator writes its checkpoint on CouchDB too, and resumes from it.
body="{\"source\": \"$couch/$db\", \"target\": \"copy\"}"
j -X POST "$bunko/_replicate" -d "$body" >/dev/null
answer=$(j -X POST "$bunko/_replicate" -d "$body")
check "bunko resumes from its checkpoint on couchdb (no_changes)" test "$(echo "$answer" | field ".get('no_changes')")" = True

# Continuous CouchDB -> Bunko.
id=$(j -X POST "$bunko/_replicate" -d "{\"source\": \"$couch/$db\", \"target\": \"copy\", \"continuous\": true}" | field "['_local_id']")
j -X PUT "$couch/$db/later" -d '{"v": 1}' >/dev/null
ok=false
for _ in $(seq 100); do curl -fsS "$bunko/copy/later" >/dev/null 2>&1 && { ok=true; break; }; sleep 0.2; done
check "continuous replication carries a later edit" $ok
j -X POST "$bunko/_replicate" -d "{\"replication_id\": \"$id\", \"cancel\": true}" >/dev/null

j -X DELETE "$couch/$db" >/dev/null
j -X DELETE "$couch/${db}_back" >/dev/null
echo "$failures failure(s)"
exit $((failures > 0))
