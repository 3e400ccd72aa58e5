"""Sends the same requests to `feast serve` and to Oka's /get-online-features
(`oka serve --feast-repo`, same Redis) and compares the answers as parsed JSON:

    python corpus.py FEAST_URL OKA_URL

The corpus (more than 200 requests): every feature of every view alone and by
view, views together, a feature service (with its aliased projection), with and
without `full_feature_names`, present, missing and null values, a compound key,
keys given as numbers, integral floats and strings; and requests both refuse.

Two intended differences are normalised before comparing: Feast's null
timestamp (NaT, which `feast serve` writes as -9223372036854775808) is Oka's
null; and `feast serve` orders the
features of its answer by an internal set (the order changes between processes),
Oka in request order; both pair `metadata.feature_names` with `results`, so each
answer is compared as {name: result}. Requests Feast refuses are checked to be
refused by Oka too (4xx), with Oka's JSON error body (docs/migrating-from-feast.md).
"""

import itertools
import json
import sys
import urllib.error
import urllib.request

VIEWS = {
    "driver_stats": ["conv_rate", "acc_rate", "avg_daily_trips", "rating", "active"],
    "driver_profile": ["name", "avatar", "signed_up"],
    "driver_lists": ["ratings32", "trips64", "scores32", "scores64", "tags", "blobs", "flags", "logins"],
    "customer_profile": ["tier", "lifetime_value"],
    "driver_customer_trips": ["trips_together", "last_rating"],
    "driver_stream": ["speed", "zone"],
}
DRIVERS = [[1001], [1002, 1003], [1001, 4242, 1002], ["1001", 1003.0], [4242]]
CUSTOMERS = [["c-1"], ["c-2", "nobody"], ["c-1", "c-2"]]


def post(url: str, body: dict):
    req = urllib.request.Request(
        url + "/get-online-features",
        data=json.dumps(body).encode(),
        headers={"content-type": "application/json"},
    )
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, json.load(r)
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode(errors="replace")


NAT = -(2**63)


def nat_as_null(v):
    """Feast's server writes its null timestamp (NaT) as the int64 it stores;
    Oka writes null, what Feast's SDK reads it as (an intended difference)."""
    if isinstance(v, list):
        return [nat_as_null(x) for x in v]
    return None if v == NAT else v


def by_name(answer: dict) -> dict:
    names = answer["metadata"]["feature_names"]
    assert len(names) == len(set(names)), names
    return {
        n: {**r, "values": [nat_as_null(v) for v in r["values"]]}
        for n, r in zip(names, answer["results"])
    }


def entities_for(views):
    keys = set()
    for v in views:
        keys |= {"customer_id"} if v == "customer_profile" else set()
        keys |= {"driver_id"} if v.startswith("driver") else set()
        keys |= {"driver_id", "customer_id"} if v == "driver_customer_trips" else set()
    if keys == {"driver_id"}:
        return [{"driver_id": d} for d in DRIVERS]
    if keys == {"customer_id"}:
        return [{"customer_id": c} for c in CUSTOMERS]
    return [
        {"driver_id": [1001, 1002, 4242], "customer_id": ["c-1", "c-1", "c-2"]},
        {"customer_id": ["c-2"], "driver_id": [1001]},
    ]


def corpus():
    for view, features in VIEWS.items():
        for f in features:
            for ents in entities_for([view]):
                for full in (False, True):
                    yield {"features": [f"{view}:{f}"], "entities": ents,
                           "full_feature_names": full}
        for ents in entities_for([view]):
            for full in (False, True):
                yield {"features": [f"{view}:{f}" for f in features], "entities": ents,
                       "full_feature_names": full}
    for a, b in itertools.combinations(["driver_stats", "driver_profile", "driver_lists"], 2):
        for ents in entities_for([a, b]):
            yield {"features": [f"{a}:{VIEWS[a][0]}", f"{b}:{VIEWS[b][-1]}"], "entities": ents}
    for ents in entities_for(["customer_profile", "driver_customer_trips"]):
        yield {"features": ["customer_profile:tier", "driver_customer_trips:trips_together",
                            "driver_customer_trips:last_rating"], "entities": ents}
    for ents in entities_for(["driver_stats"]):
        for full in (False, True):
            yield {"feature_service": "driver_activity", "entities": ents, "full_feature_names": full}
    yield from on_demand()


# Drivers and customers every on-demand input is present for (a missing one
# makes `feast serve` fail with 500: see ON_DEMAND_DIFFERENCES).
def on_demand():
    """The overlay's views (tests/feast/overlay.yaml) beside Feast's Python:
    request data the same on every row and different per row (Oka computes one
    request per distinct set), with other views' features, compound keys."""
    fare = "fare_estimate:expected_fare"
    for distance, surge in (([10.0, 2.5], [1.5, 1.0]), ([3.0, 3.0], [2.0, 2.0]),
                            ([0.5, 120.25], [1.0, 0.75])):
        ents = {"driver_id": [1001, 1002], "distance_km": distance, "surge": surge}
        yield {"features": [fare], "entities": ents}
        yield {"features": [fare, "driver_stats:acc_rate", "driver_profile:name"], "entities": ents}
        yield {"features": ["driver_stats:conv_rate", fare], "entities": ents}
    ents = {"driver_id": [1002, 1001, 1002], "distance_km": [1.0, 2.0, 1.0], "surge": [2.0, 1.0, 2.0]}
    yield {"features": [fare], "entities": ents}
    pairs = {"driver_id": [1001, 1002, 1001], "customer_id": ["c-1", "c-2", "c-2"]}
    yield {"features": ["dispatch_priority:priority"], "entities": pairs}
    yield {"features": ["dispatch_priority:priority", "customer_profile:lifetime_value"],
           "entities": pairs}
    yield {"features": ["dispatch_priority:priority", fare],
           "entities": {**pairs, "distance_km": [1.0, 2.0, 3.0], "surge": [1.0, 1.0, 1.0]}}
    # Run by Feast's SDK in Oka's Python workers: numpy, Float32 outputs (one a list), a
    # None input handled by the view (1003's avg_daily_trips).
    math_ = ["driver_math:acc_sqrt", "driver_math:trips_sign", "driver_math:rating_third",
             "driver_math:rating_thirds"]
    for drivers in ([1001], [1002, 1003], [1003, 1001, 1002]):
        yield {"features": math_, "entities": {"driver_id": drivers}}
        yield {"features": [math_[2], "driver_stats:rating"], "entities": {"driver_id": drivers}}
    yield {"features": [math_[0], fare, "checked_fare:checked_fare"],
           "entities": {"driver_id": [1001, 1002], "distance_km": [4.0, 0.0], "surge": [1.0, 1.0]}}
    # Transformed by `feast materialize` and stored (4242: none, null as Feast answers).
    for drivers in ([1001], [1003, 4242, 1002]):
        yield {"features": ["stored_score:stored_score"], "entities": {"driver_id": drivers}}
        yield {"features": ["stored_score:stored_score", "driver_stats:acc_rate"],
               "entities": {"driver_id": drivers}}
    # singleton, two source views, request data, bytes input, string formatting
    # (one row a request: see differences()).
    label = ["trip_label:label", "trip_label:log_rating", "trip_label:avatar_len"]
    for driver, distance, surge in ((1001, 10.0, 1.5), (1002, 2.345, 1.0), (1002, 0.5, 3.25)):
        ents = {"driver_id": [driver], "distance_km": [distance], "surge": [surge]}
        yield {"features": label, "entities": ents}
        yield {"features": [label[0], "driver_profile:name", math_[1]], "entities": ents}


REFUSED = [
    {"features": ["nope:x"], "entities": {"driver_id": [1]}},
    {"features": ["driver_stats:nope"], "entities": {"driver_id": [1]}},
    {"features": ["driver_stats:conv_rate"], "entities": {"customer_id": ["c-1"]}},
    {"features": ["driver_stats:conv_rate"], "entities": {"driver_id": [1001], "customer_id": ["a", "b"]}},
    {"features": [], "entities": {"driver_id": [1001]}},
    {"feature_service": "nope", "entities": {"driver_id": [1001]}},
    {"features": ["driver_stats:conv_rate"], "entities": {"driver_id": ["abc"]}},
    {"features": ["driver_stats:conv_rate"]},
    # Request data missing.
    {"features": ["fare_estimate:expected_fare"], "entities": {"driver_id": [1001], "distance_km": [1.0]}},
]


def differences(feast: str, oka: str) -> int:
    """Where `feast serve` 0.67 fails and Oka answers (intended differences,
    docs/migrating-from-feast.md): an on-demand view whose input is missing
    (Feast's Python raises, 500; Oka answers null), and an on-demand view with
    `full_feature_names` (Feast answers without its column; Oka with it)."""
    body = {"features": ["fare_estimate:expected_fare"],
            "entities": {"driver_id": [1001, 4242], "distance_km": [1.0, 1.0], "surge": [1.0, 1.0]}}
    fs, _ = post(feast, body)
    os_, oa = post(oka, body)
    fare = by_name(oa).get("expected_fare", {}).get("values") if os_ == 200 else None
    assert fs == 500 and fare is not None and fare[0] is not None and fare[1] is None, (fs, os_, oa)
    body = {"features": ["fare_estimate:expected_fare"], "full_feature_names": True,
            "entities": {"driver_id": [1001], "distance_km": [10.0], "surge": [1.5]}}
    (fs, fa), (os_, oa) = post(feast, body), post(oka, body)
    assert fs == 200 and "fare_estimate__expected_fare" not in fa["metadata"]["feature_names"], fa
    assert os_ == 200 and by_name(oa)["fare_estimate__expected_fare"]["values"] == [28.5], oa
    # A view that raises: feast serve answers 500 with the exception's text;
    # Oka 500 `udf_failed`, naming the feature, the row and the exception.
    body = {"features": ["checked_fare:checked_fare"],
            "entities": {"driver_id": [1001, 1002], "distance_km": [1.0, -2.5], "surge": [1.0, 1.0]}}
    (fs, fa), (os_, oa) = post(feast, body), post(oka, body)
    assert fs == 500 and "must not be negative" in str(fa), (fs, fa)
    oa = json.loads(oa) if os_ == 500 else {"error": {"code": os_, "message": oa}}
    message = oa["error"]["message"]
    assert oa["error"]["code"] == "udf_failed" and "`checked_fare`" in message \
        and "entity row 2" in message and "ValueError: distance_km must not be negative" in message, (os_, oa)
    # singleton=True over several rows: feast serve 0.67 answers the first
    # row's value alone (Feast's SDK calls the view with the first row); Oka
    # one per row, each as a one-row request answers it.
    rows = {"driver_id": [1001, 1002], "distance_km": [10.0, 10.0], "surge": [1.5, 1.5]}
    body = {"features": ["trip_label:label"], "entities": rows}
    (fs, fa), (os_, oa) = post(feast, body), post(oka, body)
    assert fs == 200 and len(by_name(fa)["label"]["values"]) == 1, fa
    labels = by_name(oa)["label"]["values"] if os_ == 200 else None
    alone = [by_name(post(feast, {"features": ["trip_label:label"],
                                  "entities": {k: [v[i]] for k, v in rows.items()}})[1])["label"]["values"][0]
             for i in range(2)]
    assert labels == alone, (labels, alone)
    return 4


def main() -> int:
    feast, oka = sys.argv[1], sys.argv[2]
    compared = 0
    for body in corpus():
        fs, fa = post(feast, body)
        os_, oa = post(oka, body)
        if fs != 200 or os_ != 200:
            print(f"FAIL {json.dumps(body)}: feast {fs} {fa}, oka {os_} {oa}")
            return 1
        if by_name(fa) != by_name(oa):
            print(f"FAIL {json.dumps(body)}:\n feast {json.dumps(by_name(fa), sort_keys=True)}\n oka   {json.dumps(by_name(oa), sort_keys=True)}")
            return 1
        compared += 1
    for body in REFUSED:
        fs, fa = post(feast, body)
        os_, oa = post(oka, body)
        if fs == 200 or not 400 <= os_ < 500 or "error" not in oa:
            print(f"FAIL refusal {json.dumps(body)}: feast {fs} {fa}, oka {os_} {oa}")
            return 1
        compared += 1
    compared += differences(feast, oka)
    print(f"feast-corpus: {compared} requests, every answer equal to feast serve's "
          "(or differing as docs/migrating-from-feast.md says)")
    return 0 if compared >= 200 else 1


if __name__ == "__main__":
    sys.exit(main())
