#!/usr/bin/env bash
# Feast's layout on a Redis Cluster (`online_store.redis_type: redis_cluster`),
# against real Feast: a three-primary cluster started here, the test repository
# applied and materialized by Feast onto it, then `feast serve` and
# `oka serve --feast-repo` on it answer corpus.py's requests alike, and
# pushed.py's writes through both read back alike through both and Feast's SDK.
#
#   bash tests/feast/cluster.sh PATH/TO/oka      (tests/feast/run.sh runs it last)
#
# Expects run.sh's venv (target/feast/venv) and data (target/feast/repo/data).
# Binds 127.0.0.1 only; stops what it starts by PID. About a minute.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
BIN=${1:?usage: tests/feast/cluster.sh PATH/TO/oka}
WORK=$ROOT/target/feast/cluster
VENV=$ROOT/target/feast/venv
FEAST=$VENV/bin/feast
[[ -x $FEAST && -d $ROOT/target/feast/repo/data ]] || { echo "feast-cluster: run tests/feast/run.sh first" >&2; exit 2; }
rm -rf "$WORK" && mkdir -p "$WORK"

# Ports below 55,000: a cluster node's bus port is its port + 10,000.
read -r N1 N2 N3 PORT APORT FPORT < <(python3 -c '
import socket
out = []
while len(out) < 6:
    s = socket.socket(); s.bind(("127.0.0.1", 0)); p = s.getsockname()[1]; s.close()
    if p < 55000 and p not in out: out.append(p)
print(*out)')

pids=()
cleanup() {
  for pid in "${pids[@]}"; do
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
}
trap cleanup EXIT

for port in "$N1" "$N2" "$N3"; do
  mkdir -p "$WORK/node-$port"
  (cd "$WORK/node-$port" && exec redis-server --port "$port" --bind 127.0.0.1 --cluster-enabled yes \
    --cluster-config-file nodes.conf --save "" --appendonly no) >"$WORK/node-$port.log" 2>&1 &
  pids+=($!)
done
for port in "$N1" "$N2" "$N3"; do
  for _ in $(seq 1 100); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.1; done
done
redis-cli --cluster create "127.0.0.1:$N1" "127.0.0.1:$N2" "127.0.0.1:$N3" --cluster-yes >"$WORK/create.log" 2>&1 || {
  cat "$WORK/create.log"; echo "feast-cluster: the cluster was not created" >&2; exit 1; }
for _ in $(seq 1 100); do
  redis-cli -p "$N1" cluster info | grep -q 'cluster_state:ok' && break
  sleep 0.1
done

REPO=$WORK/repo
cp -r "$HERE/repo" "$REPO"
cp -r "$ROOT/target/feast/repo/data" "$REPO/" && rm -f "$REPO/data/registry.db"
sed -i "s/connection_string: .*/connection_string: \"127.0.0.1:$N1,127.0.0.1:$N2,127.0.0.1:$N3\"\n  redis_type: redis_cluster/" \
  "$REPO/feature_store.yaml"
grep -q "redis_type: redis_cluster" "$REPO/feature_store.yaml"
(cd "$REPO" && timeout 300 "$FEAST" apply >"$WORK/apply.log" 2>&1 &&
  timeout 300 "$FEAST" materialize "$(date -u -d '-5 days' +%Y-%m-%dT%H:%M:%S)" \
    "$(date -u -d '+1 minute' +%Y-%m-%dT%H:%M:%S)" >"$WORK/materialize.log" 2>&1) || {
  cat "$WORK/apply.log" "$WORK/materialize.log" 2>/dev/null; echo "feast-cluster: apply/materialize failed" >&2; exit 1; }
keys=0
for port in "$N1" "$N2" "$N3"; do keys=$((keys + $(redis-cli -p "$port" dbsize))); done
[[ $keys -gt 0 ]] || { echo "feast-cluster: Feast wrote nothing to the cluster" >&2; exit 1; }

"$BIN" serve --feast-repo "$REPO" --spec "$HERE/overlay.yaml" --python "$VENV/bin/python" --workers 1 \
  --listen "127.0.0.1:$PORT" --admin-listen "127.0.0.1:$APORT" >"$WORK/oka.log" 2>&1 &
pids+=($!)
(cd "$REPO" && exec timeout 600 "$FEAST" serve -h 127.0.0.1 -p "$FPORT" --workers 1) >"$WORK/feast-serve.log" 2>&1 &
pids+=($!)
for url in "http://127.0.0.1:$APORT/readyz" "http://127.0.0.1:$FPORT/health"; do
  for _ in $(seq 1 300); do curl -sf "$url" >/dev/null 2>&1 && break; sleep 0.2; done
  curl -sf "$url" >/dev/null || { tail -5 "$WORK/oka.log" "$WORK/feast-serve.log"; echo "feast-cluster: $url did not answer" >&2; exit 1; }
done
grep -q "redis-cluster://" "$WORK/oka.log" || { tail -5 "$WORK/oka.log"; echo "feast-cluster: oka did not open a cluster store" >&2; exit 1; }
timeout 600 "$VENV/bin/python" "$HERE/corpus.py" "http://127.0.0.1:$FPORT" "http://127.0.0.1:$PORT" | sed 's/^/cluster: /'
timeout 300 "$VENV/bin/python" "$HERE/pushed.py" "$REPO" "http://127.0.0.1:$FPORT" "http://127.0.0.1:$PORT" \
  2>"$WORK/pushed.err" | sed 's/^/cluster: /' || { tail -20 "$WORK/pushed.err"; exit 1; }
echo "feast-cluster: ok ($keys keys over 3 primaries)"
