#!/usr/bin/env bash
# Schemathesis's stateless property-based tests against a live `oka serve` with
# Redis behind it, from the OpenAPI documents the admin port serves:
#
#   bash tests/schemathesis/run.sh target/debug/oka
#
# - Redis on a free loopback port (no persistence), loaded with the seed data by
#   `oka ingest`; `oka serve` on free loopback ports with the seed spec
#   (examples/seed/spec.yaml) plus features.yaml's features (a chained feature, a
#   range aggregate, a last_n read, a UDF failing for one key). All stopped by PID
#   on exit.
# - Five runs, each of the phases examples, coverage and fuzzing, with the checks
#   below, MAX_EXAMPLES (default 300) fuzzed cases per operation, every run bounded
#   by `timeout` (one worker: Hypothesis's source inspection is not thread-safe on
#   Python 3.11 and failed a run with `--workers 2`):
#     1. the serving port's document as served (/openapi.json), valid and invalid
#        data (`--mode all`); GET /on_demand_compute/{json} in a run of its own
#        with GET_EXAMPLES (default 40) cases, its whole request in the path being
#        slow to generate;
#     2. the same document with its request schemas narrowed to the loaded spec
#        (seeded.py): feature names, keys and arguments that exist, so generated
#        requests reach the store, the UDFs and the encoder; valid data only; the
#        answers are checked against the served document's response schemas;
#     3. the admin port's document (/openapi-admin.json), valid and invalid data;
#     4. the serving document against a second server with API keys configured,
#        sending a read-only key (`X-API-Key`, which wins over a generated
#        `Authorization`): reads are served, ingest is `403 forbidden`.
# - The checks: status_code_conformance, content_type_conformance,
#   response_headers_conformance, response_schema_conformance,
#   negative_data_rejection (a request the document calls invalid is refused), and
#   hooks.py's not_a_server_error_except_deadline in place of not_a_server_error (a
#   5xx fails the run, except `504 deadline_exceeded`, the documented answer to the
#   1 ms deadlines the fuzzer asks for) and positive_data_acceptance_except_registry
#   in place of positive_data_acceptance (a request the document calls valid is
#   accepted, except a 400 for a rule of the loaded spec that no schema can state:
#   missing_keys, invalid_key, invalid_query_arg, unknown/invalid_udf_arg; see
#   hooks.py). The seeded run (a narrowed document, not the contract) checks the
#   answers only. `--suppress-health-check filter_too_much,too_slow`: the `{json}`
#   path parameter is a whole JSON request, and most generated ones hold characters
#   a path cannot carry, which Schemathesis filters out (slowly).
# - The served documents must equal docs/openapi.json and docs/openapi-admin.json.
#
# Each run prints its random seed; SEED=N repeats it (MAX_EXAMPLES=N changes the
# number of cases). The venv is target/schemathesis/venv (created once; pip runs again only when
# requirements.txt changes). Reports (JUnit, NDJSON) go to target/schemathesis/.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
BIN=${1:?usage: tests/schemathesis/run.sh PATH/TO/oka}
[[ -x $BIN ]] || { echo "schemathesis: no executable oka at $BIN" >&2; exit 2; }
BIN=$(cd "$(dirname "$BIN")" && pwd)/$(basename "$BIN")
MAX_EXAMPLES=${MAX_EXAMPLES:-300}
WORK=$ROOT/target/schemathesis
mkdir -p "$WORK"
rm -rf "$WORK"/report-*

VENV=$WORK/venv
source "$ROOT/scripts/venv.sh"
venv_with "$VENV" "$HERE/requirements.txt"
command -v redis-server >/dev/null || { echo "schemathesis: redis-server is needed" >&2; exit 2; }

read -r RPORT PORT APORT KPORT KAPORT < <(python3 -c '
import socket
s = [socket.socket() for _ in range(5)]
for x in s: x.bind(("127.0.0.1", 0))
ports = [x.getsockname()[1] for x in s]
for x in s: x.close()
print(*ports)')

pids=()
cleanup() {
  for pid in "${pids[@]}"; do
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
}
trap cleanup EXIT

redis-server --port "$RPORT" --bind 127.0.0.1 --save "" --appendonly no --dir "$WORK" \
  >"$WORK/redis.log" 2>&1 &
pids+=($!)
for _ in $(seq 1 100); do
  redis-cli -p "$RPORT" ping >/dev/null 2>&1 && break
  sleep 0.1
done
STORE="redis://127.0.0.1:$RPORT"
# The seed spec, and features.yaml's features for the fuzzer to reach.
SPEC=$WORK/spec.yaml
cat "$ROOT/examples/seed/spec.yaml" "$HERE/features.yaml" >"$SPEC"

# The seed data: test-id-0 … test-id-999, value = the number.
seq 0 999 | awk '{printf "{\"id\":\"test-id-%d\",\"value\":%d.0}\n",$1,$1}' >"$WORK/seed.jsonl"
"$BIN" ingest --spec "$SPEC" --store "$STORE" --feature test_feature --file "$WORK/seed.jsonl"

"$BIN" serve --spec "$SPEC" --store "$STORE" --workers 2 \
  --listen "127.0.0.1:$PORT" --admin-listen "127.0.0.1:$APORT" >"$WORK/oka.log" 2>&1 &
pids+=($!)
# The same with API keys: a read-only key for the run (ingest answers 403).
READER=schemathesis-reader-5f0c2a9e
printf '%s read\nschemathesis-writer-9d41b7e3 read,write\n' "$READER" >"$WORK/keys"
"$BIN" serve --spec "$SPEC" --store "$STORE" --workers 1 --api-keys-file "$WORK/keys" \
  --listen "127.0.0.1:$KPORT" --admin-listen "127.0.0.1:$KAPORT" >"$WORK/oka-keyed.log" 2>&1 &
pids+=($!)
OKA=http://127.0.0.1:$PORT
ADMIN=http://127.0.0.1:$APORT
for admin in "$ADMIN" "http://127.0.0.1:$KAPORT"; do
  for _ in $(seq 1 100); do
    curl -sf "$admin/readyz" >/dev/null 2>&1 && break
    kill -0 "${pids[-1]}" 2>/dev/null && kill -0 "${pids[-2]}" 2>/dev/null || {
      cat "$WORK/oka.log" "$WORK/oka-keyed.log"; echo "schemathesis: oka exited" >&2; exit 1; }
    sleep 0.2
  done
done

for doc in openapi.json openapi-admin.json; do
  curl -sf "$ADMIN/$doc" -o "$WORK/$doc"
  cmp -s "$WORK/$doc" "$ROOT/docs/$doc" || {
    echo "schemathesis: the served /$doc differs from docs/$doc (regenerate: cargo run -p oka-cli -- openapi)" >&2
    exit 1
  }
done
"$VENV/bin/python" "$HERE/seeded.py" "$WORK/openapi.json" "$OKA" >"$WORK/openapi-seeded.json"

BASE=not_a_server_error_except_deadline,status_code_conformance,content_type_conformance,response_headers_conformance,response_schema_conformance
# The served documents are the contract: what they call valid is accepted, what they
# call invalid is refused. The seeded document is narrowed for reach, not exact (it
# names any feature in feature_keys, say, which no target may need), so its run
# checks the answers only.
CONTRACT=$BASE,positive_data_acceptance_except_registry,negative_data_rejection
run() {
  local name=$1 mode=$2 location=$3 url=$4 checks=$5
  shift 5
  echo "== schemathesis: $name"
  # From $WORK, where schemathesis keeps its cache (.schemathesis/).
  (cd "$WORK" && SCHEMATHESIS_HOOKS=hooks PYTHONPATH="$HERE" timeout 900 "$VENV/bin/schemathesis" run "$location" --url "$url" \
    --checks "$checks" --phases examples,coverage,fuzzing --mode "$mode" \
    --suppress-health-check filter_too_much,too_slow \
    --max-examples "$MAX_EXAMPLES" --workers 1 --request-timeout 10 \
    --generation-database none --no-color --seed "${SEED:-$RANDOM}" \
    --report junit,ndjson --report-dir "$WORK/report-$name" "$@")
}
failed=()
# GET /on_demand_compute/{json}: a whole request in the path is slow to generate
# (about 1.5 s a case), so it has a run of its own with GET_EXAMPLES cases; POST
# /on_demand_compute takes the same request in the other runs.
run serving all "$ADMIN/openapi.json" "$OKA" "$CONTRACT" --exclude-operation-id volga_get || failed+=(serving)
run serving-get all "$ADMIN/openapi.json" "$OKA" "$CONTRACT" --include-operation-id volga_get \
  --max-examples "${GET_EXAMPLES:-40}" || failed+=(serving-get)
run seeded positive "$WORK/openapi-seeded.json" "$OKA" "$BASE" || failed+=(seeded)
run admin all "$ADMIN/openapi-admin.json" "$ADMIN" "$CONTRACT" || failed+=(admin)
run keyed all "$ADMIN/openapi.json" "http://127.0.0.1:$KPORT" "$CONTRACT" --exclude-operation-id volga_get \
  -H "X-API-Key: $READER" || failed+=(keyed)
if ((${#failed[@]})); then
  echo "schemathesis: failed: ${failed[*]} (server log: $WORK/oka.log)" >&2
  exit 1
fi
echo "schemathesis: 5 runs passed"
