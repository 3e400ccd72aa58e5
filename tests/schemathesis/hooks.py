"""Schemathesis hooks for tests/schemathesis/run.sh (loaded through SCHEMATHESIS_HOOKS).

`not_a_server_error_except_deadline` replaces the built-in `not_a_server_error`:
the same check, except that a `504 deadline_exceeded` is not a server error. The
API lets the caller set a deadline from 1 ms (`X-Oka-Deadline-Ms`, `deadline_ms`),
and the fuzzer sends such deadlines; the documented answer when one passes is that
504 (docs/api.md, Deadlines). Every other 5xx fails the run: `internal` (a bug),
`store_unavailable` and `store_timeout` (the store is a local Redis), `overloaded`
(nothing sheds or stops during the run).

`positive_data_acceptance_except_registry` replaces the built-in
`positive_data_acceptance`: a request the document calls valid must not be
refused with a 4xx other than those the document lists as expected for valid data
(401, 403, 404, 409, 429), except a `400` whose code names a rule that depends on
the spec the server loaded, which no schema of the API can state:
  - `missing_keys`: which key list a target may use (its own, one given for a
    feature it depends on, or `keys`);
  - `invalid_key`: the key fields and their types, per entity;
  - `invalid_query_arg`: which query a feature's dependencies read (a `range`
    needs `start`; a `last_n` needs `n`), and `start` not after `end`;
  - `unknown_udf_arg`, `invalid_udf_arg`: each on-demand feature's arguments.
Everything a schema can say (types, minimum items, whole numbers, `start`/`end`
or `n`, RFC 3339 timestamps, Volga's leniency) is in the document, and a `400`
with any other code fails the run.
"""

import json

import schemathesis
from schemathesis.checks import not_a_server_error, positive_data_acceptance


def _code(response) -> str:
    text = response.text or ""
    try:
        return json.loads(text)["error"]["code"]
    except (ValueError, KeyError, TypeError):
        return text.split(":", 1)[0]  # Volga's routes: `code: message`


@schemathesis.check
def not_a_server_error_except_deadline(ctx, response, case):
    if response.status_code == 504 and _code(response) == "deadline_exceeded":
        return None
    return not_a_server_error(ctx, response, case)


# The 400 codes of rules that depend on the loaded spec (see above).
REGISTRY_RULES = {"missing_keys", "invalid_key", "invalid_query_arg", "unknown_udf_arg", "invalid_udf_arg"}


@schemathesis.check
def positive_data_acceptance_except_registry(ctx, response, case):
    if response.status_code == 400 and _code(response) in REGISTRY_RULES:
        return None
    return positive_data_acceptance(ctx, response, case)
