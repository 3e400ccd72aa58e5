"""Oka's gRPC port with `--tls-cert`: the same TLS as the HTTP port (ALPN h2),
through Feast's generated stubs (tests/feast/run.sh):

    python grpc_tls.py OKA_GRPC_TLS CA_PEM OKA_GRPC_PLAIN

A call over TLS trusting CA_PEM is answered, and the same request is answered
alike by the plain-text port; a plain-text channel to the TLS port gets no
answer.
"""

import sys
import warnings

warnings.filterwarnings("ignore")

import grpc  # noqa: E402

from feast.protos.feast.serving import ServingService_pb2 as pb  # noqa: E402
from feast.protos.feast.serving import ServingService_pb2_grpc as serving  # noqa: E402
from feast.protos.feast.types import Value_pb2 as value_pb  # noqa: E402


def main():
    tls_addr, ca_path, plain_addr = sys.argv[1:4]
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
    plain = serving.ServingServiceStub(grpc.insecure_channel(plain_addr))
    assert over_tls == plain.GetOnlineFeatures(request, timeout=10), over_tls
    refused = serving.ServingServiceStub(grpc.insecure_channel(tls_addr))
    try:
        refused.GetFeastServingInfo(pb.GetFeastServingInfoRequest(), timeout=5)
    except grpc.RpcError as e:
        assert e.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED), e
    else:
        raise AssertionError("a plain-text call to the TLS port was answered")
    print("feast-grpc-tls: answered over TLS as over plain text; plain text to the TLS port refused")


if __name__ == "__main__":
    main()
