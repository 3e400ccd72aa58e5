"""`oka serve --feast-repo --cache tracking`: the read cache on Feast's layout,
kept exact by Redis client tracking (tests/feast/run.sh):

    python tracked.py FEAST_URL OKA_URL OKA_ADMIN_URL

A key read twice through Oka is answered from its cache the second time; then
`feast serve` (Feast's own SDK) writes it, and Oka answers the new value within
2 s (the invalidation Redis pushes), for a single join key (driver_stats), a
compound one (driver_customer_trips, through a push source) and an on-demand
view stored by its transformation (stored_score, which shares driver_stats'
hash). Each read is compared with feast serve's.
"""

import datetime
import json
import sys
import time
import urllib.request

from pushed import post  # the same request helper


def metric(admin: str, name: str) -> float:
    with urllib.request.urlopen(admin + "/metrics", timeout=10) as r:
        for line in r.read().decode().splitlines():
            if line.startswith(name + " ") or line.startswith(name + "{"):
                return float(line.rsplit(" ", 1)[1])
    raise SystemExit(f"feast-tracked: no metric {name} at {admin}/metrics")


fails = []


def check(ok: bool, what: str):
    if not ok:
        fails.append(what)
        print("FAIL", what)


def values(url: str, features: list, entities: dict) -> list:
    status, body = post(url, "/get-online-features", {"features": features, "entities": entities})
    if status != 200:
        raise SystemExit(f"feast-tracked: {url} answered {status}: {body}")
    answer = json.loads(body)
    by_name = dict(zip(answer["metadata"]["feature_names"], answer["results"]))
    return [by_name[f.split(":")[1]]["values"] for f in features]


def now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat()


def changes(feast: str, oka: str, features: list, entities: dict, write, want: list):
    """Reads through Oka until cached, writes through feast serve, and waits
    for Oka to answer `want`."""
    values(oka, features, entities)
    hits = metric(ADMIN, "oka_cache_hits_total")
    before = values(oka, features, entities)
    check(metric(ADMIN, "oka_cache_hits_total") > hits, f"{features} read twice was not answered from the cache")
    check(before != want, f"{features}: already {want} before the write")
    status, body = write()
    check(status == 200, f"the write through feast serve: {status} {body}")
    deadline = time.monotonic() + 2.0
    got = before
    while time.monotonic() < deadline:
        got = values(oka, features, entities)
        if got == want:
            break
        time.sleep(0.02)
    check(got == want, f"{features}: Oka answers {got} 2 s after Feast wrote {want}")
    check(values(feast, features, entities) == want, f"{features}: feast serve answers {values(feast, features, entities)}")


def main() -> int:
    global ADMIN
    feast, oka, ADMIN = sys.argv[1:4]
    check(metric(ADMIN, "oka_cache_enabled") == 1, "the read cache is not serving (tracking is not on)")
    driver = {"driver_id": [7101]}
    stats = ["driver_stats:conv_rate", "driver_stats:acc_rate"]
    for rate in (0.25, 0.5):
        changes(feast, oka, stats, driver, lambda rate=rate: post(feast, "/write-to-online-store", {
            "feature_view_name": "driver_stats", "df": {
                "driver_id": [7101], "conv_rate": [rate], "acc_rate": [rate], "avg_daily_trips": [1],
                "rating": [1], "active": [True], "event_timestamp": [now()], "created": [now()]}}),
            [[rate], [rate]])
    pair = {"driver_id": [7101], "customer_id": ["c-101"]}
    trips = ["driver_customer_trips:trips_together"]
    changes(feast, oka, trips, pair, lambda: post(feast, "/push", {
        "push_source_name": "trip_push", "to": "online", "df": {
            "driver_id": [7101], "customer_id": ["c-101"], "trips_together": [3], "last_rating": [4.0],
            "event_timestamp": [now()], "created": [now()]}}), [[3]])
    changes(feast, oka, ["stored_score:stored_score"], driver, lambda: post(feast, "/write-to-online-store", {
        "feature_view_name": "stored_score", "df": {"driver_id": [7101], "acc_rate": [0.75]}}), [[75.0]])
    check(metric(ADMIN, "oka_cache_invalidations_total") > 0, "no invalidation was counted")
    if fails:
        print(f"feast-tracked: {len(fails)} failure(s)")
        return 1
    print("feast-tracked: Oka's cache on Feast's layout answers Feast's writes within 2 s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
