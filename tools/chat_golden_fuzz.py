"""Deterministic random Jinja templates for the interpreter's goldens: random
expressions over the snippet context (operators, filters, tests, methods),
random whitespace-control layouts, and random scoping (set/for/if/macro/
namespace/block set/filter block). Used by tools/gen-chat-goldens.py; the
same seed always yields the same templates."""
import random

ATOMS = ["n", "f", "s", "l", "d", "u", "words", "messages", "nil", "t", "empty", "0", "1", "-3", "2.5", "'ab'",
         "'x y'", "[1, 2]", "{'a': 1}", "none", "true", "false", "missing", "d.a", "messages[1].content", "s[1:3]",
         "l[-1]", "people", "ml", "''", "' Pad '", "0.1", "1e3", "(1, 'a')", "range(3)", "d.nested", "tools[0]"]
BINARY = ["+", "-", "*", "/", "//", "%", "**", "~", "==", "!=", "<", ">", "<=", ">=", "in", "not in", "and", "or"]
FILTERS = ["length", "upper", "lower", "trim", "list", "first", "last", "join(', ')", "join", "sort",
           "reverse|list", "unique|list", "tojson", "string", "int", "float", "abs", "round", "round(1)",
           "default('z')", "d('z', true)", "title", "capitalize", "wordcount", "center(7)", "indent(2)", "dictsort",
           "items|list", "selectattr('role')|list", "map('string')|list", "sum", "min", "max", "count",
           "batch(2)|list", "e", "safe", "replace('a','b')", "truncate(5)", "tojson(indent=1)",
           "tojson(sort_keys=true)", "select|list", "reject('none')|list", "map('upper')|list", "list|length",
           "sort(reverse=true)", "first|string", "int(5)", "float(1.5)", "format(1)"]
TESTS = ["defined", "undefined", "none", "string", "number", "mapping", "iterable", "sequence", "odd", "even",
         "integer", "float", "boolean", "true", "false", "lower", "upper", "callable", "divisibleby 2", "in l",
         "eq 1", "gt 2"]
METHODS = ["strip()", "strip('H')", "lstrip()", "rstrip('d ')", "split()", "split(',')", "split(' ', 1)",
           "rsplit(None, 1)", "splitlines()", "replace('l', 'L')", "startswith('H')", "endswith(('d', 'x'))",
           "upper()", "lower()", "title()", "capitalize()", "find('o')", "rfind('o')", "count('l')", "index('e')",
           "join(['a', 'b'])", "center(9, '*')", "ljust(8)", "zfill(6)", "partition(',')", "format(1, 2)",
           "isdigit()", "isalpha()", "get('a')", "get('zz', 0)", "items()|list", "keys()|list", "values()|list",
           "count(1)", "index(2)", "copy()", "swapcase()", "removeprefix('He')", "rpartition(' ')", "isspace()"]


def _expr(rng, depth):
    if depth == 0 or rng.random() < 0.3:
        return rng.choice(ATOMS)
    k = rng.random()
    if k < 0.35:
        return "%s %s %s" % (_expr(rng, depth - 1), rng.choice(BINARY), _expr(rng, depth - 1))
    if k < 0.65:
        return "%s|%s" % (_expr(rng, depth - 1), rng.choice(FILTERS))
    if k < 0.75:
        return "%s is %s%s" % (_expr(rng, depth - 1), rng.choice(["", "not "]), rng.choice(TESTS))
    if k < 0.85:
        return "(%s)" % _expr(rng, depth - 1)
    if k < 0.92:
        return "%s if %s else %s" % (_expr(rng, depth - 1), _expr(rng, depth - 1), _expr(rng, depth - 1))
    if k < 0.97:
        return "(%s).%s" % (_expr(rng, depth - 1), rng.choice(METHODS))
    return "not %s" % _expr(rng, depth - 1)


def expression_templates(seed, count):
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        k = rng.random()
        if k < 0.6:
            out.append("{{ %s }}" % _expr(rng, 3))
        elif k < 0.8:
            out.append("{%% for x in %s %%}{{ loop.index }}:{{ x }};{%% else %%}E{%% endfor %%}" % _expr(rng, 2))
        else:
            out.append("{%% if %s %%}A{%% else %%}B{%% endif %%}" % _expr(rng, 3))
    return out


WS_TEXT = ["", " ", "  ", "\n", "\n\n", " \n", "\n  ", "\t", "a", "b c", " x \n y ", "\r\n", "\u00a0", "\u3000\n",
           "\n\t \n"]


def _ws(rng):
    return "".join(rng.choice(WS_TEXT) for _ in range(rng.randint(0, 3)))


def _mod(rng):
    return rng.choice(["", "", "-", "+"])


def _ws_block(rng, depth):
    parts = []
    for _ in range(rng.randint(1, 4)):
        parts.append(_ws(rng))
        k = rng.random()
        if k < 0.3:
            parts.append("{{%s %s %s}}" % (rng.choice(["", "-"]), rng.choice(["1", "'v'", "x"]), rng.choice(["", "-"])))
        elif k < 0.45:
            parts.append("{#%s c %s#}" % (_mod(rng), _mod(rng)))
        elif k < 0.65 and depth > 0:
            parts.append("{%%%s if %s %s%%}" % (_mod(rng), rng.choice(["true", "false", "x"]), _mod(rng)))
            parts.append(_ws_block(rng, depth - 1))
            if rng.random() < 0.5:
                parts.append("{%%%s else %s%%}" % (_mod(rng), _mod(rng)))
                parts.append(_ws_block(rng, depth - 1))
            parts.append("{%%%s endif %s%%}" % (_mod(rng), _mod(rng)))
        elif k < 0.85 and depth > 0:
            parts.append("{%%%s for i in [1, 2] %s%%}" % (_mod(rng), _mod(rng)))
            parts.append(_ws_block(rng, depth - 1))
            parts.append("{%%%s endfor %s%%}" % (_mod(rng), _mod(rng)))
        elif k < 0.92:
            parts.append("{%%%s set x = %d %s%%}" % (_mod(rng), rng.randint(0, 9), _mod(rng)))
        else:
            parts.append("{%%%s raw %s%%}%s{{ r }}%s{%%%s endraw %s%%}" % (
                _mod(rng), _mod(rng), _ws(rng), _ws(rng), _mod(rng), _mod(rng)))
        parts.append(_ws(rng))
    return "".join(parts)


def whitespace_templates(seed, count):
    rng = random.Random(seed)
    return [_ws_block(rng, 2) + rng.choice(["", "\n", "\n\n", "\r\n"]) for _ in range(count)]


def _scope_stmt(rng, depth, in_macro):
    k = rng.random()
    v = rng.choice(["x", "y", "z"])
    if k < 0.2:
        return "{%% set %s = %s %%}" % (v, rng.choice(["1", "2", "'s'", rng.choice("xyz"), rng.choice("xyz") + " ~ '+'"]))
    if k < 0.4:
        return "[{{ %s }}]" % v
    if k < 0.45:
        return "{%% set ns.a = %s %%}" % rng.choice(["x", "y", "z", "ns.a ~ 'n'"])
    if k < 0.5:
        return "<{{ ns.a }}>"
    if depth <= 0:
        return "[{{ %s }}]" % v
    if k < 0.62:
        test = rng.choice(["", "if %s " % rng.choice(["x", "y", "z", "i > 1"])])
        return "{%% for i in [1, 2] %s%%}%s{%% else %%}%s{%% endfor %%}" % (
            test, _scope_body(rng, depth - 1, in_macro), _scope_body(rng, depth - 1, in_macro))
    if k < 0.74:
        return "{%% if %s %%}%s{%% elif %s %%}%s{%% else %%}%s{%% endif %%}" % (
            rng.choice(["x", "y", "z", "true", "false"]), _scope_body(rng, depth - 1, in_macro), rng.choice("xyz"),
            _scope_body(rng, depth - 1, in_macro), _scope_body(rng, depth - 1, in_macro))
    if k < 0.84 and not in_macro:
        return "{%% macro %s(%s) %%}%s{%% endmacro %%}" % (
            rng.choice(["m1", "m2"]), rng.choice(["", "x", "z=3"]), _scope_body(rng, depth - 1, True))
    if k < 0.9:
        return "(%s)" % rng.choice(["{{ m1() }}", "{{ m2() }}", "{{ m1(5) }}"])
    if k < 0.95:
        return "{%% set %s %%}%s{%% endset %%}" % (v, _scope_body(rng, depth - 1, in_macro))
    return "{%% filter upper %%}%s{%% endfilter %%}" % _scope_body(rng, depth - 1, in_macro)


def _scope_body(rng, depth, in_macro=False):
    return "".join(_scope_stmt(rng, depth, in_macro) for _ in range(rng.randint(1, 4)))


def scope_templates(seed, count):
    rng = random.Random(seed)
    return ["{% set ns = namespace(a='A') %}" + _scope_body(rng, 3) for _ in range(count)]
