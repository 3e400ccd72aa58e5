#!/usr/bin/env bash
# Feast's route against Oka's own for the same read, in instructions per request
# (callgrind; issue 43's target: a Feast request within 5% of Oka's route). One
# `oka serve --feast-repo benches/peers/feast_repo` (one worker) on Feast's Redis
# data, counted by benches/load/instructions.sh once per request kind:
#
#   feast-1    POST /get-online-features, the 20 features of `wide`, 1 entity
#   oka-1      POST /v1/features, target_features ["wide"], the same entity
#   feast-50   as feast-1 for 50 entities
#   oka-50     as oka-1 for 50 keys
#
# Both read the same hash per entity and answer the same 20 values (Feast's with
# the entity column first, PRESENT too: 21 statuses an entity); the answers'
# shapes differ (Feast's: a column per feature with a status and an event time per
# value; Oka's: a record per key), which is part of what is compared.
#
#   bash benches/peers/feast_instructions.sh [PATH/TO/oka]   (default target/release/oka)
#
# CALLGRIND_DIR=DIR keeps each run's profile as DIR/NAME.1 (for callgrind_annotate).
# Needs valgrind, redis-server, python3, curl, and Feast (feast_setup.sh installs it
# in target/feast/venv, as tests/feast/run.sh does). Binds 127.0.0.1 only; stops what
# it starts. About five minutes.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
ROOT=$PWD
HERE=$ROOT/benches/peers
BIN=${1:-target/release/oka}
KEYS=${KEYS:-10000}
OUT=$(mktemp -d)
PIDS=()
cleanup() {
    local pid
    for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
    for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
    rm -rf "$OUT"
}
trap cleanup EXIT
# shellcheck source=benches/peers/feast_setup.sh
source "$HERE/feast_setup.sh"
feast_venv
feast_data

features=$(for i in $(seq 0 19); do printf '"wide:f%02d",' "$i"; done | sed 's/,$//')
serve="--feast-repo $HERE/feast_repo --spec $HERE/feast_overlay.yaml"
count() { # NAME BATCH (Feast's or Oka's request by NAME's prefix)
    local name=$1 batch=$2 line
    [[ -z ${CALLGRIND_DIR:-} ]] || export CALLGRIND_OUT=$CALLGRIND_DIR/$name
    if [[ $name == feast-* ]]; then
        line=$(SERVE=$serve BATCH=$batch REQ_PATH=/get-online-features \
            BODY="{\"features\":[$features],\"entities\":{\"id\":[{keys}]}}" \
            KEY='"test-id-%d"' PRESENT='"PRESENT"' PER_KEY=21 \
            bash benches/load/instructions.sh "$BIN")
    else
        line=$(SERVE=$serve BATCH=$batch \
            BODY='{"target_features":["wide"],"keys":[{keys}]}' \
            bash benches/load/instructions.sh "$BIN")
    fi
    [[ $line =~ ([0-9]+)\ instructions ]] || { echo "feast_instructions: $name: no count" >&2; exit 1; }
    echo "$name ${BASH_REMATCH[1]}"
}
results=()
for name in feast-1 oka-1 feast-50 oka-50; do
    results+=("$(count "$name" "${name##*-}")") || exit 1
    echo "${results[-1]}" >&2
done
echo "| request | instructions | Feast ÷ Oka |"
echo "|---|---:|---:|"
for b in 1 50; do
    f=$(printf '%s\n' "${results[@]}" | awk -v n="feast-$b" '$1 == n {print $2}')
    o=$(printf '%s\n' "${results[@]}" | awk -v n="oka-$b" '$1 == n {print $2}')
    echo "| $b entit$([[ $b == 1 ]] && echo y || echo ies), Feast's route | $f | $(python3 -c "print(f'{$f / $o:.3f}')") |"
    echo "| $b entit$([[ $b == 1 ]] && echo y || echo ies), Oka's route | $o | 1 |"
done
