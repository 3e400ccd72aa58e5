"""Oka's Python UDF worker: runs the functions a spec names, a batch of keys at
a time, for the `oka` process that started it (crate oka-python). It is not
meant to be run by hand. Standard library only; CPython 3.9 or newer.

Protocol 1, over the socket on file descriptor 0. Every message is a 4-byte
little-endian length, then marshal data:

    worker -> server  ('hello', PROTOCOL, (major, minor, micro), pid, monotonic_ns)
    server -> worker  ('load', config, udfs)
    worker -> server  ('loaded', problems)      problems: [(udf, file, line, message)]
    server -> worker  ('batch', [udf, kwargs, rows, udf, kwargs, rows, ...])
    worker -> server  ('done', flags, times, answers)    one answer per row

A row is a tuple of the UDF's inputs (a dict of columns, or a list of them);
timestamps travel as microseconds since the epoch and become datetimes here.
Each row's answer is one of:

    (0, values, omitted)       one record: values in the output's column order
    (3, [(values, omitted)])   several records
    (1, type, message, tb)     the function raised (tb: a traceback, or None)
    (2, message)               the function returned something that is not a record
    (4, message)               MemoryError: the worker is replaced after this batch

`omitted` has bit j set when column j (a key or the timestamp) was not given.
Before each row the worker writes the row's index into the progress file
(shared memory; -1 between batches), which the server reads to tell which row
ran too long or crashed.
"""

import datetime
import importlib.util
import inspect
import marshal
import math
import mmap
import numbers
import os
import reprlib
import resource
import socket
import sys
import time
import traceback

PROTOCOL = 1
_MISSING = object()
_UTC = datetime.timezone.utc
_EPOCH_AWARE = datetime.datetime(1970, 1, 1, tzinfo=_UTC)
_EPOCH_NAIVE = datetime.datetime(1970, 1, 1)
_US = datetime.timedelta(microseconds=1)
_INT64 = (-(1 << 63), (1 << 63) - 1)
_REPR = reprlib.Repr()
_REPR.maxstring = 60
_REPR.maxother = 60
_REPR.maxlist = 4
_REPR.maxdict = 4


class Bad(Exception):
    """A result that is not a record of the output: the message says why."""


def describe(v):
    """`str 'abc'`, `float nan`, `None`: what came back, briefly."""
    if v is None:
        return "None"
    try:
        text = _REPR.repr(v)
    except Exception:  # a repr that raises
        text = "<unprintable>"
    return "%s %s" % (type(v).__name__, text)


def _finite(field, f):
    if f != f:
        raise Bad("field `%s`: NaN is not a value Oka answers (return a finite float or None)" % field)
    if f in (math.inf, -math.inf):
        raise Bad("field `%s`: %r is not a value Oka answers (return a finite float or None)" % (field, f))
    return f


def _to_float(field, v):
    t = type(v)
    if t is float:
        return _finite(field, v)
    if t is int:
        try:
            return float(v)
        except OverflowError:
            raise Bad("field `%s`: the int %s is too large for a float" % (field, describe(v)))
    if t is not bool and isinstance(v, numbers.Real):
        try:
            return _finite(field, float(v))
        except (OverflowError, ValueError, TypeError):
            pass
    raise Bad("field `%s`: expected float, got %s" % (field, describe(v)))


def _to_int(field, v):
    t = type(v)
    if t is not int:
        if t is bool or not isinstance(v, numbers.Integral):
            raise Bad("field `%s`: expected int, got %s" % (field, describe(v)))
        v = int(v)
    if not _INT64[0] <= v <= _INT64[1]:
        raise Bad("field `%s`: the int %s is outside the 64-bit range" % (field, describe(v)))
    return v


def _to_bool(field, v):
    t = type(v)
    if t is bool:
        return v
    if t.__name__ in ("bool_", "bool") and t.__module__ == "numpy":
        return bool(v)
    raise Bad("field `%s`: expected bool, got %s" % (field, describe(v)))


def _make_to_str(max_chars):
    def to_str(field, v):
        if type(v) is not str:
            if not isinstance(v, str):
                raise Bad("field `%s`: expected string, got %s" % (field, describe(v)))
            v = str(v)
        if len(v) > max_chars:
            raise Bad(
                "field `%s`: a string of %d characters; Oka answers strings up to %d characters"
                % (field, len(v), max_chars)
            )
        if not v.isascii():
            try:
                v.encode("utf-8")
            except UnicodeEncodeError:
                raise Bad("field `%s`: the string holds a lone surrogate, which is not text" % field)
        return v

    return to_str


def _to_timestamp(field, v):
    if isinstance(v, datetime.datetime):
        if v.tzinfo is None:
            return (v - _EPOCH_NAIVE) // _US
        return (v - _EPOCH_AWARE) // _US
    raise Bad("field `%s`: expected a datetime, got %s" % (field, describe(v)))


def converter(kind, max_chars):
    """The function that checks and converts one value of declared type `kind`."""
    if kind.startswith("list<") and kind.endswith(">"):
        inner = converter(kind[5:-1], max_chars)

        def to_list(field, v):
            t = type(v)
            if t is not list and t is not tuple:
                if hasattr(v, "tolist") and not isinstance(v, (str, bytes)):
                    v = v.tolist()
                if type(v) is not list:
                    raise Bad("field `%s`: expected %s, got %s" % (field, kind, describe(v)))
            return [None if x is None else inner(field, x) for x in v]

        return to_list
    return {
        "float": _to_float,
        "int": _to_int,
        "bool": _to_bool,
        "string": _make_to_str(max_chars),
        "timestamp": _to_timestamp,
    }[kind]


def _as_dict(r, names):
    if type(r) is dict:
        return r
    meta = getattr(r, "_entity_metadata", None)
    if meta is not None and not isinstance(r, type):
        # A Volga @entity instance: its declared fields.
        return {f.name: getattr(r, f.name, None) for f in meta.fields}
    if hasattr(r, "keys") and hasattr(r, "__getitem__") and not isinstance(r, (str, bytes)):
        return dict(r)
    fields = getattr(r, "__dataclass_fields__", None)
    if fields is not None:
        return {f: getattr(r, f) for f in fields}
    if r is None:
        raise Bad("returned None; return a dict of the output's fields (%s)" % ", ".join(names))
    raise Bad("returned %s; return a dict of the output's fields (%s)" % (describe(r), ", ".join(names)))


def _missing(name, d):
    have = ", ".join(map(str, d)) or "nothing"
    raise Bad("field `%s` is missing from the result (it has: %s)" % (name, have))


def _unknown(d, nameset, names):
    extra = [str(k) for k in d if k not in nameset]
    raise Bad(
        "unknown field%s %s in the result (the output has: %s)"
        % ("s" if len(extra) > 1 else "", ", ".join("`%s`" % k for k in extra[:5]), ", ".join(names))
    )


def _fast_check(kind, v, max_chars):
    """A Python expression true when `v` is already a value of `kind` as the
    protocol carries it (the common case, checked inline); else the
    converter runs, and checks, converts or refuses it."""
    return {
        "float": "type(%s) is float and %s - %s == 0.0" % (v, v, v),
        "int": "type(%s) is int and %d <= %s <= %d" % (v, _INT64[0], v, _INT64[1]),
        "bool": "type(%s) is bool" % v,
        "string": "type(%s) is str and len(%s) <= %d and %s.isascii()" % (v, v, max_chars, v),
    }.get(kind, "False")


def _compile(name, lines, namespace):
    exec(compile("\n".join(lines) + "\n", "<oka %s>" % name, "exec"), namespace)
    return namespace[name]


def encoder(outputs, max_chars):
    """The function that turns a UDF's result into its answer entry: generated
    for the output's columns (one straight-line check per column, as
    dataclasses does), since it runs once per key."""
    names = [name for name, _, _ in outputs]
    ns = {
        "_MISSING": _MISSING,
        "_as_dict": _as_dict,
        "_missing": _missing,
        "_unknown": _unknown,
        "NAMES": names,
        "NAMESET": set(names),
    }
    lines = ["def one(r):", "    if type(r) is not dict:", "        r = _as_dict(r, NAMES)", "    found = 0", "    omitted = 0"]
    for j, (name, kind, omittable) in enumerate(outputs):
        v = "v%d" % j
        ns["C%d" % j] = converter(kind, max_chars)
        lines += ["    %s = r.get(%r, _MISSING)" % (v, name), "    if %s is _MISSING:" % v]
        if omittable:
            lines += ["        %s = None" % v, "        omitted |= %d" % (1 << j)]
        else:
            lines += ["        _missing(%r, r)" % name]
        lines += [
            "    else:",
            "        found += 1",
            "        if %s is not None and not (%s):" % (v, _fast_check(kind, v, max_chars)),
            "            %s = C%d(%r, %s)" % (v, j, name, v),
        ]
    lines += [
        "    if found != len(r):",
        "        _unknown(r, NAMESET, NAMES)",
        "    return [%s], omitted" % ", ".join("v%d" % j for j in range(len(outputs))),
        "",
        "def encode(r):",
        "    t = type(r)",
        "    if t is list or t is tuple:",
        "        return (3, [one(x) for x in r])",
        "    values, omitted = one(r)",
        "    return (0, values, omitted)",
    ]
    return _compile("encode", lines, ns)


# Microseconds below 2**33 seconds (1970 to 2242) make datetimes exactly through
# a float (its error stays under half a microsecond); others through timedelta.
_FAST_US = (1 << 33) * 1_000_000


def _datetime_maker(naive):
    """An expression template making a datetime of the microseconds in `{v}`."""
    tail = ".replace(tzinfo=None)" if naive else ""
    return "(_fts({v} / 1e6, _UTC)%s if 0 <= {v} < _FAST_US else _EPOCH + _TD(0, 0, {v}))" % tail


def _exact(us, naive):
    return (_EPOCH_NAIVE if naive else _EPOCH_AWARE) + datetime.timedelta(microseconds=us)


def input_converter(inputs, naive):
    """Turns the timestamp columns of a row's inputs into datetimes, in place
    (generated for the inputs' columns; `None` when none has a timestamp).
    `inputs`: per dependency, (timestamp columns [(name, is_list)], many)."""
    make = _datetime_maker(naive)
    ns = {
        "_fts": datetime.datetime.fromtimestamp,
        "_UTC": _UTC,
        "_FAST_US": _FAST_US,
        "_EPOCH": _EPOCH_NAIVE if naive else _EPOCH_AWARE,
        "_TD": datetime.timedelta,
    }
    lines = ["def convert(row):"]
    for j, (cols, many) in enumerate(inputs):
        if not cols:
            continue
        indent = "    "
        if many:
            lines.append("    for d in row[%d]:" % j)
            indent = "        "
        else:
            lines.append("    d = row[%d]" % j)
        for name, is_list in cols:
            lines.append("%sv = d.get(%r)" % (indent, name))
            lines.append("%sif v is not None:" % indent)
            if is_list:
                lines.append("%s    d[%r] = [None if x is None else %s for x in v]" % (indent, name, make.format(v="x")))
            else:
                # A one-entry cache: records written together share their
                # time, and a datetime is immutable.
                cache = "_LAST%d" % len(ns)
                ns[cache] = [None, None]
                lines.append("%s    if v == %s[0]:" % (indent, cache))
                lines.append("%s        d[%r] = %s[1]" % (indent, name, cache))
                lines.append("%s    else:" % indent)
                lines.append("%s        d[%r] = %s[1] = %s" % (indent, name, cache, make.format(v="v")))
                lines.append("%s        %s[0] = v" % (indent, cache))
    if len(lines) == 1:
        return None
    lines.append("    return row")
    # The float path is exact on every platform seen; where it is not, the
    # exact path alone runs.
    make_one = _compile("make_one", ["def make_one(v):", "    return " + make.format(v="v")], dict(ns))
    if any(make_one(us) != _exact(us, naive) for us in (0, 1, 999_999, 1_700_000_000_123_457, _FAST_US - 1)):
        ns["_FAST_US"] = 0
    convert = _compile("convert", lines, ns)
    return convert


def arg_converter(args, naive):
    """Turns timestamp arguments (`args`: [(name, kind)]) into datetimes."""
    epoch = _EPOCH_NAIVE if naive else _EPOCH_AWARE
    stamps = [(n, k == "list<timestamp>") for n, k in args if k in ("timestamp", "list<timestamp>")]
    if not stamps:
        return None

    def to_dt(us):
        return None if us is None else epoch + datetime.timedelta(microseconds=us)

    def convert(kwargs):
        kwargs = dict(kwargs)
        for name, is_list in stamps:
            v = kwargs.get(name)
            if v is not None:
                kwargs[name] = [to_dt(x) for x in v] if is_list else to_dt(v)
        return kwargs

    return convert


class Udf:
    __slots__ = ("fn", "encode", "inputs", "args", "label", "tb_at", "tb_skipped", "columnar")

    def __init__(self, fn, encode, inputs, args, label, columnar=False):
        self.fn = fn
        self.encode = encode
        self.inputs = inputs
        self.args = args
        self.label = label
        self.tb_at = -1e18
        self.tb_skipped = 0
        # Called once per call with every key's rows (a Feast view), not per key.
        self.columnar = columnar


def _where(exc, path):
    """The line of `path` an exception raised at (the innermost), if any."""
    if isinstance(exc, SyntaxError) and exc.filename == path:
        return exc.lineno
    line = None
    tb = exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == path:
            line = tb.tb_lineno
        tb = tb.tb_next
    return line


def _exc_text(exc):
    try:
        text = str(exc)
    except Exception:
        text = "<unprintable message>"
    if isinstance(exc, SyntaxError):
        text = exc.msg or text
    return "%s: %s" % (type(exc).__name__, text) if text else type(exc).__name__


def load_module(path, name, source):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    folder = os.path.dirname(os.path.abspath(path))
    if folder not in sys.path:
        sys.path.insert(0, folder)
    sys.modules[name] = module
    try:
        exec(compile(source, path, "exec"), module.__dict__)
    except BaseException:
        del sys.modules[name]
        raise
    return module


def use_volga(shim):
    """Makes `volga.api` importable: the real package when installed, else
    Oka's stand-in (in `shim`)."""
    try:
        import volga.api.on_demand  # noqa: F401
    except ImportError:
        for m in [m for m in sys.modules if m == "volga" or m.startswith("volga.")]:
            del sys.modules[m]
        sys.path.append(shim)


def entity_maker(fn, count):
    """For a Volga function, turns a row's input dicts into the instances its
    parameters are annotated with (`T`, or `List[T]`); None when no
    parameter names an @entity class."""
    import typing

    try:
        hints = typing.get_type_hints(getattr(fn, "__wrapped__", fn))
        params = list(inspect.signature(fn).parameters)[:count]
    except Exception:
        return None
    makers = []
    for p in params:
        hint = hints.get(p)
        many = typing.get_origin(hint) is list
        cls = typing.get_args(hint)[0] if many and typing.get_args(hint) else hint
        makers.append((cls if hasattr(cls, "_entity_metadata") else None, many))
    if all(cls is None for cls, _ in makers):
        return None

    def make(row):
        return tuple(
            v if cls is None else ([cls(**d) for d in v] if many else cls(**v))
            for v, (cls, many) in zip(row, makers)
        )

    return make


def _chain(first, second):
    if first is None:
        return second
    if second is None:
        return first
    return lambda row: second(first(row))


def load(config, decls):
    """Imports every module and checks every function; (udfs, problems)."""
    max_chars = config["max_str_chars"]
    if any(d[7] == "volga" for d in decls):
        use_volga(config["volga_shim"])
    modules = {}
    udfs = []
    problems = []
    for i, (path, name, source, function, inputs, args, outputs, style, extra) in enumerate(decls):
        naive = style == "volga"
        label = "%s:%s" % (os.path.basename(path), function)
        udfs.append(None)
        if style == "feast_write":
            try:
                udfs[i] = feast_write_udf(path, source, function)
            except LoadFailed as e:
                problems.append((i, path, None, str(e)))
            except BaseException as e:
                problems.append((i, path, None, "on-demand view `%s`: Feast's SDK cannot rebuild it: %s" % (function, _exc_text(e))))
            continue
        if style == "feast":
            try:
                udfs[i] = feast_udf(path, source, function, inputs, args, outputs, extra, max_chars)
            except LoadFailed as e:
                problems.append((i, path, None, str(e)))
            except BaseException as e:
                problems.append((i, path, None, "on-demand view `%s`: Feast's SDK cannot rebuild it: %s" % (function, _exc_text(e))))
            continue
        if path not in modules:
            if name in sys.modules and getattr(sys.modules[name], "__file__", None) != path:
                taken = getattr(sys.modules[name], "__file__", None) or "built in"
                modules[path] = "the module name `%s` is taken by Python's own module (%s): rename the file" % (name, taken)
            else:
                try:
                    modules[path] = load_module(path, name, source)
                except BaseException as e:
                    modules[path] = (e, _where(e, path))
        module = modules[path]
        if isinstance(module, str):
            problems.append((i, path, None, module))
            continue
        if isinstance(module, tuple):
            e, line = module
            problems.append((i, path, line, "the module does not import: " + _exc_text(e)))
            continue
        fn = getattr(module, function, None)
        if fn is None or not callable(fn):
            defined = sorted(
                n for n, v in vars(module).items()
                if inspect.isfunction(v) and getattr(v, "__module__", None) == module.__name__
            )
            problems.append((i, path, None, "no function `%s` in it (it defines: %s)" % (function, ", ".join(defined) or "no functions")))
            continue
        code = getattr(fn, "__code__", None)
        line = code.co_firstlineno if code is not None and code.co_filename == path else None
        try:
            sig = inspect.signature(fn)
            sig.bind(*[None] * len(inputs), **{a: None for a, _ in args})
        except (TypeError, ValueError) as e:
            names = ", ".join(n for n, _, _ in inputs) or "none"
            kws = ", ".join(a for a, _ in args) or "none"
            problems.append((
                i, path, line,
                "`%s%s` cannot be called with the inputs as positional arguments (%s) and the arguments as keywords (%s): %s"
                % (function, _signature_text(fn), names, kws, e),
            ))
            continue
        convert = input_converter([(cols, many) for _, cols, many in inputs], naive)
        if style == "volga":
            convert = _chain(convert, entity_maker(fn, len(inputs)))
        udfs[i] = Udf(fn, encoder(outputs, max_chars), convert, arg_converter(args, naive), label)
    return udfs, problems


def _signature_text(fn):
    try:
        return str(inspect.signature(fn))
    except (TypeError, ValueError):
        return "(...)"


def _traceback(udf, e, now, every_ns):
    """The exception's traceback from the UDF's frame on, at most one per UDF
    every `every_ns` (then None)."""
    if now - udf.tb_at < every_ns:
        udf.tb_skipped += 1
        return None
    frames = e.__traceback__.tb_next if e.__traceback__ is not None else None
    tb = "".join(traceback.format_exception(type(e), e, frames))
    if udf.tb_skipped:
        tb += "(%d more tracebacks of %s were not logged)\n" % (udf.tb_skipped, udf.label)
    udf.tb_at = now
    udf.tb_skipped = 0
    return tb


class LoadFailed(Exception):
    """A UDF that cannot be loaded: the message says why and what to do."""


def _feast_sdk(name):
    try:
        from feast.on_demand_feature_view import OnDemandFeatureView
        from feast.protos.feast.core.OnDemandFeatureView_pb2 import OnDemandFeatureView as Proto
    except ImportError as e:
        raise LoadFailed(
            "on-demand view `%s`: Feast's SDK is not importable by %s (%s): give --python the "
            "interpreter of the virtual environment where feast is installed (VENV/bin/python)"
            % (name, sys.executable, e)
        )
    return OnDemandFeatureView, Proto


def _feast_view(repo, proto, name):
    """The on-demand view `name`, rebuilt from its registry message by Feast's
    SDK with the repository on sys.path (dill pickles by reference)."""
    OnDemandFeatureView, Proto = _feast_sdk(name)
    if repo not in sys.path:
        sys.path.insert(0, repo)
    view = OnDemandFeatureView.from_proto(Proto.FromString(proto))
    if view.mode not in ("python", "pandas"):
        raise LoadFailed("on-demand view `%s` has mode `%s`; Oka runs python and pandas mode views" % (name, view.mode))
    return view


def _b64_decoder(kind):
    import base64

    one = base64.b64decode
    if kind == "bytes":
        return lambda v: None if v is None else one(v)
    return lambda v: None if v is None else [None if x is None else one(x) for x in v]


def _out_converter(kind, field, max_chars):
    """An output of Feast type `kind` (`float32`, `bytes`, or a list of
    either) narrowed as Feast narrows it (a Float32 to 32 bits; bytes into
    Oka's base64), then checked as Oka's column type."""
    import base64
    import struct

    inner = kind[5:-1] if kind.startswith("list<") else kind
    if inner == "float32":
        f32 = struct.Struct("<f")
        check = converter("float", max_chars)

        def one(x):
            try:
                return f32.unpack(f32.pack(check(field, x)))[0]
            except (OverflowError, struct.error):
                raise Bad("field `%s`: %s is outside a Float32's range" % (field, describe(x)))
    else:
        check = converter("string", max_chars)

        def one(x):
            if isinstance(x, (bytes, bytearray)):
                x = base64.b64encode(x).decode("ascii")
            return check(field, x)

    if inner == kind:
        return one

    def many(v):
        if hasattr(v, "tolist") and not isinstance(v, (str, bytes)):
            v = v.tolist()
        if type(v) is not list and type(v) is not tuple:
            raise Bad("field `%s`: expected %s, got %s" % (field, kind, describe(v)))
        return [None if x is None else one(x) for x in v]

    return many


def feast_udf(repo, proto, name, inputs, args, outputs, extra, max_chars):
    """A Feast on-demand view as a columnar UDF: rebuilt from its registry
    message by Feast's SDK, called as `feast serve` calls it."""
    view = _feast_view(repo, proto, name)
    take, kinds_in, kinds_out = extra
    decode = {n: _b64_decoder(k) for n, k in kinds_in.items()}
    arg_names = [a for a, _ in args]
    outs = []
    for name_, kind, omittable in outputs:
        if omittable:
            outs.append((name_, None))
            continue
        if name_ in kinds_out:
            convert = _out_converter(kinds_out[name_], name_, max_chars)
        else:
            convert = (lambda c, f: lambda v: c(f, v))(converter(kind, max_chars), name_)
        outs.append((name_, convert))
    omitted = sum(1 << j for j, (_, c) in enumerate(outs) if c is None)
    pandas = view.mode == "pandas"
    if pandas:
        import pyarrow
    singleton = bool(getattr(view, "singleton", False))
    # Feast's classes check their own methods' argument and return types at
    # run time (typeguard): for the dict of lists built here those checks
    # cannot fail, and they cost more than the rest of the call. They are
    # skipped around the view's methods (so also inside them).
    try:
        from typeguard import suppress_type_checks as unchecked
    except ImportError:
        from contextlib import nullcontext as unchecked
    # Datetimes of the timestamp columns given to the view (not the records'
    # event times, which it is not given).
    stamps = input_converter(
        [([c for c in cols if c[0] in names], many) for (_, cols, many), names in zip(inputs, take)],
        False,
    )

    def columns(rows, kwargs):
        n = len(rows)
        if stamps is not None:
            rows = [stamps(list(row)) for row in rows]
        cols = {}
        for j, names in enumerate(take):
            for c in names:
                cols[c] = [row[j].get(c) for row in rows]
        for a in arg_names:
            cols[a] = [kwargs.get(a)] * n
        for c, d in decode.items():
            if c in cols:
                cols[c] = [d(v) for v in cols[c]]
        return cols

    def transform(cols, n):
        """The view's output columns for `cols`, as Feast's SDK computes them."""
        if pandas:
            table = view.transform_arrow(pyarrow.Table.from_pydict(cols), False)
            return {c: table[c].to_pylist() for c in table.column_names}
        if singleton and n > 1:
            # Feast's SDK calls a singleton view with the first row alone:
            # each row is given its own call.
            got = {}
            for i in range(n):
                one = view.transform_dict({c: v[i:i + 1] for c, v in cols.items()})
                for c, v in one.items():
                    got.setdefault(c, []).append(v[0] if isinstance(v, list) else v)
            return got
        return view.transform_dict(cols)

    def call(rows, kwargs):
        """Each row's answer entry, or raises what the view raised."""
        n = len(rows)
        cols = columns(rows, kwargs)
        with unchecked():
            got = transform(cols, n)
        values = []
        for name_, convert in outs:
            if convert is None:
                values.append(None)
                continue
            if name_ not in got:
                have = ", ".join(map(str, got)) or "nothing"
                raise Bad("the view's result has no column `%s` (it has: %s)" % (name_, have))
            v = got[name_]
            if hasattr(v, "tolist") and not isinstance(v, (str, bytes)):
                v = v.tolist()
            if not isinstance(v, list):
                v = [v]
            if len(v) != n:
                raise Bad("column `%s` of the view's result has %d values for %d rows" % (name_, len(v), n))
            values.append(v)
        entries = []
        for i in range(n):
            try:
                row = [None if v is None else (None if v[i] is None else c(v[i])) for v, (_, c) in zip(values, outs)]
                entries.append((0, row, omitted))
            except Bad as e:
                entries.append((2, str(e)))
        return entries

    return Udf(call, None, None, arg_converter(args, False), "Feast on-demand view %s" % name, columnar=True)


def _stored(field, v):
    """A value of the column `field` to store, as JSON can carry it: numpy's
    and pandas' values as Python's, bytes as base64 (as Oka keeps them),
    datetimes as RFC 3339 (naive: UTC), a NaN, an infinity or a missing value
    as None (JSON has no NaN)."""
    if v is None or type(v) in (bool, int, str):
        return v
    if isinstance(v, float):
        return v if math.isfinite(v) else None
    if isinstance(v, (bytes, bytearray)):
        import base64

        return base64.b64encode(v).decode("ascii")
    if isinstance(v, datetime.datetime):
        return (v if v.tzinfo is not None else v.replace(tzinfo=_UTC)).isoformat()
    if type(v).__name__ in ("NaTType", "NAType"):
        return None
    if hasattr(v, "tolist") and not isinstance(v, str):
        return _stored(field, v.tolist())
    if isinstance(v, (list, tuple)):
        return [_stored(field, x) for x in v]
    if isinstance(v, numbers.Integral):
        return int(v)
    if isinstance(v, numbers.Real):
        return _stored(field, float(v))
    if isinstance(v, str):
        return str(v)
    raise Bad("column `%s` holds %s, which cannot be stored" % (field, describe(v)))


def feast_write_udf(repo, proto, name):
    """A Feast on-demand view with write_to_online_store=True, run on what is
    written to it as Feast's SDK runs it (FeatureStore.write_to_online_store):
    one call per write, the written `df` in (JSON text: column -> values), the
    view's join keys and features to store out (JSON text). The columns come
    as the client sent them, as `feast serve` gives them (no base64 decoding,
    no date parsing)."""
    import json

    view = _feast_view(repo, proto, name)
    udf = view.feature_transformation.udf
    keep = [c.name for c in view.entity_columns] + [f.name for f in view.features]
    singleton = bool(getattr(view, "singleton", False))
    pandas = view.mode == "pandas"
    if pandas:
        import pandas as pd

    def rows_of(cols):
        n = {len(v) if isinstance(v, list) else -1 for v in cols.values()}
        if len(n) > 1 or -1 in n:
            raise Bad("every column of `df` must be a list of as many values")
        return n.pop() if n else 0

    def transform(cols, n):
        if pandas:
            df = pd.DataFrame(cols)
            out = udf(df)
            for c in df.columns:
                out[c] = df[c]
            return {c: out[c].tolist() for c in out.columns}
        if singleton:
            # Feast calls it with each row (a dict of scalars) and gathers.
            got = {}
            for i in range(n):
                for c, v in udf({c: col[i] for c, col in cols.items()}).items():
                    if isinstance(v, list):
                        got.setdefault(c, []).extend(v)
                    else:
                        got.setdefault(c, []).append(v)
        else:
            got = dict(udf(cols))
        for c, col in cols.items():
            got.setdefault(c, col)
        return got

    def run(record):
        cols = json.loads(record["json"])
        if type(cols) is not dict:
            raise Bad("`df` must be an object of columns")
        n = rows_of(cols)
        got = transform(cols, n)
        out = {}
        for c in keep:
            if c not in got:
                continue
            v = got[c]
            if hasattr(v, "tolist") and not isinstance(v, (str, bytes)):
                v = v.tolist()
            if not isinstance(v, list):
                v = [v] * n
            if len(v) != n:
                raise Bad("column `%s` of the view's result has %d values for the %d rows written" % (c, len(v), n))
            out[c] = [_stored(c, x) for x in v]
        return json.dumps(out, allow_nan=False)

    return Udf(run, lambda text: (0, [text, None], 2), None, None, "Feast on-demand view %s" % name)


def _message(e):
    """An exception's message, at most 1000 characters."""
    try:
        text = str(e)
    except Exception:
        text = "<unprintable message>"
    return text[:1000] + "..." if len(text) > 1000 else text


def _run_columnar(udf, rows, kwargs, first, progress, tb_every, mono, append):
    """One call of a columnar UDF over every row; flags."""
    progress[0] = first
    n = len(rows)
    try:
        entries = udf.fn(rows, kwargs)
    except Bad as e:
        entries = [(2, str(e))] * n
    except MemoryError:
        for _ in range(n):
            append((4, "MemoryError: the UDF ran out of memory"))
        return 1
    except BaseException as e:
        text = _message(e)
        tb = _traceback(udf, e, mono(), tb_every)
        entries = [(1, type(e).__name__, text, tb)] + [(1, type(e).__name__, text, None)] * (n - 1)
    for entry in entries:
        append(entry)
    return 0


def run_batch(udfs, groups, progress, config):
    """Runs every row of a batch: the `done` message."""
    mono = time.monotonic_ns
    clock = time.perf_counter_ns
    tb_every = config["traceback_interval_ns"]
    entries = []
    append = entries.append
    times = []
    flags = 0
    i = 0
    for g in range(0, len(groups), 3):
        udf = udfs[groups[g]]
        kwargs = groups[g + 1]
        if udf.args is not None:
            kwargs = udf.args(kwargs)
        fn = udf.fn
        encode = udf.encode
        convert = udf.inputs
        started = clock()
        if udf.columnar:
            rows = groups[g + 2]
            flags |= _run_columnar(udf, rows, kwargs, i, progress, tb_every, mono, append)
            i += len(rows)
            times.append(groups[g])
            times.append(clock() - started)
            continue
        for row in groups[g + 2]:
            progress[0] = i
            i += 1
            try:
                if convert is not None:
                    row = convert(row)
                append(encode(fn(*row, **kwargs)))
            except Bad as e:
                append((2, str(e)))
            except MemoryError:
                flags |= 1
                append((4, "MemoryError: the UDF ran out of memory"))
            except BaseException as e:
                append((1, type(e).__name__, _message(e), _traceback(udf, e, mono(), tb_every)))
        times.append(groups[g])
        times.append(clock() - started)
    progress[0] = -1
    return _done(flags, times, entries, config)


def _done(flags, times, entries, config):
    """The `done` message's bytes; a result over the limits becomes its key's
    error."""
    try:
        payload = marshal.dumps(("done", flags, times, entries), 2)
        if len(payload) <= config["max_frame_bytes"]:
            return payload
    except ValueError:  # nested too deep for marshal
        pass
    max_row = config["max_row_bytes"]
    total = 0
    for k, entry in enumerate(entries):
        try:
            size = len(marshal.dumps(entry, 2))
        except ValueError as e:
            entries[k] = (2, "the result cannot be sent: %s" % e)
            continue
        if size > max_row:
            entries[k] = (2, "the result is %d bytes; one key's result may be up to %d" % (size, max_row))
            size = 64
        if total + size > config["max_frame_bytes"] - 4096:
            entries[k] = (2, "the batch's results passed %d bytes; ask for fewer keys per request" % config["max_frame_bytes"])
            size = 64
        total += size
    return marshal.dumps(("done", flags, times, entries), 2)


def recv_exact(sock, n):
    buf = bytearray(n)
    view = memoryview(buf)
    got = 0
    while got < n:
        k = sock.recv_into(view[got:], n - got)
        if k == 0:
            return None
        got += k
    return buf


def recv(sock):
    head = recv_exact(sock, 4)
    if head is None:
        return None
    body = recv_exact(sock, int.from_bytes(head, "little"))
    return None if body is None else marshal.loads(body)


def send(sock, parts):
    size = sum(len(p) for p in parts)
    sock.sendall(b"".join([size.to_bytes(4, "little")] + parts))


def die_with_parent():
    """Asks the kernel to kill this process when the server dies (Linux)."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, 9)  # PR_SET_PDEATHSIG, SIGKILL
    except Exception:
        pass


def main():
    progress_path, memory_mib = sys.argv[1], int(sys.argv[2])
    die_with_parent()
    sock = socket.socket(fileno=os.dup(0))
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.dup2(2, 1)  # what UDFs print goes to the server's log
    if memory_mib > 0:
        limit = memory_mib << 20
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    with open(progress_path, "r+b") as f:
        shared = mmap.mmap(f.fileno(), 16)
    progress = memoryview(shared).cast("q")
    version = tuple(sys.version_info[:3])
    send(sock, [marshal.dumps(("hello", PROTOCOL, version, os.getpid(), time.monotonic_ns()), 2)])
    msg = recv(sock)
    if msg is None or msg[0] != "load":
        return
    config = msg[1]
    udfs, problems = load(config, msg[2])
    send(sock, [marshal.dumps(("loaded", problems), 2)])
    if problems:
        return
    while True:
        msg = recv(sock)
        if msg is None or msg[0] != "batch":
            return
        send(sock, [run_batch(udfs, msg[1], progress, config)])


if __name__ == "__main__":
    main()
