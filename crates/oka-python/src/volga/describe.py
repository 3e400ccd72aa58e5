"""Describes a module written for Volga's on-demand layer as an Oka spec
(`oka volga spec`, `oka serve --volga-module`; crate oka-python). Run as

    python describe.py SHIM_DIR MODULE.py

It imports the module as Oka's workers do (with Oka's stand-in for
`volga.api` when the real package is not importable), reads what its
decorators declared, and prints one JSON object: {"spec": …, "notes": […]}
or {"problem": {"line": …, "message": …}}.
"""

import datetime
import decimal
import importlib.util
import inspect
import json
import os
import resource
import sys
import typing


class Problem(Exception):
    def __init__(self, message, line=None):
        super().__init__(message)
        self.line = line


def load(path):
    name = os.path.splitext(os.path.basename(path))[0]
    folder = os.path.dirname(os.path.abspath(path))
    if folder not in sys.path:
        sys.path.insert(0, folder)
    with open(path, encoding="utf-8") as f:
        source = f.read()
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    exec(compile(source, path, "exec"), module.__dict__)
    return module


def line_of(obj, path):
    try:
        if inspect.getsourcefile(obj) == path:
            return inspect.getsourcelines(obj)[1]
    except (OSError, TypeError):
        pass
    return None


def oka_type(hint):
    """The spec's type of a Python annotation, or None."""
    if isinstance(hint, str):
        hint = {"str": str, "int": int, "float": float, "bool": bool, "datetime": datetime.datetime}.get(hint, hint)
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin is typing.Union and len(args) == 2 and type(None) in args:
        return oka_type(args[0] if args[1] is type(None) else args[1])
    if origin is list and len(args) == 1:
        inner = oka_type(args[0])
        return None if inner is None else "list<%s>" % inner
    return {
        str: "string",
        int: "int",
        float: "float",
        bool: "bool",
        datetime.datetime: "timestamp",
        decimal.Decimal: "float",
    }.get(hint)


def entity_spec(cls, path):
    meta = cls._entity_metadata
    try:
        hints = typing.get_type_hints(cls)
    except Exception:
        hints = {}
    keys, fields = {}, {}
    for f in meta.fields:
        ty = oka_type(hints.get(f.name, f.dtype))
        if ty is None:
            raise Problem(
                "field `%s` of entity %s has type %r, which Oka cannot serve (str, int, float, bool, datetime, Decimal, Optional and List of these)"
                % (f.name, meta.name, hints.get(f.name, f.dtype)),
                line_of(cls, path),
            )
        if f.name == meta.timestamp_field:
            if ty != "timestamp":
                raise Problem("the timestamp field `%s` of entity %s is not a datetime" % (f.name, meta.name), line_of(cls, path))
        elif f.name in meta.key_fields:
            keys[f.name] = ty
        else:
            fields[f.name] = ty
    return {
        "keys": keys,
        "timestamp": meta.timestamp_field,
        "fields": fields,
        "order": [f.name for f in meta.fields],
    }


def json_value(v):
    if isinstance(v, datetime.datetime):
        if v.tzinfo is None:
            v = v.replace(tzinfo=datetime.timezone.utc)
        return v.astimezone(datetime.timezone.utc).isoformat()
    if isinstance(v, decimal.Decimal):
        return float(v)
    if isinstance(v, (list, tuple)):
        return [json_value(x) for x in v]
    return v


def item(record, cls):
    if type(record) is not cls:
        raise Problem("an item of a source is %s, not an instance of %s" % (type(record).__name__, cls.__name__))
    return {f.name: json_value(getattr(record, f.name)) for f in cls._entity_metadata.fields}


def describe(path):
    module = load(path)
    from volga.api.feature import FeatureRepository

    features = FeatureRepository.get_all_features()
    entities, out, notes = {}, {}, []

    def use(cls):
        name = cls._entity_metadata.name
        if name not in entities:
            entities[name] = entity_spec(cls, path)
        return name

    for name, f in features.items():
        line = line_of(f.func, path)
        entity = use(f.output_type)
        if hasattr(f, "is_source") and f.is_source:
            spec = {"kind": "pipeline", "entity": entity}
            connector = f.func()
            kind = type(connector).__name__
            if kind in ("MockOnlineConnector", "MockOfflineConnector"):
                spec["source"] = {"mock": {"items": [item(r, f.output_type) for r in connector.items]}}
            else:
                spec["description"] = "a Volga source (%s): its records are written from outside Oka" % kind
                notes.append("%s:%s: source `%s` reads a %s, which Oka does not open: write its records with oka ingest, Kafka or Volga's own Redis (layout=volga)" % (os.path.basename(path), line, name, kind))
            out[name] = spec
        elif hasattr(f, "udf_args_names"):
            out[name] = on_demand_spec(name, f, entity, path, line, module)
        else:
            out[name] = {
                "kind": "pipeline",
                "entity": entity,
                "description": "a Volga @pipeline (a streaming job Oka does not run): its records are written from outside Oka",
            }
            notes.append("%s:%s: @pipeline `%s` is a streaming job, which Oka does not run: it is served as a pipeline feature whose records are written from outside (oka ingest, Kafka, or Volga's own Redis with layout=volga)" % (os.path.basename(path), line, name))
    return {"spec": {"version": 1, "entities": entities, "features": out}, "notes": notes}


def on_demand_spec(name, f, entity, path, line, module):
    if getattr(module, name, None) is None:
        raise Problem("on_demand function `%s` is not reachable as `%s` in the module" % (name, name), line)
    deps = []
    for d in f.dep_args:
        query = d.query_name or "latest"
        deps.append(d.get_name() if query == "latest" else {"feature": d.get_name(), "query": query})
    sig = inspect.signature(f.func)
    try:
        hints = typing.get_type_hints(f.func)
    except Exception:
        hints = {}
    args = {}
    for arg in f.udf_args_names:
        p = sig.parameters[arg]
        ty = oka_type(hints[arg]) if arg in hints else oka_type(type(p.default))
        if ty is None:
            raise Problem("argument `%s` of `%s` has a type Oka cannot take in a request" % (arg, name), line)
        args[arg] = {"type": ty, "default": json_value(p.default)}
    spec = {
        "kind": "on_demand",
        "entity": entity,
        "dependencies": deps,
        "udf": {"python": {"file": os.path.basename(path), "function": name, "style": "volga"}},
    }
    if args:
        spec["args"] = args
    return spec


def main():
    shim, path, memory_mib = sys.argv[1], os.path.abspath(sys.argv[2]), int(sys.argv[3])
    if memory_mib > 0:
        limit = memory_mib << 20
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    try:
        import volga.api.on_demand  # noqa: F401  (the real package, when installed)
    except ImportError:
        for m in [m for m in sys.modules if m == "volga" or m.startswith("volga.")]:
            del sys.modules[m]
        sys.path.append(shim)
    try:
        result = describe(path)
    except Problem as e:
        result = {"problem": {"line": e.line, "message": str(e)}}
    except BaseException as e:
        line = None
        tb = e.__traceback__
        while tb is not None:
            if tb.tb_frame.f_code.co_filename == path:
                line = tb.tb_lineno
            tb = tb.tb_next
        if isinstance(e, SyntaxError) and e.filename == path:
            line = e.lineno
        text = e.msg if isinstance(e, SyntaxError) else str(e)
        if isinstance(e, MemoryError):
            text = "importing it needs more than %d MiB (raise --python-memory-mib, 0 for no limit)" % memory_mib
        result = {"problem": {"line": line, "message": "%s: %s" % (type(e).__name__, text)}}
    sys.stdout.write(json.dumps(result))


if __name__ == "__main__":
    main()
