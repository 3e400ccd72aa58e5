"""Oka's gRPC port with `--tls-cert`: the same TLS as the HTTP port (ALPN h2),
through Feast's generated stubs (tests/feast/run.sh):

    python grpc_tls.py OKA_GRPC_TLS CA_PEM OKA_GRPC_PLAIN PLAIN_ADMIN_URL

A call over TLS trusting CA_PEM is answered, and the same request is answered
alike by the plain-text port; a plain-text channel to the TLS port gets no
answer. The plain port's server counts the open channel in
`oka_grpc_connections_open` (PLAIN_ADMIN_URL's /metrics), and no longer once it
is closed.
"""

import re
import sys
import time
import urllib.request
import warnings

warnings.filterwarnings("ignore")

import grpc  # noqa: E402

from feast.protos.feast.serving import ServingService_pb2 as pb  # noqa: E402
from feast.protos.feast.serving import ServingService_pb2_grpc as serving  # noqa: E402
from feast.protos.feast.types import Value_pb2 as value_pb  # noqa: E402


def grpc_connections_open(admin):
    """The sum over workers of `oka_grpc_connections_open` at ADMIN's /metrics."""
    with urllib.request.urlopen(f"{admin}/metrics", timeout=10) as r:
        text = r.read().decode()
    values = re.findall(r"^oka_grpc_connections_open\{[^}]*\} (\d+)$", text, re.M)
    assert values, "no oka_grpc_connections_open in /metrics"
    return sum(int(v) for v in values)


def main():
    tls_addr, ca_path, plain_addr, admin = sys.argv[1:5]
    with open(ca_path, "rb") as f:
        creds = grpc.ssl_channel_credentials(root_certificates=f.read())
    tls = serving.ServingServiceStub(grpc.secure_channel(tls_addr, creds))
    info = tls.GetFeastServingInfo(pb.GetFeastServingInfoRequest(), timeout=10)
    assert info.version.startswith("oka "), info
    request = pb.GetOnlineFeaturesRequest(
        features=pb.FeatureList(val=["driver_stats:conv_rate"]),
        entities={"driver_id": value_pb.RepeatedValue(val=[value_pb.Value(int64_val=1001)])},
    )
    over_tls = tls.GetOnlineFeatures(request, timeout=10)
    channel = grpc.insecure_channel(plain_addr)
    plain = serving.ServingServiceStub(channel)
    assert over_tls == plain.GetOnlineFeatures(request, timeout=10), over_tls
    assert grpc_connections_open(admin) >= 1, "an open gRPC channel is not counted"
    channel.close()
    deadline = time.monotonic() + 10
    while (n := grpc_connections_open(admin)) != 0:
        assert time.monotonic() < deadline, f"{n} gRPC connections still counted 10 s after the close"
        time.sleep(0.1)
    refused = serving.ServingServiceStub(grpc.insecure_channel(tls_addr))
    try:
        refused.GetFeastServingInfo(pb.GetFeastServingInfoRequest(), timeout=5)
    except grpc.RpcError as e:
        assert e.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED), e
    else:
        raise AssertionError("a plain-text call to the TLS port was answered")
    print(
        "feast-grpc-tls: answered over TLS as over plain text; plain text to the TLS port refused;"
        " open gRPC connections counted"
    )


if __name__ == "__main__":
    main()
