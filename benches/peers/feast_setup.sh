# shellcheck shell=bash
# Sourced by the Feast-API benches (feast_api.sh, feast_instructions.sh): Feast's
# venv, a Redis and Feast's data in it. Needs ROOT, HERE (benches/peers), OUT, KEYS
# and a PIDS array (every process started is appended, for the caller to stop).
#
# feast_venv: Feast from tests/feast/requirements.txt in target/feast/venv (the same
#   venv as tests/feast/run.sh: pip runs only when that file changes).
# feast_data: a redis-server on a free 127.0.0.1 port (no persistence; REDIS_PORT,
#   REDIS_PID), `feast apply` of benches/peers/feast_repo, then feast_load.py: KEYS
#   ids, test_feature and the 20 features of `wide`, through
#   FeatureStore.write_to_online_store. Sets FEAST (the feast command, as an array).
VENV=$ROOT/target/feast/venv

feast_venv() {
    [[ -x $VENV/bin/python ]] || python3 -m venv "$VENV"
    local want
    want=$(sha256sum "$ROOT/tests/feast/requirements.txt" | cut -d' ' -f1)
    if [[ "$(cat "$VENV/.requirements.sha256" 2>/dev/null || true)" != "$want" ]]; then
        "$VENV/bin/python" -m pip install -q --disable-pip-version-check -r "$ROOT/tests/feast/requirements.txt"
        echo "$want" >"$VENV/.requirements.sha256"
    fi
}

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

feast_data() {
    local cmd
    for cmd in redis-server redis-cli; do
        command -v "$cmd" >/dev/null || {
            echo "feast_data: \`$cmd\` is not installed (Debian: apt-get install redis-server)" >&2
            return 1
        }
    done
    mkdir -p "$OUT/feast_data"
    REDIS_PORT=$(free_port)
    redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --save "" --appendonly no >"$OUT/redis.log" 2>&1 &
    REDIS_PID=$!
    PIDS+=("$REDIS_PID")
    for _ in $(seq 100); do redis-cli -p "$REDIS_PORT" ping >/dev/null 2>&1 && break; sleep 0.1; done
    export PEERS_REDIS_PORT=$REDIS_PORT PEERS_FEAST_DATA=$OUT/feast_data
    FEAST=("$VENV/bin/feast" -c "$HERE/feast_repo" --log-level WARNING)
    # The logs live in $OUT, which the caller removes: on failure, their end is
    # printed here.
    if ! (cd "$HERE/feast_repo" && "${FEAST[@]}" apply) >"$OUT/feast-apply.log" 2>&1 ||
        ! "$VENV/bin/python" "$HERE/feast_load.py" "$HERE/feast_repo" "$KEYS" 2>>"$OUT/feast-apply.log" >&2; then
        echo "feast_data: \`feast apply\` or feast_load.py failed; the end of its log:" >&2
        tail -n 20 "$OUT/feast-apply.log" >&2
        return 1
    fi
}
