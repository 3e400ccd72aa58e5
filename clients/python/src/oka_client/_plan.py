"""Sans-IO: a feature request as the HTTP bodies to send, and their answers
merged back into one :class:`FeatureResponse`.

A request within the server's limits (keys over all key lists, targets) is sent
as it is. A larger one is split: each target's key list is resolved by the
server's rules (docs/api.md, "Which key list a target uses"), targets sharing a
list are grouped, and each group is sent as ``keys`` slices of at most
``max_keys`` keys for at most ``max_targets`` targets at a time. Answers are
placed back by offset, so the merged result is in the original key order
whatever order the batches finish in.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Sequence, Set, Tuple, Union

from ._errors import BadRequest, OkaError
from ._models import FeatureResponse, FeatureResult, FeatureValue, Record

Key = Mapping[str, Any]
Targets = Union[str, Sequence[str]]

# A key list's source: ``None`` for the request's ``keys``, else the name of
# its ``feature_keys`` entry.
Source = Optional[str]

# A slot whose key count is taken from the answer (a key list not resolved).
UNKNOWN = -1


@dataclass
class Batch:
    """One HTTP body, and where each target's answer goes: ``slots[target]``
    is (offset into the target's key list, number of keys)."""

    body: Dict[str, Any]
    slots: Dict[str, Tuple[int, int]]


@dataclass
class Plan:
    targets: List[str]
    key_lists: Dict[str, List[Dict[str, Any]]]
    batches: List[Batch]
    _values: Dict[str, List[Optional[List[Record]]]] = field(default_factory=dict)
    _statuses: Dict[str, List[Optional[str]]] = field(default_factory=dict)
    _server_ids: List[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        for t in self.targets:
            n = len(self.key_lists[t])
            self._values[t] = [None] * n
            self._statuses[t] = [None] * n

    def add(self, batch: Batch, answer: Any) -> None:
        """Place one batch's ``200`` answer."""
        if not isinstance(answer, dict) or not isinstance(answer.get("results"), dict):
            raise OkaError("the server's answer has no `results` object", status=200)
        results: Dict[str, Any] = answer["results"]
        statuses: Dict[str, Any] = answer.get("statuses") or {}
        for target, (offset, count) in batch.slots.items():
            values = results.get(target)
            if count == UNKNOWN and isinstance(values, list):
                # A key list the client could not resolve: labelled with empty keys.
                count = len(values)
                self.key_lists[target] = [{} for _ in values]
                self._values[target] = [None] * count
                self._statuses[target] = [None] * count
            if not isinstance(values, list) or len(values) != count:
                got = len(values) if isinstance(values, list) else "no"
                raise OkaError(
                    f"the server answered {got} values for `{target}`, expected {count}",
                    status=200,
                )
            sts = statuses.get(target)
            for i, value in enumerate(values):
                self._values[target][offset + i] = value
                if isinstance(sts, list) and i < len(sts):
                    self._statuses[target][offset + i] = sts[i]
        sid = answer.get("server_id")
        if sid is not None:
            self._server_ids.append(str(sid))

    def response(self) -> FeatureResponse:
        results: Dict[str, FeatureResult] = {}
        for t in self.targets:
            keys = self.key_lists[t]
            values = [
                FeatureValue(key=keys[i], status=self._statuses[t][i], records=self._values[t][i])
                for i in range(len(keys))
            ]
            results[t] = FeatureResult(name=t, values=values)
        return FeatureResponse(results=results, server_ids=list(self._server_ids))


def target_list(targets: Targets) -> List[str]:
    """The distinct targets in request order (the server drops duplicates too)."""
    if isinstance(targets, str):
        targets = [targets]
    seen: Dict[str, None] = {}
    for t in targets:
        if not isinstance(t, str):
            raise TypeError(f"a target is a feature name (str), not {type(t).__name__}")
        seen.setdefault(t, None)
    return list(seen)


def needs_registry(targets: Sequence[str], feature_keys: Optional[Mapping[str, Any]]) -> bool:
    """Whether resolving key lists needs the features' dependencies: only when
    ``feature_keys`` is given and some target has no entry of its own."""
    if not feature_keys:
        return False
    return any(t not in feature_keys for t in targets)


def dependencies(registry: Mapping[str, Any]) -> Dict[str, List[str]]:
    """Direct dependencies by feature, from ``GET /v1/features``."""
    out: Dict[str, List[str]] = {}
    for feature in registry.get("features") or []:
        deps = feature.get("dependencies") or []
        out[str(feature.get("name"))] = [str(d.get("feature")) for d in deps if isinstance(d, dict)]
    return out


def _closure(target: str, deps: Mapping[str, Sequence[str]]) -> List[str]:
    """Every feature ``target`` depends on, directly or transitively, in a
    stable order."""
    out: List[str] = []
    seen: Set[str] = {target}
    stack = list(reversed(deps.get(target, [])))
    while stack:
        f = stack.pop()
        if f in seen:
            continue
        seen.add(f)
        out.append(f)
        stack.extend(reversed(deps.get(f, [])))
    return out


def resolve(
    targets: Sequence[str],
    keys: Optional[Sequence[Key]],
    feature_keys: Optional[Mapping[str, Sequence[Key]]],
    deps: Optional[Mapping[str, Sequence[str]]],
) -> Dict[str, Source]:
    """Each target's key list, by the server's rules. Raises
    :class:`BadRequest` (``status`` ``None``: raised before sending) where the
    server would answer ``400``."""
    fk = feature_keys or {}
    used: Set[str] = set()
    out: Dict[str, Source] = {}
    for t in targets:
        if t in fk:
            out[t] = t
            used.add(t)
            continue
        names = [d for d in _closure(t, deps or {}) if d in fk]
        if names:
            first = [dict(k) for k in fk[names[0]]]
            for other in names[1:]:
                if [dict(k) for k in fk[other]] != first:
                    raise BadRequest(
                        f"`feature_keys` gives different keys for `{names[0]}` and `{other}`, "
                        f"both inputs of `{t}`",
                        code="invalid_request",
                    )
            out[t] = names[0]
            used.update(names)
            continue
        if keys is not None:
            out[t] = None
            continue
        raise BadRequest(
            f"no keys for `{t}`: give `keys`, or `feature_keys` for it", code="missing_keys"
        )
    for name in fk:
        if name not in used:
            raise BadRequest(
                f"`feature_keys` gives keys for `{name}`, which no target needs",
                code="invalid_request",
            )
    return out


def _key_objects(keys: Sequence[Key], where: str) -> List[Dict[str, Any]]:
    if isinstance(keys, (str, bytes, Mapping)):
        raise TypeError(f"{where} is a list of key objects, e.g. [{{'id': 'user-1'}}]")
    out = []
    for i, k in enumerate(keys):
        if not isinstance(k, Mapping):
            raise TypeError(
                f"{where}[{i}] is a key object (a mapping such as {{'id': 'user-1'}}), "
                f"not {type(k).__name__}"
            )
        out.append(dict(k))
    return out


def _optional(
    query_args: Optional[Mapping[str, Any]],
    udf_args: Optional[Mapping[str, Any]],
    deadline_ms: Optional[int],
) -> Dict[str, Any]:
    body: Dict[str, Any] = {}
    if query_args is not None:
        body["query_args"] = {k: (dict(v) if v is not None else None) for k, v in query_args.items()}
    if udf_args is not None:
        body["udf_args"] = {k: (dict(v) if v is not None else None) for k, v in udf_args.items()}
    if deadline_ms is not None:
        if isinstance(deadline_ms, bool) or not isinstance(deadline_ms, int) or deadline_ms < 0:
            raise ValueError(f"deadline_ms must be a non-negative int, not {deadline_ms!r}")
        body["deadline_ms"] = deadline_ms
    return body


def plan(
    targets: Sequence[str],
    keys: Optional[Sequence[Key]],
    *,
    feature_keys: Optional[Mapping[str, Sequence[Key]]] = None,
    query_args: Optional[Mapping[str, Any]] = None,
    udf_args: Optional[Mapping[str, Any]] = None,
    deadline_ms: Optional[int] = None,
    max_keys: int,
    max_targets: int,
    deps: Optional[Mapping[str, Sequence[str]]] = None,
) -> Plan:
    """The batches for one ``get_features`` call. ``deps`` is needed when
    :func:`needs_registry` says so."""
    if max_keys < 1 or max_targets < 1:
        raise ValueError("max_keys_per_request and max_targets_per_request must be at least 1")
    if not targets:
        raise ValueError("give at least one target feature")
    key_list = _key_objects(keys, "keys") if keys is not None else None
    fk = (
        {name: _key_objects(ks, f"feature_keys[{name!r}]") for name, ks in feature_keys.items()}
        if feature_keys
        else None
    )
    extra = _optional(query_args, udf_args, deadline_ms)

    total = (len(key_list) if key_list is not None else 0) + sum(len(v) for v in (fk or {}).values())
    fits = total <= max_keys and len(targets) <= max_targets

    if fk is None:
        sources: Dict[str, Source] = {t: None for t in targets}
    elif fits:
        # Sent as it is: the server checks it. Resolve only to label the keys;
        # a request the server refuses never gets here.
        try:
            sources = resolve(targets, key_list, fk, deps)
        except BadRequest:
            sources = {}
    else:
        sources = resolve(targets, key_list, fk, deps)

    def list_of(source: Source) -> List[Dict[str, Any]]:
        if source is None:
            return key_list if key_list is not None else []
        return (fk or {})[source]

    if fits:
        body: Dict[str, Any] = {"target_features": list(targets)}
        if key_list is not None:
            body["keys"] = key_list
        if fk is not None:
            body["feature_keys"] = fk
        body.update(extra)
        key_lists = {t: list_of(sources[t]) if t in sources else [] for t in targets}
        slots = {t: (0, len(key_lists[t]) if t in sources else UNKNOWN) for t in targets}
        return Plan(list(targets), key_lists, [Batch(body, slots)])

    groups: Dict[Source, List[str]] = {}
    for t in targets:
        groups.setdefault(sources[t], []).append(t)
    batches: List[Batch] = []
    for source, members in groups.items():
        ks = list_of(source)
        for ti in range(0, len(members), max_targets):
            chunk = members[ti : ti + max_targets]
            if not ks:
                body = {"target_features": chunk, "keys": ks, **extra}
                batches.append(Batch(body, {t: (0, 0) for t in chunk}))
                continue
            for ki in range(0, len(ks), max_keys):
                part = ks[ki : ki + max_keys]
                body = {"target_features": chunk, "keys": part, **extra}
                batches.append(Batch(body, {t: (ki, len(part)) for t in chunk}))
    key_lists = {t: list_of(sources[t]) for t in targets}
    return Plan(list(targets), key_lists, batches)
