#!/bin/sh
# The `helm test` check (templates/tests/test-request.yaml); helm/ci_check.sh also runs it
# against a local `oka serve --demo`. One feature request on the native route and one on
# Volga's route, each checked for status `present` and the expected value.
#
# Environment: OKA_URL (http://host:port of the serving port), FEATURE, ENTITY_ID,
# MULTIPLIER, EXPECTED, and KEYS_FILE (optional: Oka's API keys file; the first key with
# the read scope is sent).
set -eu

key=""
if [ -n "${KEYS_FILE:-}" ]; then
  key=$(awk '!/^[[:space:]]*#/ && NF >= 2 && $2 ~ /(^|,)read(,|$)/ { print $1; exit }' "$KEYS_FILE")
  if [ -z "$key" ]; then
    echo "FAIL: no key with the read scope in $KEYS_FILE"
    exit 1
  fi
fi

# check NAME PATH BODY: POST BODY to PATH until the answer is `present` (the data may
# still be loading right after an install), then compare the value.
check() {
  name=$1 path=$2 body=$3
  set -- -sS --max-time 5 -H 'content-type: application/json' -d "$body"
  if [ -n "$key" ]; then set -- "$@" -H "X-API-Key: $key"; fi
  resp="" i=0
  while [ "$i" -lt 20 ]; do
    i=$((i + 1))
    resp=$(curl "$@" "$OKA_URL$path" 2>&1) || resp="curl failed: $resp"
    case "$resp" in
      *'"present"'* | *'"value":'*) break ;;
    esac
    sleep 3
  done
  value=$(printf '%s' "$resp" | sed -n 's/.*"value":\([-0-9.eE+]*\).*/\1/p')
  if [ -z "$value" ]; then
    echo "FAIL $name: no value in the answer: $resp"
    return 1
  fi
  if ! awk -v v="$value" -v e="$EXPECTED" 'BEGIN { d = v - e; if (d < 0) d = -d; exit !(d < 1e-9) }'; then
    echo "FAIL $name: value $value, expected $EXPECTED: $resp"
    return 1
  fi
  echo "ok $name: $FEATURE($ENTITY_ID, multiplier=$MULTIPLIER) = $value"
}

check native /v1/features \
  "{\"target_features\":[\"$FEATURE\"],\"keys\":[{\"id\":\"$ENTITY_ID\"}],\"udf_args\":{\"$FEATURE\":{\"multiplier\":$MULTIPLIER}}}"
check volga /on_demand_compute \
  "{\"target_features\":[\"$FEATURE\"],\"feature_keys\":{\"$FEATURE\":[{\"id\":\"$ENTITY_ID\"}]},\"udf_args\":{\"$FEATURE\":{\"multiplier\":$MULTIPLIER}}}"
