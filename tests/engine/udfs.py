"""The Python UDF of tests/engine/spec.yaml."""

import math


def scaled(profile, merchant_risk):
    v = profile["balance"] * 1.5 + math.sqrt(float(profile["visits"]))
    return {
        "v": v * merchant_risk["risk"],
        "tagged": len(profile["tags"] or []),
        "label": "%s/%.3f" % (profile["tier"], merchant_risk["risk"]),
        "seen": max(profile["ts"], merchant_risk["ts"]),
    }
