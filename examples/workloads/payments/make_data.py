#!/usr/bin/env python3
"""Writes data.jsonl, the records of `purchases` for the payments workload.

    python3 examples/workloads/payments/make_data.py [--keys 400] > data.jsonl

Key index i (0 … keys-1): user_id = 1000 + i, merchant = "m-{i % 7}". Each key has three
purchases, k = 0, 1, 2, one minute apart: amount = i + 10·k + 0.5, items = k + 1.
workload.yaml's expected values follow from these rules (the newest amount is
i + 20.5, the three sum to 3·i + 31.5, and so on); change both together.
"""

import argparse
import json
import sys

BASE = "2025-06-01T00:0{k}:00Z"

p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
p.add_argument("--keys", type=int, default=400)
a = p.parse_args()
for i in range(a.keys):
    for k in range(3):
        rec = {"user_id": 1000 + i, "merchant": f"m-{i % 7}", "ts": BASE.format(k=k),
               "amount": i + 10 * k + 0.5, "items": k + 1}
        sys.stdout.write(json.dumps(rec, separators=(",", ":")) + "\n")
