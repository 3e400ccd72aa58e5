"""The seed's on-demand feature, written in Python (benches/load/python.sh)."""


def simple_feature(test_feature, multiplier=1.0):
    return {"id": test_feature["id"], "value": test_feature["value"] * multiplier}
