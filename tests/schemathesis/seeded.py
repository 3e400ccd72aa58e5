"""The serving port's OpenAPI document with the names in its request schemas
narrowed to the spec a live server loaded (its GET /v1/features), for
tests/schemathesis/run.sh.

    python seeded.py docs/openapi.json http://127.0.0.1:1122 > openapi-seeded.json

Generated from the document as served, fuzzed requests name features that do not
exist and almost all end at `404 unknown_feature`. Here the names come from the
loaded spec: feature names (targets, `feature_keys`, `query_args`, `udf_args`,
ingest), key fields (with stored key values among the generated ones) and UDF
argument names, so requests reach the store, the UDFs and the encoder. The values
keep the served document's schemas (any `start`/`end`/`n`, any argument value), and
answers are checked against the served document's response schemas.
"""

import copy
import json
import sys
import urllib.request

ARG_TYPES = {"float": "number", "int": "integer", "string": "string", "bool": "boolean"}
KEY_VALUES = ["test-id-0", "test-id-13", "test-id-21", "test-id-999", "not-stored"]


def main() -> None:
    doc = json.load(open(sys.argv[1]))
    with urllib.request.urlopen(sys.argv[2] + "/v1/features") as r:
        catalog = json.load(r)
    features = catalog["features"]
    names = [f["name"] for f in features]
    pipelines = [f["name"] for f in features if f["kind"] == "pipeline"]
    key_fields = sorted({k for e in catalog["entities"].values() for k in e["keys"]})
    schemas = doc["components"]["schemas"]
    served = schemas["FeatureRequest"]["properties"]

    key_value = {"anyOf": [{"enum": KEY_VALUES}, {"type": "string"}]}
    key_object = {
        "type": "object",
        "properties": {k: key_value for k in key_fields},
        "required": key_fields,
        "additionalProperties": False,
    }
    key_list = {"type": "array", "items": key_object, "minItems": 1, "maxItems": 4}
    query_arg_map = served["query_args"]["additionalProperties"]
    udf_args = {
        "type": "object",
        "properties": {
            f["name"]: {
                "type": ["object", "null"],
                "properties": {
                    a: {"anyOf": [{"type": ARG_TYPES.get(spec["type"], "string")}, {}]}
                    for a, spec in f["args"].items()
                },
                "additionalProperties": False,
            }
            for f in features
            if f["kind"] == "on_demand"
        },
        "additionalProperties": False,
    }
    request = copy.deepcopy(schemas["FeatureRequest"])
    request.pop("examples", None)
    request["required"] = ["target_features", "keys"]
    request["properties"].update(
        {
            "target_features": {"type": "array", "items": {"enum": names}, "minItems": 1, "maxItems": 3},
            "keys": key_list,
            "feature_keys": {
                "type": "object",
                "properties": {f: key_list for f in names},
                "additionalProperties": False,
                "maxProperties": 1,
            },
            "query_args": {
                "type": "object",
                "properties": {f: query_arg_map for f in names},
                "additionalProperties": False,
            },
            "udf_args": udf_args,
            # Deadlines long enough that requests run to the end (the first run
            # sends short ones).
            "deadline_ms": {"type": "integer", "minimum": 1000, "maximum": 600000},
        }
    )
    for item in doc["paths"].values():
        for op in item.values():
            for param in op.get("parameters", []):
                if param["name"] == "X-Oka-Deadline-Ms":
                    param["schema"]["minimum"] = 1000
                # A whole narrowed request cannot be generated into a path (its
                # braces and quotes are filtered out); POST /on_demand_compute
                # takes the same request. Here the path takes any string.
                if param["name"] == "json" and "content" in param:
                    del param["content"]
                    param["schema"] = {"type": "string", "minLength": 1}
    schemas["FeatureRequest"] = request
    schemas["VolgaFeatureRequest"] = request
    ingest = schemas["IngestRequest"]
    ingest.pop("examples", None)
    ingest["properties"]["feature"] = {"enum": pipelines}
    ingest["properties"]["records"] = {
        "type": "array",
        "maxItems": 5,
        "items": {
            "type": "object",
            "properties": {
                **{k: key_value for k in key_fields},
                "value": {"type": ["number", "null"]},
                "timestamp": {"type": ["string", "number"]},
            },
            "required": key_fields,
        },
    }
    json.dump(doc, sys.stdout, indent=1)


if __name__ == "__main__":
    main()
