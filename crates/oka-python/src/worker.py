"""Oka's Python UDF worker: runs the functions a spec names, a batch of keys at
a time, for the `oka` process that started it (crate oka-python). It is not
meant to be run by hand. Standard library only; CPython 3.9 or newer.

Protocol 1, over the socket on file descriptor 0. Every message is a 4-byte
little-endian length, then marshal data:

    worker -> server  ('hello', PROTOCOL, (major, minor, micro), pid, monotonic_ns)
    server -> worker  ('load', config, udfs)
    worker -> server  ('loaded', problems)      problems: [(udf, file, line, message)]
    server -> worker  ('batch', [udf, kwargs, rows, udf, kwargs, rows, ...])
    worker -> server  ('done', flags, times, sizes), then one marshal chunk per row

A row is a tuple of the UDF's inputs (a dict of columns, or a list of them);
timestamps travel as microseconds since the epoch and become datetimes here.
Each row's answer is one of:

    (0, values, omitted)       one record: values in the output's column order
    (3, [(values, omitted)])   several records
    (1, type, message, tb)     the function raised (tb: a traceback, or None)
    (2, message)               the function returned something that is not a record
    (4, message)               MemoryError: the worker is replaced after this batch

`omitted` has bit j set when column j (a key or the timestamp) was not given.
Before each row the worker writes (row index, monotonic_ns) into the progress
file, which the server reads to tell which row ran too long or crashed.
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
    if hasattr(r, "keys") and hasattr(r, "__getitem__") and not isinstance(r, (str, bytes)):
        return dict(r)
    fields = getattr(r, "__dataclass_fields__", None)
    if fields is not None:
        return {f: getattr(r, f) for f in fields}
    if r is None:
        raise Bad("returned None; return a dict of the output's fields (%s)" % ", ".join(names))
    raise Bad("returned %s; return a dict of the output's fields (%s)" % (describe(r), ", ".join(names)))


def encoder(outputs, max_chars):
    """The function that turns a UDF's result into its answer entry."""
    cols = [(name, converter(kind, max_chars), omittable) for name, kind, omittable in outputs]
    names = [c[0] for c in cols]
    nameset = set(names)

    def one(r):
        d = _as_dict(r, names)
        values = []
        omitted = 0
        found = 0
        for j, (name, conv, omittable) in enumerate(cols):
            v = d.get(name, _MISSING)
            if v is _MISSING:
                if not omittable:
                    raise Bad("field `%s` is missing from the result (it has: %s)" % (name, ", ".join(map(str, d)) or "nothing"))
                values.append(None)
                omitted |= 1 << j
                continue
            found += 1
            values.append(None if v is None else conv(name, v))
        if found < len(d):
            extra = [str(k) for k in d if k not in nameset]
            raise Bad(
                "unknown field%s %s in the result (the output has: %s)"
                % ("s" if len(extra) > 1 else "", ", ".join("`%s`" % k for k in extra[:5]), ", ".join(names))
            )
        return values, omitted

    def encode(r):
        t = type(r)
        if t is list or t is tuple:
            return (3, [one(x) for x in r])
        values, omitted = one(r)
        return (0, values, omitted)

    return encode


def input_converter(inputs, naive):
    """Turns the timestamp columns of a row's inputs into datetimes, in place.
    `inputs`: per dependency, (timestamp columns [(name, is_list)], many)."""
    epoch = _EPOCH_NAIVE if naive else _EPOCH_AWARE
    td = datetime.timedelta

    def to_dt(us):
        return None if us is None else epoch + td(microseconds=us)

    plan = [(j, cols, many) for j, (cols, many) in enumerate(inputs) if cols]
    if not plan:
        return None

    def fix(d, cols):
        for name, is_list in cols:
            v = d.get(name)
            if v is None:
                continue
            d[name] = [to_dt(x) for x in v] if is_list else epoch + td(microseconds=v)

    def convert(row):
        for j, cols, many in plan:
            v = row[j]
            if many:
                for d in v:
                    fix(d, cols)
            else:
                fix(v, cols)
        return row

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
    __slots__ = ("fn", "encode", "inputs", "args", "label", "tb_at", "tb_skipped")

    def __init__(self, fn, encode, inputs, args, label):
        self.fn = fn
        self.encode = encode
        self.inputs = inputs
        self.args = args
        self.label = label
        self.tb_at = -1e18
        self.tb_skipped = 0


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


def load(config, decls):
    """Imports every module and checks every function; (udfs, problems)."""
    max_chars = config["max_str_chars"]
    modules = {}
    udfs = []
    problems = []
    for i, (path, name, source, function, inputs, args, outputs, naive) in enumerate(decls):
        label = "%s:%s" % (os.path.basename(path), function)
        udfs.append(None)
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
        udfs[i] = Udf(
            fn,
            encoder(outputs, max_chars),
            input_converter([(cols, many) for _, cols, many in inputs], naive),
            arg_converter(args, naive),
            label,
        )
    return udfs, problems


def _signature_text(fn):
    try:
        return str(inspect.signature(fn))
    except (TypeError, ValueError):
        return "(...)"


def run_batch(udfs, groups, progress, config):
    """Runs every row of a batch; (flags, times, chunks)."""
    dumps = marshal.dumps
    mono = time.monotonic_ns
    clock = time.perf_counter_ns
    max_row = config["max_row_bytes"]
    max_total = config["max_frame_bytes"]
    tb_every = config["traceback_interval_ns"]
    chunks = []
    append = chunks.append
    times = []
    total = 0
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
        for row in groups[g + 2]:
            progress[0] = i
            progress[1] = mono()
            i += 1
            try:
                if convert is not None:
                    row = convert(row)
                chunk = dumps(encode(fn(*row, **kwargs)), 2)
            except Bad as e:
                chunk = dumps((2, str(e)), 2)
            except MemoryError:
                flags |= 1
                chunk = dumps((4, "MemoryError: the UDF ran out of memory"), 2)
            except BaseException as e:
                tb = None
                now = mono()
                if now - udf.tb_at >= tb_every:
                    # From the UDF's frame on: the worker's own frame is not the user's concern.
                    frames = e.__traceback__.tb_next if e.__traceback__ is not None else None
                    tb = "".join(traceback.format_exception(type(e), e, frames))
                    if udf.tb_skipped:
                        tb += "(%d more tracebacks of %s were not logged)\n" % (udf.tb_skipped, udf.label)
                    udf.tb_at = now
                    udf.tb_skipped = 0
                else:
                    udf.tb_skipped += 1
                try:
                    text = str(e)
                except Exception:
                    text = "<unprintable message>"
                if len(text) > 1000:
                    text = text[:1000] + "..."
                chunk = dumps((1, type(e).__name__, text, tb), 2)
            if len(chunk) > max_row:
                chunk = dumps((2, "the result is %d bytes; one key's result may be up to %d" % (len(chunk), max_row)), 2)
            if total + len(chunk) > max_total:
                chunk = dumps((2, "the batch's results passed %d bytes; ask for fewer keys per request" % max_total), 2)
            total += len(chunk)
            append(chunk)
        times.append(groups[g])
        times.append(clock() - started)
    progress[0] = -1
    return flags, times, chunks


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
        flags, times, chunks = run_batch(udfs, msg[1], progress, config)
        sizes = [len(c) for c in chunks]
        send(sock, [marshal.dumps(("done", flags, times, sizes), 2)] + chunks)


if __name__ == "__main__":
    main()
