"""Writes the console tests' larger spec: 200 features — 40 pipeline, 159 on-demand in
chains up to four deep, and `hostile`, whose description, argument default and CEL
hold HTML and script that the console must show as text.

    python make_spec.py OUT.yaml
"""
import sys

import yaml

PIPELINE = 40
ON_DEMAND = 159
HOSTILE_DESCRIPTION = "<script>alert('description')</script><img src=x onerror=alert('img')> & \"quotes\""
HOSTILE_DEFAULT = "<script>alert('default')</script>"


def spec():
    entities = {
        "User": {"keys": {"user_id": "string"}, "timestamp": "ts", "fields": {"v": "float"}},
        "Note": {"keys": {"user_id": "string"}, "timestamp": "ts", "fields": {"v": "float", "note": "string"}},
    }
    features = {}
    for i in range(PIPELINE):
        features[f"pipe_{i}"] = {
            "kind": "pipeline",
            "entity": "User",
            "description": f"Pipeline feature {i}, written by POST /v1/ingest.",
            "history": 10 + i % 5,
        }
    for i in range(ON_DEMAND):
        base = f"pipe_{i % PIPELINE}"
        deps = [base]
        expr = f"{base}.v * scale"
        # The output's time is its input's, so an answer is the same from one
        # request to the next (the try-it test compares two).
        # Every fourth feature also reads the one before it: chains up to four deep.
        if i % 4:
            deps.append(f"od_{i - 1}")
            expr = f"{base}.v * scale + od_{i - 1}.v"
        features[f"od_{i}"] = {
            "kind": "on_demand",
            "entity": "User",
            "description": f"On-demand feature {i}: {' + '.join(deps)}.",
            "dependencies": deps,
            "args": {"scale": {"type": "float", "default": 1.0}},
            "udf": {"expr": {"v": expr, "ts": f"{base}.ts"}},
        }
    features["hostile"] = {
        "kind": "on_demand",
        "entity": "Note",
        "description": HOSTILE_DESCRIPTION,
        "dependencies": ["pipe_0"],
        "args": {"label": {"type": "string", "default": HOSTILE_DEFAULT}},
        "udf": {"expr": {"v": "pipe_0.v", "note": "'<b onmouseover=alert(1)>bold</b>' + label"}},
    }
    return {"version": 1, "entities": entities, "features": features}


if __name__ == "__main__":
    with open(sys.argv[1], "w", encoding="utf-8") as f:
        yaml.safe_dump(spec(), f, sort_keys=False, allow_unicode=True)
