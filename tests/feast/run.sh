#!/usr/bin/env bash
# Oka against real Feast (feast[redis] from PyPI, pinned in requirements.txt):
#
#   bash tests/feast/run.sh target/debug/oka
#
# - A Redis on a free loopback port; the test feature repository (repo/: three
#   entities, one view keyed by two, five feature views covering every value type
#   Feast's Redis store writes, a ttl, a feature service with an alias, six
#   on-demand views (two stored by their writes), a push source) copied into target/feast/repo with that
#   Redis's address; its data written by make_data.py; `feast apply`, then
#   `feast materialize` (Feast's own SDK writes the Redis data Oka reads).
# - `oka feast spec` (valid for `oka validate`) and `oka feast scaffold` (an
#   overlay naming the on-demand views).
# - `oka serve --feast-repo --python VENV/bin/python` (the on-demand views run
#   by Feast's SDK in Oka's Python workers, no overlay): compare.py reads every feature of every view for
#   present and missing entities through Feast's SDK and through Oka, equal value
#   for value. Records written through Oka (`POST /v1/ingest`) read back through
#   Feast's SDK (written.py), an older record than the stored one skipped as
#   Feast skips it. `feast serve` on the same Redis: corpus.py sends 320
#   requests to it and to Oka's /get-online-features (answers equal as parsed
#   JSON, the intended differences asserted), and remote.py reads through
#   Feast's SDK as a remote-store client of each (equal); pushed.py writes the
#   same rows through both servers' /push and /write-to-online-store and reads
#   them back alike through both and through Feast's SDK. `feast listen`
#   (Feast's gRPC server) and Oka's --grpc-listen answer grpc_compare.py's
#   requests alike through Feast's generated stubs. A third oka with `--cache
#   tracking` answers the corpus alike, and Feast's own writes reach its readers
#   within 2 s (tracked.py). Then a new view is added, `feast apply` and `materialize` run,
#   `POST /admin/reload` makes Oka serve it, and compare.py runs again; a reload
#   after feature_store.yaml names another Redis is refused, saying so.
# - cluster.sh: the repository on a three-primary Redis Cluster, Feast's and
#   Oka's answers and writes compared again (two views through overlay.yaml's CEL).
# - Settings Oka cannot honour (a SQLite online store, serialization version 2)
#   stop `oka serve` with a message naming the setting; so does an interpreter
#   without Feast's SDK (naming every on-demand view), and an on-demand view the
#   workers cannot run (agg_view.py's aggregations), unless --feast-skip-unmapped,
#   which serves the rest.
# The venv is target/feast/venv (created once; pip runs again only when
# requirements.txt changes; about 60 s the first time). Everything started is
# stopped by PID on exit.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
BIN=${1:?usage: tests/feast/run.sh PATH/TO/oka}
[[ -x $BIN ]] || { echo "feast: no executable oka at $BIN" >&2; exit 2; }
BIN=$(cd "$(dirname "$BIN")" && pwd)/$(basename "$BIN")
WORK=$ROOT/target/feast
mkdir -p "$WORK"

VENV=$WORK/venv
source "$ROOT/scripts/venv.sh"
venv_with "$VENV" "$HERE/requirements.txt"
FEAST=$VENV/bin/feast
command -v redis-server >/dev/null || { echo "feast: redis-server is needed" >&2; exit 2; }
command -v openssl >/dev/null || { echo "feast: openssl is needed (the gRPC TLS check)" >&2; exit 2; }

read -r RPORT PORT APORT FPORT GPORT LPORT < <(python3 -c '
import socket
s = [socket.socket() for _ in range(6)]
for x in s: x.bind(("127.0.0.1", 0))
print(*[x.getsockname()[1] for x in s])
for x in s: x.close()')

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

REPO=$WORK/repo
rm -rf "$REPO"
cp -r "$HERE/repo" "$REPO"
mkdir -p "$REPO/data"
sed -i "s/127.0.0.1:6379/127.0.0.1:$RPORT/" "$REPO/feature_store.yaml"
NOW=$(date -u +%Y-%m-%dT%H:%M:%S+00:00)
"$VENV/bin/python" "$HERE/make_data.py" "$REPO" "$NOW"
materialize() {
  (cd "$REPO" && timeout 300 "$FEAST" apply >"$WORK/apply.log" 2>&1 &&
    timeout 300 "$FEAST" materialize "$(date -u -d '-5 days' +%Y-%m-%dT%H:%M:%S)" \
      "$(date -u -d '+1 minute' +%Y-%m-%dT%H:%M:%S)" >"$WORK/materialize.log" 2>&1) || {
    cat "$WORK/apply.log" "$WORK/materialize.log" 2>/dev/null; echo "feast: apply/materialize failed" >&2; exit 1; }
}
materialize
echo "feast: applied and materialized $(redis-cli -p "$RPORT" dbsize) entity hashes"

"$BIN" feast spec --feast-repo "$REPO" >"$WORK/spec.yaml"
"$BIN" validate --spec "$WORK/spec.yaml"
"$BIN" feast scaffold --feast-repo "$REPO" >"$WORK/overlay.yaml"
# Views simple enough for CEL get an entry; the others are left to Python, named.
for view in fare_estimate dispatch_priority; do
  grep -q "^  $view:" "$WORK/overlay.yaml" || { cat "$WORK/overlay.yaml"; echo "feast: scaffold lacks $view" >&2; exit 1; }
done
for view in driver_math trip_label checked_fare; do
  grep -q "^# left to Python: $view (" "$WORK/overlay.yaml" || { cat "$WORK/overlay.yaml"; echo "feast: scaffold does not leave $view to Python" >&2; exit 1; }
done

# The repository as it is: its on-demand views run by Feast's SDK in Oka's
# Python workers (the venv's interpreter), no overlay.
"$BIN" serve --feast-repo "$REPO" --python "$VENV/bin/python" --workers 2 --grpc-listen "127.0.0.1:$GPORT" \
  --header-read-timeout-ms 2000 \
  --listen "127.0.0.1:$PORT" --admin-listen "127.0.0.1:$APORT" >"$WORK/oka.log" 2>&1 &
pids+=($!)
wait_ready() { # ADMIN-PORT LOG: until the last started oka's /readyz answers 200
  for _ in $(seq 1 100); do
    curl -sf "http://127.0.0.1:$1/readyz" >/dev/null 2>&1 && return 0
    kill -0 "${pids[-1]}" 2>/dev/null || { cat "$2"; echo "feast: oka exited" >&2; exit 1; }
    sleep 0.2
  done
  echo "feast: oka was not ready within 20 s" >&2; exit 1
}
wait_ready "$APORT" "$WORK/oka.log"
timeout 300 "$VENV/bin/python" "$HERE/compare.py" "$REPO" "http://127.0.0.1:$PORT"

# Feast's own server on the same Redis: the corpus to both, and Feast's SDK as a
# remote-store client of each.
(cd "$REPO" && exec timeout 900 "$FEAST" serve -h 127.0.0.1 -p "$FPORT" --workers 1) >"$WORK/feast-serve.log" 2>&1 &
pids+=($!)
for _ in $(seq 1 300); do
  curl -sf "http://127.0.0.1:$FPORT/health" >/dev/null 2>&1 && break
  kill -0 "${pids[-1]}" 2>/dev/null || { tail -20 "$WORK/feast-serve.log"; echo "feast: feast serve exited" >&2; exit 1; }
  sleep 0.2
done
curl -sf "http://127.0.0.1:$PORT/health" >/dev/null || { echo "feast: Oka's /health did not answer 200" >&2; exit 1; }
# A malformed body is a 400 with Oka's error body, not a 500.
code=$(curl -s -o "$WORK/bad.json" -w '%{http_code}' -X POST "http://127.0.0.1:$PORT/get-online-features" -d '{"entities": [')
[[ $code == 400 ]] && grep -q '"malformed_request"' "$WORK/bad.json" || {
  cat "$WORK/bad.json"; echo "feast: a malformed body got $code" >&2; exit 1; }
# The stream feature view's materialized rows are served (the corpus compares
# them with feast serve's; this makes sure they are there to compare).
curl -sf -X POST "http://127.0.0.1:$PORT/get-online-features" \
  -d '{"features":["driver_stream:zone","driver_stream:speed"],"entities":{"driver_id":[1001]}}' |
  grep -q '"values":\["north"\]' || { echo "feast: the stream feature view's rows are not served" >&2; exit 1; }
timeout 600 "$VENV/bin/python" "$HERE/corpus.py" "http://127.0.0.1:$FPORT" "http://127.0.0.1:$PORT"
timeout 300 "$VENV/bin/python" "$HERE/remote.py" "$REPO" "http://127.0.0.1:$FPORT" "http://127.0.0.1:$PORT"
# Feast's gRPC feature server (`feast listen`) against Oka's gRPC services,
# through Feast's generated stubs.
(cd "$REPO" && exec timeout 900 "$FEAST" listen --address "127.0.0.1:$LPORT") >"$WORK/feast-listen.log" 2>&1 &
pids+=($!)
timeout 60 "$VENV/bin/python" - "127.0.0.1:$LPORT" <<'PY' || { tail -20 "$WORK/feast-listen.log"; echo "feast: feast listen did not start" >&2; exit 1; }
import sys, grpc
grpc.channel_ready_future(grpc.insecure_channel(sys.argv[1])).result(timeout=55)
PY
timeout 300 "$VENV/bin/python" "$HERE/grpc_compare.py" "127.0.0.1:$LPORT" "127.0.0.1:$GPORT" "http://127.0.0.1:$PORT" 2000
# The gRPC port with --tls-cert: the HTTP port's TLS (a second oka on the same repository).
read -r TPORT TAPORT TGPORT < <(python3 -c '
import socket
s = [socket.socket() for _ in range(3)]
for x in s: x.bind(("127.0.0.1", 0))
print(*[x.getsockname()[1] for x in s])
for x in s: x.close()')
openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=localhost \
  -addext "subjectAltName=IP:127.0.0.1,DNS:localhost" \
  -keyout "$WORK/tls.key" -out "$WORK/tls.pem" >/dev/null 2>&1
"$BIN" serve --feast-repo "$REPO" --spec "$HERE/overlay.yaml" --python "$VENV/bin/python" --workers 1 --grpc-listen "127.0.0.1:$TGPORT" \
  --tls-cert "$WORK/tls.pem" --tls-key "$WORK/tls.key" --shutdown-delay-s 0 \
  --listen "127.0.0.1:$TPORT" --admin-listen "127.0.0.1:$TAPORT" >"$WORK/oka-tls.log" 2>&1 &
pids+=($!)
wait_ready "$TAPORT" "$WORK/oka-tls.log"
timeout 120 "$VENV/bin/python" "$HERE/grpc_tls.py" "127.0.0.1:$TGPORT" "$WORK/tls.pem" "127.0.0.1:$GPORT" \
  "http://127.0.0.1:$APORT"
kill "${pids[-1]}"; wait "${pids[-1]}" 2>/dev/null || true
# --cache tracking on Feast's layout: the corpus through the cache, then Feast's
# own writes reach the cache's readers within 2 s (a third oka).
read -r CPORT CAPORT < <(python3 -c '
import socket
s = [socket.socket() for _ in range(2)]
for x in s: x.bind(("127.0.0.1", 0))
print(*[x.getsockname()[1] for x in s])
for x in s: x.close()')
"$BIN" serve --feast-repo "$REPO" --python "$VENV/bin/python" --workers 1 --cache tracking --shutdown-delay-s 0 \
  --listen "127.0.0.1:$CPORT" --admin-listen "127.0.0.1:$CAPORT" >"$WORK/oka-cache.log" 2>&1 &
pids+=($!)
wait_ready "$CAPORT" "$WORK/oka-cache.log"
timeout 600 "$VENV/bin/python" "$HERE/corpus.py" "http://127.0.0.1:$FPORT" "http://127.0.0.1:$CPORT"
timeout 120 "$VENV/bin/python" "$HERE/tracked.py" "http://127.0.0.1:$FPORT" "http://127.0.0.1:$CPORT" \
  "http://127.0.0.1:$CAPORT"
kill "${pids[-1]}"; wait "${pids[-1]}" 2>/dev/null || true
# Feast's write routes (/push, /write-to-online-store) to both servers, read back
# through both and through Feast's SDK.
timeout 300 "$VENV/bin/python" "$HERE/pushed.py" "$REPO" "http://127.0.0.1:$FPORT" "http://127.0.0.1:$PORT"

# Writes through Oka (POST /v1/ingest) in Feast's layout, read back through Feast's SDK.
ingest() { # FEATURE RECORDS-JSON
  curl -sf -X POST "http://127.0.0.1:$PORT/v1/ingest" -H 'content-type: application/json' \
    -d "{\"feature\":\"$1\",\"records\":$2}" >"$WORK/ingest.json" || {
    tail -5 "$WORK/oka.log"; echo "feast: ingest into $1 failed" >&2; exit 1; }
  grep -q '"rejected":0' "$WORK/ingest.json" || { cat "$WORK/ingest.json"; echo "feast: records rejected" >&2; exit 1; }
}
LATER=$(date -u -d '-1 minute' +%Y-%m-%dT%H:%M:%SZ)
ingest driver_stats "[{\"driver_id\":1001,\"event_timestamp\":\"$LATER\",\"conv_rate\":0.75,\"acc_rate\":0.5,\"avg_daily_trips\":9007199254740993,\"rating\":-2147483648,\"active\":false},{\"driver_id\":1002,\"event_timestamp\":\"2020-01-01T00:00:00Z\",\"conv_rate\":0.0},{\"driver_id\":5005,\"event_timestamp\":\"$LATER\",\"acc_rate\":0.0625,\"avg_daily_trips\":7,\"rating\":1,\"active\":true}]"
ingest driver_profile "[{\"driver_id\":5005,\"avatar\":\"AP9vaw==\",\"signed_up\":\"2021-01-02T03:04:05Z\"}]"
ingest driver_lists "[{\"driver_id\":5005,\"logins\":[\"2021-01-02T03:04:05Z\",null]}]"
ingest driver_customer_trips "[{\"driver_id\":5005,\"customer_id\":\"c-9\",\"trips_together\":12,\"last_rating\":2.5}]"
timeout 300 "$VENV/bin/python" "$HERE/written.py" "$REPO"

# `feast apply` of a new view, then a reload: served without a restart.
cp "$HERE/extra_view.py" "$REPO/"
materialize
curl -sf -X POST "http://127.0.0.1:$APORT/admin/reload" >/dev/null || {
  tail -5 "$WORK/oka.log"; echo "feast: reload failed" >&2; exit 1; }
timeout 300 "$VENV/bin/python" "$HERE/compare.py" "$REPO" "http://127.0.0.1:$PORT" | tee "$WORK/compare2.log"
grep -q . "$WORK/compare2.log"
curl -sf -X POST "http://127.0.0.1:$PORT/v1/features" -H 'content-type: application/json' \
  -d '{"target_features":["driver_extra"],"keys":[{"driver_id":1001}]}' | grep -q '"present"' || {
  echo "feast: the view added after the reload is not served" >&2; exit 1; }
# A reload may not move the store: feature_store.yaml naming another Redis is
# refused with a message saying so, and the running spec keeps serving.
cp "$REPO/feature_store.yaml" "$WORK/feature_store.yaml.kept"
sed -i "s/127.0.0.1:$RPORT/127.0.0.1:1/" "$REPO/feature_store.yaml"
sleep 1.1   # reloads are at least --reload-min-interval-ms (1 s) apart
code=$(curl -s -o "$WORK/reload.json" -w '%{http_code}' -X POST "http://127.0.0.1:$APORT/admin/reload")
cp "$WORK/feature_store.yaml.kept" "$REPO/feature_store.yaml"
[[ $code != 2* ]] && grep -q "online store changed" "$WORK/reload.json" || {
  cat "$WORK/reload.json"; echo "feast: a reload moving the store was not refused (HTTP $code)" >&2; exit 1; }
grep -q "online store changed (redis://127.0.0.1:$RPORT" "$WORK/oka.log" || {
  tail -5 "$WORK/oka.log"; echo "feast: the refused reload is not logged with both stores" >&2; exit 1; }
curl -sf -X POST "http://127.0.0.1:$PORT/v1/features" -H 'content-type: application/json' \
  -d '{"target_features":["driver_extra"],"keys":[{"driver_id":1001}]}' | grep -q '"present"' || {
  echo "feast: serving stopped after a refused reload" >&2; exit 1; }
sleep 1.1
curl -sf -X POST "http://127.0.0.1:$APORT/admin/reload" >/dev/null || {
  tail -5 "$WORK/oka.log"; echo "feast: reload with the store restored failed" >&2; exit 1; }

# Settings Oka cannot honour stop start-up, naming the setting.
refused() { # SETTING SED-EXPRESSION
  local bad=$WORK/bad-repo
  rm -rf "$bad" && cp -r "$REPO" "$bad"
  sed -i "$2" "$bad/feature_store.yaml"
  if out=$("$BIN" serve --feast-repo "$bad" --listen 127.0.0.1:0 --admin-listen 127.0.0.1:0 2>&1); then
    echo "feast: oka served a repository with an unsupported $1" >&2; exit 1
  fi
  grep -q "\`$1\`" <<<"$out" || { echo "$out"; echo "feast: the refusal does not name \`$1\`" >&2; exit 1; }
}
refused online_store.type 's/type: redis/type: sqlite/'
# Without Feast's SDK in the interpreter (python3 here has none), start-up
# stops naming each on-demand view and what to give --python.
if ! python3 -c 'import feast' 2>/dev/null; then
  if out=$("$BIN" serve --feast-repo "$REPO" --python python3 --listen 127.0.0.1:0 --admin-listen 127.0.0.1:0 2>&1); then
    echo "feast: oka served on-demand views with no Feast SDK to run them" >&2; exit 1
  fi
  for want in fare_estimate dispatch_priority trip_label driver_math checked_fare; do
    grep -qF -- "on-demand view \`$want\`: Feast's SDK is not importable" <<<"$out" || {
      echo "$out"; echo "feast: the refusal does not name $want" >&2; exit 1; }
  done
  grep -qF -- "give --python the interpreter of the virtual environment where feast is installed" <<<"$out" || {
    echo "$out"; echo "feast: the refusal does not say what to do" >&2; exit 1; }
fi
# A view Oka's workers cannot run (it aggregates, agg_view.py, in a copy of the
# repository) stops start-up, named with why, its inputs and outputs;
# --feast-skip-unmapped serves the rest and refuses it by name.
AGG=$WORK/agg-repo
rm -rf "$AGG" && cp -r "$REPO" "$AGG" && cp "$HERE/agg_view.py" "$AGG/"
(cd "$AGG" && timeout 300 "$FEAST" apply >"$WORK/agg-apply.log" 2>&1) || {
  cat "$WORK/agg-apply.log"; echo "feast: apply of the aggregating view failed" >&2; exit 1; }
if out=$("$BIN" serve --feast-repo "$AGG" --python "$VENV/bin/python" --listen 127.0.0.1:0 --admin-listen 127.0.0.1:0 2>&1); then
  echo "feast: oka served an on-demand view it cannot run" >&2; exit 1
fi
for want in "\`driver_totals\` (it declares aggregations" "reads driver_stats" "--feast-skip-unmapped"; do
  grep -qF -- "$want" <<<"$out" || { echo "$out"; echo "feast: the refusal lacks: $want" >&2; exit 1; }
done
read -r SPORT SAPORT < <(python3 -c '
import socket
s = [socket.socket() for _ in range(2)]
for x in s: x.bind(("127.0.0.1", 0))
print(*[x.getsockname()[1] for x in s])
for x in s: x.close()')
"$BIN" serve --feast-repo "$AGG" --python "$VENV/bin/python" --feast-skip-unmapped --workers 1 \
  --listen "127.0.0.1:$SPORT" --admin-listen "127.0.0.1:$SAPORT" >"$WORK/oka-skip.log" 2>&1 &
pids+=($!)
wait_ready "$SAPORT" "$WORK/oka-skip.log"
code=$(curl -s -o "$WORK/skip.json" -w '%{http_code}' -X POST "http://127.0.0.1:$SPORT/get-online-features" \
  -d '{"features":["driver_totals:sum_acc_rate"],"entities":{"driver_id":[1001]}}')
[[ $code == 404 ]] && grep -q 'cannot run it and it has no overlay' "$WORK/skip.json" || {
  cat "$WORK/skip.json"; echo "feast: an unmapped view got $code" >&2; exit 1; }
curl -sf -X POST "http://127.0.0.1:$SPORT/get-online-features" \
  -d '{"features":["fare_estimate:expected_fare"],"entities":{"driver_id":[1001],"distance_km":[10.0],"surge":[1.5]}}' |
  grep -q '"values":\[[0-9]' || { echo "feast: --feast-skip-unmapped did not serve the runnable views" >&2; exit 1; }
refused entity_key_serialization_version 's/entity_key_serialization_version: 3/entity_key_serialization_version: 2/'
# The same repository on a Redis Cluster (redis_type: redis_cluster).
bash "$HERE/cluster.sh" "$BIN"
echo "feast: ok"
