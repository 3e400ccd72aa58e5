"""Oka's translator of Python UDFs (crate oka-python, `compile`): reads the
UDFs as JSON on stdin, writes per UDF either the function's body as Oka's
IR or why it stays in Python, as JSON on stdout. It never imports the
user's module: it reads its source with CPython's own parser (`ast`).
Standard library only; CPython 3.9 or newer. Not meant to be run by hand.

stdin:  [{"source", "path", "function", "style", "inputs": [{"name", "many"}],
          "args": [name]}]
stdout: [{"ir": {"slots": n, "body": [stmt]}} | {"refused": why, "line": n}]

The IR (read by `compile/ir.rs`), expressions as JSON arrays:
  ["const", "none"|"bool"|"int"|"float"|"str", v]  (a float as its bits)
  ["input", i]  ["arg", name]  ["local", slot]
  ["field", e, name]  (`e.name`, `e["name"]`)   ["get", e, name]  (`e.get("name")`)
  ["index", e, i]  ["bin", op, l, r]  ["neg", e]  ["pos", e]  ["not", e]
  ["cmp", [op], [e]]  ["and", [e]]  ["or", [e]]  ["ifexp", test, then, else]
  ["call", f, [e]]  ["method", e, name, [e]]  ["fstr", [part]]  ["list", [e]]
  ["comp", "list"|"gen", slot, iter, elt, [cond]]
  ["record", [[name, e]], "dict"|"entity", [required field]]
  ["now"]
statements: ["assign", slot, e]  ["if", test, [s], [s]]  ["for", slot, iter, [s]]
  ["return", e]
"""

import ast
import json
import struct
import sys
import time

BUILTINS = {"min", "max", "abs", "round", "len", "sum", "any", "all", "float", "int", "bool", "str", "dict"}
MATH = {
    "sqrt", "exp", "log", "log10", "log2", "floor", "ceil", "fabs", "trunc",
    "isnan", "isinf", "isfinite", "sin", "cos", "tan", "atan", "tanh",
}
METHODS = {"lower", "upper", "startswith", "endswith", "strip"}
BINOPS = {
    ast.Add: "add", ast.Sub: "sub", ast.Mult: "mul", ast.Div: "div",
    ast.FloorDiv: "floordiv", ast.Mod: "mod", ast.Pow: "pow",
}
CMPOPS = {
    ast.Eq: "eq", ast.NotEq: "ne", ast.Lt: "lt", ast.LtE: "le", ast.Gt: "gt",
    ast.GtE: "ge", ast.In: "in", ast.NotIn: "notin", ast.Is: "is", ast.IsNot: "isnot",
}
# Names whose presence means the module may rebind names at run time.
DYNAMIC = {"globals", "builtins", "__builtins__", "setattr", "exec", "eval", "vars", "__import__", "importlib"}
INT64 = (-(1 << 63), (1 << 63) - 1)
# The deepest expression or block the translator writes (Oka reads 48).
MAX_DEPTH = 40


class Refused(Exception):
    def __init__(self, why, node=None):
        super().__init__(why)
        self.why = why
        self.line = getattr(node, "lineno", None)


def bindings(tree):
    """Every module-level name's bindings: name -> [node]."""
    out = {}

    def bind(name, node):
        out.setdefault(name, []).append(node)

    def targets(t, node):
        for n in ast.walk(t):
            if isinstance(n, ast.Name):
                bind(n.id, node)

    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bind(node.name, node)
        elif isinstance(node, ast.Import):
            for a in node.names:
                bind(a.asname or a.name.split(".")[0], node)
        elif isinstance(node, ast.ImportFrom):
            for a in node.names:
                bind(a.asname or a.name, node)
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            for t in node.targets if isinstance(node, ast.Assign) else [node.target]:
                targets(t, node)
        elif isinstance(node, (ast.For, ast.AsyncFor, ast.With, ast.AsyncWith, ast.If, ast.Try, ast.While)):
            # Names bound inside compound statements: every Store in them.
            for n in ast.walk(node):
                if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
                    bind(n.id, node)
                elif isinstance(n, (ast.FunctionDef, ast.ClassDef)):
                    bind(n.name, node)
                elif isinstance(n, (ast.Import, ast.ImportFrom)):
                    for a in n.names:
                        bind(a.asname or a.name.split(".")[0], node)
    for n in ast.walk(tree):
        if isinstance(n, (ast.Global, ast.Nonlocal)):
            for name in n.names:
                bind(name, n)
        elif isinstance(n, ast.NamedExpr) and isinstance(n.target, ast.Name):
            bind(n.target.id, n)
    return out


class Module:
    """What the module's names are, as far as the translator needs them."""

    def __init__(self, tree):
        self.tree = tree
        self.names = bindings(tree)
        self.star = any(
            isinstance(n, ast.ImportFrom) and any(a.name == "*" for a in n.names) for n in ast.walk(tree)
        )
        self.dynamic = sorted(
            {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and n.id in DYNAMIC}
            | {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute) and n.attr in ("__dict__", "__globals__")}
        )

    def only(self, name):
        nodes = self.names.get(name, [])
        return nodes[0] if len(nodes) == 1 else None

    def imported(self, name):
        """What a module-level name is bound to by its one import:
        ('module', 'math') or ('from', 'math', 'sqrt'); None otherwise."""
        node = self.only(name)
        if isinstance(node, ast.Import):
            for a in node.names:
                if (a.asname or a.name.split(".")[0]) == name:
                    return ("module", a.name if a.asname else a.name.split(".")[0])
        if isinstance(node, ast.ImportFrom) and node.level == 0:
            for a in node.names:
                if (a.asname or a.name) == name:
                    return ("from", node.module, a.name)
        return None

    def builtin(self, name):
        """Whether `name` is Python's builtin here (nothing in the module binds it)."""
        return name not in self.names and not self.star

    def required_fields(self, name):
        return _required(self, self.only(name))

    def entity_class(self, name):
        """Whether `name` is an @entity class of plain annotated fields."""
        node = self.only(name)
        if not isinstance(node, ast.ClassDef) or node.bases or node.keywords:
            return False
        if len(node.decorator_list) != 1:
            return False
        d = node.decorator_list[0]
        if not (isinstance(d, ast.Name) and self.imported(d.id) == ("from", "volga.api.entity", "entity")):
            return False
        for stmt in node.body:
            if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant) and isinstance(stmt.value.value, str):
                continue
            if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
                continue
            return False
        return True


def _required(module, node):
    """The fields of an @entity class declared with `field(...)`: Volga's
    constructor refuses None for them."""
    out = []
    for stmt in node.body:
        if (
            isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)
            and isinstance(stmt.value, ast.Call) and isinstance(stmt.value.func, ast.Name)
            and module.imported(stmt.value.func.id) == ("from", "volga.api.entity", "field")
        ):
            out.append(stmt.target.id)
        elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None and isinstance(stmt.target, ast.Name):
            # Any other default: Oka cannot tell whether it is a Field.
            raise Refused("the entity field `%s` has a default Oka does not read" % stmt.target.id, stmt)
    return out


def float_bits(f):
    return struct.unpack("<q", struct.pack("<d", f))[0]


def const(v, node):
    if v is None:
        return ["const", "none", None]
    if isinstance(v, bool):
        return ["const", "bool", v]
    if isinstance(v, int):
        if not INT64[0] <= v <= INT64[1]:
            raise Refused("the int literal %d is past 64 bits" % v, node)
        return ["const", "int", v]
    if isinstance(v, float):
        return ["const", "float", float_bits(v)]
    if isinstance(v, str):
        return ["const", "str", v]
    raise Refused("a %s literal" % type(v).__name__, node)


def local_names(fn):
    """Names the function assigns (its locals, by Python's rule), comprehension
    variables aside."""
    names = set()

    def visit(node):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.ListComp, ast.GeneratorExp, ast.SetComp, ast.DictComp, ast.Lambda)):
                continue
            if isinstance(child, ast.Name) and isinstance(child.ctx, ast.Store):
                names.add(child.id)
            visit(child)

    for stmt in fn.body:
        visit(stmt)
    return names


class Function:
    def __init__(self, module, fn, decl):
        self.module = module
        self.fn = fn
        self.style = decl["style"]
        self.slots = {}
        self.count = 0
        self.scopes = []
        self.depth = 0
        self.params = {}
        self.locals = local_names(fn)
        a = fn.args
        if a.vararg or a.kwarg or getattr(a, "posonlyargs", []):
            raise Refused("`*args`, `**kwargs` or positional-only parameters", fn)
        params = list(a.args)
        inputs = decl["inputs"]
        args = set(decl["args"])
        defaults = dict(zip([p.arg for p in params[len(params) - len(a.defaults):]], a.defaults))
        for kw, d in zip(a.kwonlyargs, a.kw_defaults):
            params.append(kw)
            if d is not None:
                defaults[kw.arg] = d
        for i, p in enumerate(params):
            if i < len(inputs) and p not in a.kwonlyargs:
                self.params[p.arg] = ["input", i]
            elif p.arg in args:
                self.params[p.arg] = ["arg", p.arg]
            elif p.arg in defaults and isinstance(defaults[p.arg], ast.Constant):
                self.params[p.arg] = const(defaults[p.arg].value, p)
            else:
                raise Refused("parameter `%s` has a default that is not a literal" % p.arg, p)
            if p.arg in self.locals:
                raise Refused("parameter `%s` is assigned in the body" % p.arg, p)

    def slot(self, name):
        if name not in self.slots:
            self.slots[name] = self.count
            self.count += 1
        return self.slots[name]

    def fresh(self):
        self.count += 1
        return self.count - 1

    # Statements.
    def block(self, stmts):
        self.depth += 1
        try:
            if self.depth > MAX_DEPTH:
                raise Refused("statements nested more than %d deep" % MAX_DEPTH, stmts[0] if stmts else None)
            out = []
            for s in stmts:
                out.extend(self.stmt(s))
            return out
        finally:
            self.depth -= 1

    def stmt(self, s):
        if isinstance(s, ast.Return):
            if s.value is None:
                raise Refused("a bare `return` (the output is None)", s)
            return [["return", self.expr(s.value)]]
        if isinstance(s, ast.Assign):
            if len(s.targets) != 1 or not isinstance(s.targets[0], ast.Name):
                raise Refused("an assignment to something other than one local name", s)
            return [["assign", self.slot(s.targets[0].id), self.expr(s.value)]]
        if isinstance(s, ast.AnnAssign):
            if not isinstance(s.target, ast.Name) or s.value is None:
                raise Refused("an annotated assignment to something other than one local name", s)
            return [["assign", self.slot(s.target.id), self.expr(s.value)]]
        if isinstance(s, ast.AugAssign):
            if not isinstance(s.target, ast.Name) or type(s.op) not in BINOPS:
                raise Refused("an augmented assignment to something other than one local name", s)
            name = s.target.id
            current = ["local", self.slot(name)]
            return [["assign", self.slot(name), ["bin", BINOPS[type(s.op)], current, self.expr(s.value)]]]
        if isinstance(s, ast.If):
            return [["if", self.expr(s.test), self.block(s.body), self.block(s.orelse)]]
        if isinstance(s, ast.For):
            if s.orelse or not isinstance(s.target, ast.Name):
                raise Refused("a `for` loop with an `else` or a target that is not one name", s)
            for n in ast.walk(s):
                if isinstance(n, (ast.Break, ast.Continue)):
                    raise Refused("`break` or `continue`", n)
            return [["for", self.slot(s.target.id), self.expr(s.iter), self.block(s.body)]]
        if isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant) and isinstance(s.value.value, str):
            return []
        if isinstance(s, ast.Pass):
            return []
        if isinstance(s, ast.Expr):
            raise Refused("an expression statement (a call for its effect)", s)
        raise Refused("a `%s` statement" % type(s).__name__.lower(), s)

    # Expressions.
    def name(self, node):
        n = node.id
        for scope in reversed(self.scopes):
            if n in scope:
                return ["local", scope[n]]
        if n in self.locals:
            return ["local", self.slot(n)]
        if n in self.params:
            return self.params[n]
        raise Refused("the global `%s`" % n, node)

    def expr(self, e):
        # Oka's reader takes IR nested 48 deep at most, and JSON readers
        # refuse deeper: a deep expression is refused here, alone.
        self.depth += 1
        try:
            if self.depth > MAX_DEPTH:
                raise Refused("an expression nested more than %d deep" % MAX_DEPTH, e)
            return self.expr_at(e)
        finally:
            self.depth -= 1

    def expr_at(self, e):
        if isinstance(e, ast.Constant):
            return const(e.value, e)
        if isinstance(e, ast.Name):
            return self.name(e)
        if isinstance(e, ast.BinOp):
            if type(e.op) not in BINOPS:
                raise Refused("the operator `%s`" % type(e.op).__name__, e)
            return ["bin", BINOPS[type(e.op)], self.expr(e.left), self.expr(e.right)]
        if isinstance(e, ast.UnaryOp):
            kind = {ast.USub: "neg", ast.UAdd: "pos", ast.Not: "not"}.get(type(e.op))
            if kind is None:
                raise Refused("the operator `~`", e)
            return [kind, self.expr(e.operand)]
        if isinstance(e, ast.BoolOp):
            return ["and" if isinstance(e.op, ast.And) else "or", [self.expr(v) for v in e.values]]
        if isinstance(e, ast.Compare):
            ops = [CMPOPS[type(o)] for o in e.ops]
            args = [e.left] + list(e.comparators)
            for i, o in enumerate(ops):
                if o in ("is", "isnot") and not (
                    isinstance(args[i + 1], ast.Constant) and args[i + 1].value is None
                ):
                    raise Refused("`is` with something other than None", e)
            return ["cmp", ops, [self.expr(a) for a in args]]
        if isinstance(e, ast.IfExp):
            return ["ifexp", self.expr(e.test), self.expr(e.body), self.expr(e.orelse)]
        if isinstance(e, ast.Attribute):
            return self.attribute(e)
        if isinstance(e, ast.Subscript):
            key = e.slice
            if sys.version_info < (3, 9) or isinstance(key, ast.Slice):
                raise Refused("a slice", e)
            if isinstance(key, ast.Constant) and isinstance(key.value, str):
                if self.style == "volga":
                    raise Refused("`[%r]` of a Volga entity (it reads fields as `dep.%s`)" % (key.value, key.value), e)
                return ["field", self.expr(e.value), key.value]
            return ["index", self.expr(e.value), self.expr(key)]
        if isinstance(e, ast.Call):
            return self.call(e)
        if isinstance(e, ast.JoinedStr):
            parts = []
            for v in e.values:
                if isinstance(v, ast.Constant):
                    parts.append(["const", "str", v.value])
                elif isinstance(v, ast.FormattedValue) and v.conversion == -1 and v.format_spec is None:
                    parts.append(self.expr(v.value))
                else:
                    raise Refused("an f-string with a format spec or conversion", e)
            return ["fstr", parts]
        if isinstance(e, (ast.ListComp, ast.GeneratorExp)):
            return self.comprehension(e, "list" if isinstance(e, ast.ListComp) else "gen")
        if isinstance(e, (ast.List, ast.Tuple)):
            return ["list", [self.expr(x) for x in e.elts]]
        if isinstance(e, ast.Dict):
            fields = []
            for k, v in zip(e.keys, e.values):
                if not (isinstance(k, ast.Constant) and isinstance(k.value, str)):
                    raise Refused("a dict whose keys are not string literals", e)
                fields.append([k.value, self.expr(v)])
            if len({k for k, _ in fields}) != len(fields):
                raise Refused("a dict with a repeated key", e)
            return ["record", fields, "dict"]
        raise Refused("a `%s` expression" % type(e).__name__, e)

    def attribute(self, e):
        base = e.value
        if isinstance(base, ast.Name) and not self.is_local(base.id):
            # math.pi, timezone.utc, ... as values.
            what = self.module.imported(base.id)
            if what == ("module", "math") and e.attr in ("pi", "e", "inf", "tau"):
                import math
                return const(getattr(math, e.attr), e)
            raise Refused("`%s.%s`" % (base.id, e.attr), e)
        if self.style != "volga":
            raise Refused("attribute `.%s` of a dict (plain UDFs read fields as `d[\"name\"]`)" % e.attr, e)
        return ["field", self.expr(base), e.attr]

    def is_local(self, name):
        return name in self.params or name in self.locals or any(name in s for s in self.scopes)

    def comprehension(self, e, kind):
        if len(e.generators) != 1:
            raise Refused("a comprehension of several `for`s", e)
        g = e.generators[0]
        if not isinstance(g.target, ast.Name) or getattr(g, "is_async", 0):
            raise Refused("a comprehension whose target is not one name", e)
        it = self.expr(g.iter)
        slot = self.fresh()
        self.scopes.append({g.target.id: slot})
        try:
            conds = [self.expr(c) for c in g.ifs]
            elt = self.expr(e.elt)
        finally:
            self.scopes.pop()
        return ["comp", kind, slot, it, elt, conds]

    def call(self, e):
        if any(isinstance(a, ast.Starred) for a in e.args) or any(k.arg is None for k in e.keywords):
            raise Refused("a call with `*` or `**`", e)
        f = e.func
        if isinstance(f, ast.Attribute) and isinstance(f.value, (ast.Name, ast.Attribute)) and f.attr in ("now", "utcnow"):
            if self.is_datetime_class(f.value):
                return self.now(e, f.attr)
        args = [self.expr(a) for a in e.args]
        if isinstance(f, ast.Name) and not self.is_local(f.id):
            if f.id in BUILTINS and self.module.builtin(f.id):
                if f.id == "dict":
                    if e.args:
                        raise Refused("`dict(...)` with positional arguments", e)
                    return ["record", [[k.arg, self.expr(k.value)] for k in e.keywords], "dict"]
                if e.keywords:
                    raise Refused("`%s` with keyword arguments" % f.id, e)
                if f.id == "sum" and sys.version_info >= (3, 12):
                    raise Refused("`sum` (CPython 3.12 and later add floats with compensation)", e)
                return ["call", f.id, args]
            what = self.module.imported(f.id)
            if what is not None and what[0] == "from" and what[1] == "math" and what[2] in MATH and not e.keywords:
                return ["call", "math." + what[2], args]
            if self.style == "volga" and self.module.entity_class(f.id):
                if e.args:
                    raise Refused("an entity built with positional arguments", e)
                fields = [[k.arg, self.expr(k.value)] for k in e.keywords]
                return ["record", fields, "entity", self.module.required_fields(f.id)]
            if what is not None and what[0] == "from" and what[1] == "datetime" and what[2] == "datetime":
                raise Refused("`datetime(...)`", e)
            raise Refused("a call of `%s`" % f.id, e)
        if isinstance(f, ast.Attribute):
            base = f.value
            if isinstance(base, ast.Name) and not self.is_local(base.id):
                what = self.module.imported(base.id)
                if what == ("module", "math") and f.attr in MATH and not e.keywords:
                    return ["call", "math." + f.attr, args]
                raise Refused("a call of `%s.%s`" % (base.id, f.attr), e)
            if f.attr == "get" and self.style != "volga" and len(e.args) == 1 and not e.keywords:
                key = e.args[0]
                if isinstance(key, ast.Constant) and isinstance(key.value, str):
                    return ["get", self.expr(base), key.value]
            if f.attr in METHODS and not e.keywords:
                return ["method", self.expr(base), f.attr, args]
            raise Refused("a call of the method `.%s`" % f.attr, e)
        raise Refused("a call of something that is not a name", e)

    def is_datetime_class(self, node):
        """Whether `node` names `datetime.datetime` (`from datetime import
        datetime`, or `import datetime` and `datetime.datetime`)."""
        if isinstance(node, ast.Name):
            return not self.is_local(node.id) and self.module.imported(node.id) == ("from", "datetime", "datetime")
        return (
            isinstance(node, ast.Attribute) and node.attr == "datetime" and isinstance(node.value, ast.Name)
            and not self.is_local(node.value.id) and self.module.imported(node.value.id) == ("module", "datetime")
        )

    def now(self, e, which):
        if e.keywords:
            raise Refused("`datetime.%s` with keyword arguments" % which, e)
        if which == "utcnow" and not e.args:
            return ["now"]
        if which == "now" and not e.args:
            if self.style != "volga":
                raise Refused("`datetime.now()` in a plain UDF (a naive local time; Oka's answer is UTC)", e)
            t = time.localtime()
            if t.tm_gmtoff != 0 or time.timezone != 0 or time.daylight:
                raise Refused("`datetime.now()` is local time here, not UTC (set TZ=UTC to translate it)", e)
            return ["now"]
        if which == "now" and len(e.args) == 1:
            a = e.args[0]
            if (
                isinstance(a, ast.Attribute) and a.attr == "utc" and isinstance(a.value, ast.Name)
                and not self.is_local(a.value.id)
                and self.module.imported(a.value.id) == ("from", "datetime", "timezone")
            ):
                return ["now"]
        raise Refused("`datetime.%s` with arguments other than `timezone.utc`" % which, e)


def translate(decl):
    try:
        tree = ast.parse(decl["source"], decl["path"])
    except SyntaxError as e:
        raise Refused("the module does not parse: %s" % e.msg)
    module = Module(tree)
    if module.dynamic:
        raise Refused("the module uses %s, which can change its names at run time" % ", ".join(module.dynamic))
    name = decl["function"]
    fn = module.only(name)
    if not isinstance(fn, ast.FunctionDef):
        raise Refused("`%s` is not one plain function definition at the module's top level" % name)
    for d in fn.decorator_list:
        ok = (
            decl["style"] == "volga" and isinstance(d, ast.Call) and isinstance(d.func, ast.Name)
            and module.imported(d.func.id) == ("from", "volga.api.on_demand", "on_demand")
        )
        if not ok:
            raise Refused("a decorator other than Volga's `@on_demand`", d)
    f = Function(module, fn, decl)
    body = f.block(fn.body)
    return {"slots": f.count, "body": body}


def main():
    # The worker's memory limit (argv[1], MiB; 0: none) holds here too.
    mib = int(sys.argv[1]) if len(sys.argv) > 1 else 0
    if mib > 0:
        import resource

        limit = mib << 20
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    decls = json.load(sys.stdin)
    out = []
    for decl in decls:
        try:
            out.append({"ir": translate(decl)})
        except Refused as e:
            out.append({"refused": e.why, "line": e.line})
        except RecursionError:
            out.append({"refused": "the function is nested too deeply to read", "line": None})
        except MemoryError:
            out.append({"refused": "reading the module needs more memory than --python-memory-mib", "line": None})
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
