"""Feast's gRPC API, through Feast's own generated stubs (feast.protos), against
`feast listen` (Feast's gRPC feature server, `GrpcFeatureServer`) and Oka's
`--grpc-listen` (`GrpcFeatureServer` and `ServingService`, the removed Go
server's), on the same Redis (tests/feast/run.sh):

    python grpc_compare.py FEAST_GRPC OKA_GRPC OKA_HTTP HEADER_READ_TIMEOUT_MS

For each request: Feast's answer and Oka's answer through both services are the
same message (columns compared by name: a protobuf map of entities has no
order; Feast's null timestamp is Oka's null, as on the HTTP route), and Oka's gRPC answer carries the same values as its HTTP route.
Requests Feast refuses are refused by Oka too, with a gRPC status. A call
with a body over Oka's message limit is refused, not served; a connection that
sends nothing is closed after Oka's header-read timeout.
"""

import json
import math
import socket
import sys
import time
import urllib.request
import warnings

warnings.filterwarnings("ignore")

import grpc  # noqa: E402
from google.protobuf.json_format import MessageToDict  # noqa: E402

from feast.protos.feast.serving import GrpcServer_pb2_grpc as grpc_server  # noqa: E402
from feast.protos.feast.serving import ServingService_pb2 as pb  # noqa: E402
from feast.protos.feast.serving import ServingService_pb2_grpc as serving  # noqa: E402
from feast.protos.feast.types import Value_pb2 as value_pb  # noqa: E402

from corpus import VIEWS  # noqa: E402



def ints(*v):
    return value_pb.RepeatedValue(val=[value_pb.Value(int64_val=x) for x in v])


def strs(*v):
    return value_pb.RepeatedValue(val=[value_pb.Value(string_val=x) for x in v])


def requests():
    drivers = [ints(1001), ints(1002, 1003), ints(1001, 4242, 1002, 7001)]
    for view, features in VIEWS.items():
        refs = [f"{view}:{f}" for f in features]
        if view == "customer_profile":
            keys = [{"customer_id": strs("c-1", "c-2", "nobody")}]
        elif view == "driver_customer_trips":
            keys = [{"driver_id": ints(1001, 1002), "customer_id": strs("c-1", "c-2")}]
        else:
            keys = [{"driver_id": d} for d in drivers]
        for entities in keys:
            for full in (False, True):
                yield pb.GetOnlineFeaturesRequest(
                    features=pb.FeatureList(val=refs), entities=entities, full_feature_names=full)
            for f in refs:
                yield pb.GetOnlineFeaturesRequest(features=pb.FeatureList(val=[f]), entities=entities)
    yield pb.GetOnlineFeaturesRequest(
        features=pb.FeatureList(val=["driver_stats:acc_rate", "driver_profile:name", "driver_lists:tags"]),
        entities={"driver_id": ints(1001, 1002)})
    # On-demand views (Oka: the overlay), request data among the entities as
    # `feast listen` takes it.
    doubles = lambda *v: value_pb.RepeatedValue(val=[value_pb.Value(double_val=x) for x in v])  # noqa: E731
    yield pb.GetOnlineFeaturesRequest(
        features=pb.FeatureList(val=["fare_estimate:expected_fare", "driver_stats:acc_rate"]),
        entities={"driver_id": ints(1001, 1002), "distance_km": doubles(10.0, 2.5), "surge": doubles(1.5, 1.0)})
    yield pb.GetOnlineFeaturesRequest(
        features=pb.FeatureList(val=["dispatch_priority:priority"]),
        entities={"driver_id": ints(1001, 1002), "customer_id": strs("c-1", "c-2")})
    for full in (False, True):
        yield pb.GetOnlineFeaturesRequest(
            feature_service="driver_activity", full_feature_names=full,
            entities={"driver_id": ints(1001, 1002), "customer_id": strs("c-1", "c-2")})


REFUSED = [
    pb.GetOnlineFeaturesRequest(features=pb.FeatureList(val=["nope:x"]), entities={"driver_id": ints(1001)}),
    pb.GetOnlineFeaturesRequest(feature_service="nope", entities={"driver_id": ints(1001)}),
    pb.GetOnlineFeaturesRequest(features=pb.FeatureList(val=["driver_stats:nope"]), entities={"driver_id": ints(1001)}),
]


NAT = {"unixTimestampVal": str(-(2**63))}


def by_name(answer) -> dict:
    """{name: result} of an answer (Feast orders entity columns by the map's
    order, and features by an internal set). Feast's null timestamp (NaT, the
    int64 it stores) is Oka's null, as on the HTTP route (an intended
    difference, docs/migrating-from-feast.md)."""
    d = MessageToDict(answer)
    for r in d.get("results", []):
        r["values"] = [{} if v == NAT else v for v in r.get("values", [])]
    names = d.get("metadata", {}).get("featureNames", {}).get("val", [])
    return {"names": sorted(names), "results": dict(zip(names, d.get("results", [])))}


def call(stub, request):
    try:
        return stub.GetOnlineFeatures(request, timeout=30)
    except grpc.RpcError as e:
        return e


def main() -> int:
    feast_addr, oka_addr, oka_http, header_ms = sys.argv[1:5]
    feast = grpc_server.GrpcFeatureServerStub(grpc.insecure_channel(feast_addr))
    oka_channel = grpc.insecure_channel(oka_addr)
    oka_grpc = grpc_server.GrpcFeatureServerStub(oka_channel)
    oka_serving = serving.ServingServiceStub(oka_channel)
    n = own = 0
    for request in requests():
        n += 1
        want = call(feast, request)
        if isinstance(want, grpc.RpcError):
            # `feast listen` 0.67 fails every feature-service request and every
            # on-demand view ("Value with native type value cannot be
            # converted"): Oka's ServingService is the reference there, checked
            # against its GrpcFeatureServer and its HTTP route (which
            # tests/feast/corpus.py checks against feast serve).
            on_demand = any(f.split(":")[0] in ("fare_estimate", "dispatch_priority")
                            for f in request.features.val)
            if not request.HasField("feature_service") and not on_demand:
                print(f"FAIL feast listen refused {MessageToDict(request)}: {want.details()}")
                return 1
            own += 1
            want = call(oka_serving, request)
            if isinstance(want, grpc.RpcError):
                print(f"FAIL Oka refused {MessageToDict(request)}: {want.details()}")
                return 1
        want = by_name(want)
        for name, stub in (("GrpcFeatureServer", oka_grpc), ("ServingService", oka_serving)):
            got = call(stub, request)
            if isinstance(got, grpc.RpcError):
                print(f"FAIL Oka's {name} refused {MessageToDict(request)}: {got.code()} {got.details()}")
                return 1
            if by_name(got) != want:
                print(f"FAIL {name} {MessageToDict(request)}:\n feast listen: {want}\n Oka:          {by_name(got)}")
                return 1
        # Oka's HTTP route answers the same values.
        body = json.dumps({
            "features": list(request.features.val),
            "entities": {k: [plain(v) for v in rv.val] for k, rv in request.entities.items()},
            "full_feature_names": request.full_feature_names,
        } if request.HasField("features") else {
            "feature_service": request.feature_service,
            "entities": {k: [plain(v) for v in rv.val] for k, rv in request.entities.items()},
            "full_feature_names": request.full_feature_names,
        }).encode()
        http = urllib.request.Request(oka_http + "/get-online-features", data=body,
                                      headers={"content-type": "application/json"})
        with urllib.request.urlopen(http, timeout=30) as r:
            answer = json.load(r)
        grpc_values = {k: v.get("values") for k, v in want["results"].items()}
        http_values = dict(zip(answer["metadata"]["feature_names"], (r["values"] for r in answer["results"])))
        for name, values in http_values.items():
            flat = [None if not v else next(iter(v.values())) for v in grpc_values[name]]
            flat = [x.get("val", []) if isinstance(x, dict) else x for x in flat]
            if not same(flat, values):
                print(f"FAIL {name}: gRPC {flat}, HTTP {values}")
                return 1
    for request in REFUSED:
        want, got = call(feast, request), call(oka_serving, request)
        if not isinstance(want, grpc.RpcError) or not isinstance(got, grpc.RpcError):
            print(f"FAIL {MessageToDict(request)}: feast listen {want}, Oka {got}")
            return 1
        if got.code() != grpc.StatusCode.NOT_FOUND or "unknown_feature" not in got.details():
            print(f"FAIL Oka refused {MessageToDict(request)} with {got.code()} {got.details()}")
            return 1
    info = oka_serving.GetFeastServingInfo(pb.GetFeastServingInfoRequest(), timeout=10)
    if not info.version.startswith("oka "):
        print(f"FAIL GetFeastServingInfo: {info}")
        return 1
    big = pb.GetOnlineFeaturesRequest(
        features=pb.FeatureList(val=["driver_stats:acc_rate"]),
        entities={"driver_id": ints(*range(1, 2_000_000))})
    got = call(oka_serving, big)
    if not isinstance(got, grpc.RpcError) or got.code() != grpc.StatusCode.OUT_OF_RANGE \
            or "limit" not in (got.details() or ""):
        print(f"FAIL a message over the limit: {got if isinstance(got, grpc.RpcError) else 'served'}")
        return 1
    # A client that connects and sends nothing is closed after the header-read
    # timeout (it would otherwise hold a connection slot forever).
    host, port = oka_addr.rsplit(":", 1)
    silent = socket.create_connection((host, int(port)))
    silent.settimeout(int(header_ms) / 1000 + 10)
    started = time.monotonic()
    try:
        while silent.recv(4096):
            pass
    except OSError:
        pass
    waited = time.monotonic() - started
    if not int(header_ms) / 1000 * 0.9 <= waited <= int(header_ms) / 1000 + 5:
        print(f"FAIL a silent connection was closed after {waited:.1f} s (timeout {header_ms} ms)")
        return 1
    print(f"feast-grpc: {n} requests ({n - own} equal to feast listen's answer, {own} that feast "
          "listen fails) equal through both of Oka's services and its HTTP route, "
          f"{len(REFUSED)} refused by both, an oversized message refused, "
          f"a silent connection closed after {waited:.1f} s")
    return 0


def plain(v):
    """A scalar `Value` as JSON takes it (int64 as a number)."""
    d = MessageToDict(v)
    if not d:
        return None
    x = next(iter(d.values()))
    return int(x) if "int64Val" in d else x


def same(grpc_values, http_values) -> bool:
    """gRPC's JSON (int64 as strings, bytes in base64) against the HTTP route's."""
    if len(grpc_values) != len(http_values):
        return False
    for g, h in zip(grpc_values, http_values):
        if isinstance(h, bool) or h is None:
            if g != h:
                return False
        elif isinstance(h, (int, float)):
            # protobuf's JSON writes a float32 at float32 precision.
            if g is None or not math.isclose(float(g), float(h), rel_tol=1e-7):
                return False
        elif isinstance(h, list):
            if not isinstance(g, list) or not same(g, h):
                return False
        elif g != h:
            return False
    return True


if __name__ == "__main__":
    sys.exit(main())
