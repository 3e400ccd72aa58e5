"""Feast's write routes, `POST /push` and `POST /write-to-online-store`, sent to
`feast serve` and to `oka serve --feast-repo` on the same Redis
(tests/feast/run.sh):

    python pushed.py REPO_DIR FEAST_URL OKA_URL

The same rows go to each server under different entity keys (Oka: driver 7001,
customer c-71; Feast: 7002, c-72): every view's every type (a Float32 given as
0.1, int64 beyond 2**53, lists, a unix timestamp in seconds, nulls), a push
source (one feeding a stream feature view) and a view written directly. Both servers answer alike (200: an empty
body for /push, `null` for /write-to-online-store), and what each wrote reads
back the same through Feast's SDK on the Redis store and through both servers'
/get-online-features. Feast's SDK as a remote-store client of each writes
(`write_to_online_store`, `push`) alike. Then what only Oka does, asserted as such: bytes in base64
(Feast's server cannot take bytes from JSON), a request with one bad row writes
none of its rows (400), `to: offline` is refused (400) and writes nothing, a
record older than the stored one is skipped as Feast skips it. An on-demand view
written to the online store (write_to_online_store=True): each server transforms
what is written to it and stores the result stamped with the write's time, and
both read it back alike (with `transform_on_write: false` too); a transformation
that raises is a clear 500 `udf_failed` from Oka, and writes nothing.
"""

import datetime
import json
import sys
import time
import urllib.error
import urllib.request
import warnings

warnings.filterwarnings("ignore")

from feast import FeatureStore  # noqa: E402

WHEN = "2026-12-04T10:00:00Z"
LISTS = {
    "ratings32": [[1, -2147483648]],
    "trips64": [[9007199254740993, -1]],
    "scores32": [[0.1, 2.5]],
    "scores64": [[0.1, -1e300]],
    "tags": [["a", ""]],
    "blobs": [None],
    "flags": [[True, False]],
    "logins": [[1609556645]],
}
# The features written as null (the others must read back as a value).
NULLS = {"avatar", "blobs", "tier"}
FEATURES = {
    "driver_stats": ["conv_rate", "acc_rate", "avg_daily_trips", "rating", "active"],
    "driver_profile": ["name", "avatar", "signed_up"],
    "driver_lists": list(LISTS),
    "customer_profile": ["tier", "lifetime_value"],
    "driver_customer_trips": ["trips_together", "last_rating"],
    "driver_stream": ["speed", "zone"],
}


def post(url: str, route: str, body: dict):
    req = urllib.request.Request(
        url + route, data=json.dumps(body).encode(), headers={"content-type": "application/json"}
    )
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode(errors="replace")


def writes(driver: int, customer: str) -> list:
    """The write requests for one driver and one customer (with Feast's
    `created` column, which Feast requires and Oka ignores)."""
    t = {"event_timestamp": [WHEN], "created": [WHEN]}
    return [
        ("/write-to-online-store", {"feature_view_name": "driver_stats", "df": {
            "driver_id": [driver], "conv_rate": [0.1], "acc_rate": [0.123456789012345],
            "avg_daily_trips": [9007199254740993], "rating": [-3], "active": [True], **t}}),
        ("/write-to-online-store", {"feature_view_name": "driver_profile", "df": {
            "driver_id": [driver], "name": ["Zoë"], "avatar": [None], "signed_up": [1609556645], **t}}),
        ("/write-to-online-store", {"feature_view_name": "driver_lists", "df": {
            "driver_id": [driver], **LISTS, **t}}),
        ("/write-to-online-store", {"feature_view_name": "customer_profile", "df": {
            "customer_id": [customer], "tier": [None], "lifetime_value": [12.5], **t}}),
        ("/push", {"push_source_name": "trip_push", "to": "online", "df": {
            "driver_id": [driver], "customer_id": [customer], "trips_together": [3],
            "last_rating": [0.1], **t}}),
        ("/push", {"push_source_name": "driver_stream_push", "to": "online", "df": {
            "driver_id": [driver], "speed": [88.25], "zone": ["south"], **t}}),
    ]


def sdk_values(fs: FeatureStore, view: str, rows: list) -> dict:
    refs = [f"{view}:{f}" for f in FEATURES[view]]
    got = fs.get_online_features(features=refs, entity_rows=rows).to_dict()
    return {f: got[f] for f in FEATURES[view]}


def served_values(url: str, view: str, entities: dict) -> dict:
    refs = [f"{view}:{f}" for f in FEATURES[view]]
    status, body = post(url, "/get-online-features", {"features": refs, "entities": entities})
    assert status == 200, f"{url} {view}: {status} {body}"
    answer = json.loads(body)
    return {n: r["values"] for n, r in zip(answer["metadata"]["feature_names"], answer["results"])}


def main() -> int:
    repo, feast_url, oka_url = sys.argv[1:4]
    fails = []

    def check(ok: bool, what: str):
        if not ok:
            fails.append(what)
            print(f"FAIL {what}")

    for (route, oka_body), (_, feast_body) in zip(writes(7001, "c-71"), writes(7002, "c-72")):
        a, b = post(oka_url, route, oka_body), post(feast_url, route, feast_body)
        name = oka_body.get("feature_view_name") or oka_body["push_source_name"]
        check(a == b, f"{route} {name}: Oka {a}, Feast {b}")

    fs = FeatureStore(repo_path=repo)
    pairs = {
        "driver_stats": ([{"driver_id": 7001}, {"driver_id": 7002}], {"driver_id": [7001, 7002]}),
        "driver_profile": ([{"driver_id": 7001}, {"driver_id": 7002}], {"driver_id": [7001, 7002]}),
        "driver_lists": ([{"driver_id": 7001}, {"driver_id": 7002}], {"driver_id": [7001, 7002]}),
        "customer_profile": (
            [{"customer_id": "c-71"}, {"customer_id": "c-72"}], {"customer_id": ["c-71", "c-72"]}),
        "driver_customer_trips": (
            [{"driver_id": 7001, "customer_id": "c-71"}, {"driver_id": 7002, "customer_id": "c-72"}],
            {"driver_id": [7001, 7002], "customer_id": ["c-71", "c-72"]}),
        "driver_stream": ([{"driver_id": 7001}, {"driver_id": 7002}], {"driver_id": [7001, 7002]}),
    }
    for view, (rows, entities) in pairs.items():
        sdk = sdk_values(fs, view, rows)
        for f, (by_oka, by_feast) in sdk.items():
            check(by_oka == by_feast, f"{view}:{f} read by Feast's SDK: Oka wrote {by_oka!r}, Feast wrote {by_feast!r}")
            check(by_oka is not None or f in NULLS, f"{view}:{f}: nothing written")
        oka, feast = served_values(oka_url, view, entities), served_values(feast_url, view, entities)
        for f in FEATURES[view]:
            check(oka[f] == feast[f], f"{view}:{f} served: Oka {oka[f]}, feast serve {feast[f]}")
            check(oka[f][0] == oka[f][1], f"{view}:{f} served by Oka: {oka[f]}")
    stats = sdk_values(fs, "driver_stats", [{"driver_id": 7001}])
    check(stats["conv_rate"] == [0.10000000149011612], f"Float32 0.1 reads {stats['conv_rate']}")
    check(stats["avg_daily_trips"] == [9007199254740993], f"int64 reads {stats['avg_daily_trips']}")

    # Feast's SDK as a remote-store client writes through /write-to-online-store.
    import pandas as pd

    from remote import remote_repo

    for driver, url in ((7011, oka_url), (7012, feast_url)):
        client = FeatureStore(repo_path=remote_repo(repo, url))
        at = pd.Timestamp(WHEN)
        client.write_to_online_store("driver_stats", pd.DataFrame({
            "driver_id": [driver], "conv_rate": [0.25], "acc_rate": [0.5], "avg_daily_trips": [2**40],
            "rating": [7], "active": [False], "event_timestamp": [at], "created": [at]}))
        client.push("trip_push", pd.DataFrame({
            "driver_id": [driver], "customer_id": ["c-1"], "trips_together": [5],
            "last_rating": [4.5], "event_timestamp": [at], "created": [at]}))
    for view, rows in (("driver_stats", [{"driver_id": 7011}, {"driver_id": 7012}]),
                       ("driver_customer_trips", [{"driver_id": 7011, "customer_id": "c-1"},
                                                  {"driver_id": 7012, "customer_id": "c-1"}])):
        for f, (by_oka, by_feast) in sdk_values(fs, view, rows).items():
            check(by_oka == by_feast and by_oka is not None,
                  f"{view}:{f} written by the SDK's remote store: via Oka {by_oka!r}, via Feast {by_feast!r}")

    # Bytes, in base64 (Oka only: Feast's server cannot take bytes from JSON).
    profile = {"driver_id": [7003], "name": ["b"], "avatar": ["AP9vaw=="], "signed_up": [None],
               "event_timestamp": ["2026-12-04 10:00:00"]}
    got = post(oka_url, "/write-to-online-store", {"feature_view_name": "driver_profile", "df": profile})
    check(got == (200, "null"), f"bytes write: {got}")
    read = sdk_values(fs, "driver_profile", [{"driver_id": 7003}])
    check(read["avatar"] == [b"\x00\xffok"] and read["signed_up"] == [None], f"bytes read {read}")

    # One bad row: nothing of the request is written.
    bad = {"driver_id": [7004, 7005], "conv_rate": [0.5, 0.5], "acc_rate": [1.0, 1.0],
           "avg_daily_trips": [1, "many"], "rating": [1, 1], "active": [True, True],
           "event_timestamp": [WHEN, WHEN]}
    status, body = post(oka_url, "/write-to-online-store", {"feature_view_name": "driver_stats", "df": bad})
    check(status == 400 and "row 1" in body and "avg_daily_trips" in body, f"bad row: {status} {body}")
    # Offline pushes are refused and write nothing.
    for to in ("offline", "online_and_offline"):
        push = {"push_source_name": "trip_push", "to": to, "df": {
            "driver_id": [7004], "customer_id": ["c-74"], "trips_together": [1],
            "last_rating": [1.0], "event_timestamp": [WHEN]}}
        status, body = post(oka_url, "/push", push)
        check(status == 400 and "invalid_request" in body and "online" in body, f"to {to}: {status} {body}")
    gone = sdk_values(fs, "driver_stats", [{"driver_id": 7004}, {"driver_id": 7005}])
    check(gone["acc_rate"] == [None, None], f"a refused request wrote {gone}")
    trips = sdk_values(fs, "driver_customer_trips", [{"driver_id": 7004, "customer_id": "c-74"}])
    check(trips["trips_together"] == [None], f"an offline push wrote {trips}")

    # An older record than the stored one is skipped, as Feast skips it.
    older = writes(7001, "c-71")[0][1]
    older["df"].update(conv_rate=[0.75], event_timestamp=["2020-01-01T00:00:00Z"])
    got = post(oka_url, "/write-to-online-store", older)
    check(got == (200, "null"), f"older write: {got}")
    kept = sdk_values(fs, "driver_stats", [{"driver_id": 7001}])
    check(kept["conv_rate"] == [0.10000000149011612], f"an older record replaced a newer one: {kept}")

    # An on-demand view with write_to_online_store=True: each server runs its
    # transformation on the write (Oka: Feast's SDK in its Python pool) and
    # stores the result, stamped with the write's time; both read it back alike.
    df = {"driver_id": [7021, 7022], "acc_rate": [0.25, 0.5]}
    got = post(feast_url, "/write-to-online-store", {"feature_view_name": "stored_score", "df": df})
    check(got == (200, "null"), f"stored_score written by feast serve: {got}")
    before = time.time()
    got = post(oka_url, "/write-to-online-store",
               {"feature_view_name": "stored_score", "df": {"driver_id": [7024, 7025], "acc_rate": [0.25, 0.75]}})
    check(got == (200, "null"), f"stored_score written by Oka: {got}")
    read = {"features": ["stored_score:stored_score"], "entities": {"driver_id": [7021, 7022, 7023, 7024, 7025]}}
    answers = [json.loads(post(url, "/get-online-features", read)[1]) for url in (oka_url, feast_url)]
    check(answers[0] == answers[1], f"stored_score served: Oka {answers[0]}, feast serve {answers[1]}")
    check(answers[1]["results"][1]["values"] == [25.0, 50.0, None, 25.0, 75.0], f"stored_score values {answers[1]}")
    stamps = answers[1]["results"][1]["event_timestamps"][3:]
    for stamp in stamps:
        at = datetime.datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
        check(before - 1 <= at <= time.time() + 1, f"stored_score written by Oka is stamped {stamp}, not the write's time")
    # The same in pandas mode.
    for url, driver in ((feast_url, 7031), (oka_url, 7032)):
        got = post(url, "/write-to-online-store", {"feature_view_name": "stored_band", "df": {
            "driver_id": [driver], "avg_daily_trips": [47], "acc_rate": [0.5]}})
        check(got == (200, "null"), f"stored_band written via {url}: {got}")
    read = {"features": ["stored_band:trips_tenths", "stored_band:rate_pct"], "entities": {"driver_id": [7031, 7032]}}
    answers = [json.loads(post(url, "/get-online-features", read)[1]) for url in (oka_url, feast_url)]
    # By name: feast serve orders a stored on-demand view's features as a
    # Python set of their names iterates.
    values = [dict(zip(a["metadata"]["feature_names"], (r["values"] for r in a["results"]))) for a in answers]
    check(values[0] == values[1] and values[1]["trips_tenths"] == [4.7, 4.7] and values[1]["rate_pct"] == [50.0, 50.0],
          f"stored_band: Oka {answers[0]}, feast serve {answers[1]}")
    # transform_on_write=False stores `df` as given, through both.
    for url, driver in ((feast_url, 7026), (oka_url, 7027)):
        got = post(url, "/write-to-online-store", {"feature_view_name": "stored_score", "transform_on_write": False,
                                                   "df": {"driver_id": [driver], "stored_score": [1.5]}})
        check(got == (200, "null"), f"an untransformed write to stored_score via {url}: {got}")
    read = {"features": ["stored_score:stored_score"], "entities": {"driver_id": [7026, 7027]}}
    answers = [json.loads(post(url, "/get-online-features", read)[1]) for url in (oka_url, feast_url)]
    check(answers[0] == answers[1] and answers[1]["results"][1]["values"] == [1.5, 1.5],
          f"untransformed stored_score: Oka {answers[0]}, feast serve {answers[1]}")
    # A transformation that raises on `df` (no `acc_rate`): a clear error naming
    # the view and the exception, and nothing written.
    status, body = post(oka_url, "/write-to-online-store",
                        {"feature_view_name": "stored_score", "df": {"driver_id": [7028], "conv_rate": [0.5]}})
    check(status == 500 and "udf_failed" in body and "stored_score" in body and "KeyError" in body
          and "nothing was written" in body, f"a failing transformation on write: {status} {body}")
    kept = json.loads(post(feast_url, "/get-online-features", {
        "features": ["stored_score:stored_score"], "entities": {"driver_id": [7028]}})[1])
    check(kept["results"][1]["values"] == [None], f"a failed transformation wrote {kept}")
    # A `df` that is not columns of as many values is the client's mistake (400),
    # found before anything runs; an empty one writes nothing, as Feast's.
    status, body = post(oka_url, "/write-to-online-store", {
        "feature_view_name": "stored_score", "df": {"driver_id": [7028, 7029], "acc_rate": [0.5]}})
    check(status == 400 and "as many values" in body, f"a ragged df for stored_score: {status} {body}")
    got = post(oka_url, "/write-to-online-store", {
        "feature_view_name": "stored_score", "df": {"driver_id": [], "acc_rate": []}})
    check(got == (200, "null"), f"an empty df for stored_score: {got}")

    if fails:
        print(f"feast-pushed: {len(fails)} failure(s)")
        return 1
    print("feast-pushed: what Oka and feast serve wrote reads back alike through both and the SDK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
