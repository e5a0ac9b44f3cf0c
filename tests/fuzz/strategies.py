"""Hypothesis strategies shared by the input families: plausible mutations of real inputs, and garbage.

A mutation starts from a document that loads (a bundled example, a conformance scenario) and breaks
it the way people do: a key deleted or misspelt, a value of the wrong type, negative, huge, or in
another script, a subtree repeated (dumped as a YAML alias), a line written twice (a duplicate key),
an alias bomb pasted in, the text cut short. Sizes stay small so every example is cheap.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import yaml
from hypothesis import strategies as st

HUGE_INTS = [2**31, 2**63, -(2**63) - 1, 2**64, 10**30, -(10**30)]
TEXTS = ["", " ", "ü", "名前", "🚀", "a" * 300, "\u202e", "0x1F", "1e309", "NaN", "null", "~", "yes", "-1", "01"]
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 20),
    st.integers(),
    st.sampled_from(HUGE_INTS),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from(TEXTS),
    st.text(max_size=12),
)
JSON_LIKE = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=12,
)

Path = tuple[str | int, ...]


def paths(data: Any, prefix: Path = ()) -> list[Path]:
    """Every place in ``data`` (the root too), depth first."""
    out: list[Path] = [prefix]
    if isinstance(data, dict):
        for key, value in data.items():
            out += paths(value, (*prefix, key))
    elif isinstance(data, list):
        for index, value in enumerate(data):
            out += paths(value, (*prefix, index))
    return out


def _cyclic(data: Any, inside: frozenset[int] = frozenset()) -> bool:
    if not isinstance(data, dict | list):
        return False
    if id(data) in inside:
        return True
    children = data.values() if isinstance(data, dict) else data
    return any(_cyclic(child, inside | {id(data)}) for child in children)


def _parent(data: Any, path: Path) -> Any:
    node = data
    for key in path[:-1]:
        node = node[key]
    return node


@st.composite
def mutated(draw: st.DrawFn, original: Any, *, max_mutations: int = 3) -> Any:
    """``original`` with one to ``max_mutations`` structural mutations."""
    data = copy.deepcopy(original)
    for _ in range(draw(st.integers(1, max_mutations))):
        places = [p for p in paths(data) if p]
        if not places:
            return draw(JSON_LIKE)
        path = draw(st.sampled_from(places))
        parent, key = _parent(data, path), path[-1]
        op = draw(st.sampled_from(["delete", "replace", "replace", "rename", "share", "grow", "negate"]))
        if op == "delete":
            del parent[key]
        elif op == "replace":
            parent[key] = draw(JSON_LIKE)
        elif op == "rename" and isinstance(parent, dict):
            parent[draw(st.text(min_size=1, max_size=10)) + str(key)] = parent.pop(key)
        elif op == "share":  # the same object twice: safe_dump writes an anchor and an alias
            other = draw(st.sampled_from([p for p in paths(data) if p]))
            before = copy.deepcopy(data)
            _parent(data, other)[other[-1]] = parent[key]
            if _cyclic(data):  # a subtree inside itself: the recursive case is a test of its own
                data = before
        elif op == "grow" and isinstance(parent[key], list) and parent[key]:
            parent[key] = parent[key] * draw(st.integers(2, 4))
        elif op == "negate" and isinstance(parent[key], int) and not isinstance(parent[key], bool):
            parent[key] = -parent[key] - draw(st.integers(0, 2**64))
    return data


@st.composite
def tweaked(draw: st.DrawFn, original: Any) -> Any:
    """``original`` with a few numbers changed to other small ones: mostly still valid, so the code after
    the loader (planning, rendering, the twin's cycles) runs on values nobody wrote a test for."""
    data = copy.deepcopy(original)
    numbers = [p for p in paths(data) if p and isinstance(_parent(data, p)[p[-1]], int)]
    for path in draw(st.lists(st.sampled_from(numbers), max_size=3)) if numbers else []:
        _parent(data, path)[path[-1]] = draw(st.integers(0, 64))
    return data


BOMB = "\n".join(
    [
        'bomb0: &b0 ["x", "x", "x", "x", "x", "x", "x", "x", "x"]',
        *(f"bomb{i}: &b{i} [{', '.join([f'*b{i - 1}'] * 9)}]" for i in range(1, 9)),
    ]
)


@st.composite
def yaml_text(draw: st.DrawFn, data: Any) -> str:
    """``data`` as YAML, then perhaps mutated as text: a line doubled or dropped, a bomb, a cut, a stray byte."""
    if draw(st.booleans()):
        text = yaml.safe_dump(data, sort_keys=False, allow_unicode=draw(st.booleans()))
    else:
        text = json.dumps(data, ensure_ascii=draw(st.booleans()))  # YAML 1.2 is a superset of JSON; PyYAML nearly
    op = draw(st.sampled_from(["none", "none", "double-line", "drop-line", "bomb", "cut", "insert", "recursive"]))
    lines = text.splitlines(keepends=True)
    if op == "double-line" and lines:
        i = draw(st.integers(0, len(lines) - 1))
        lines.insert(i, lines[i])
    elif op == "drop-line" and lines:
        del lines[draw(st.integers(0, len(lines) - 1))]
    elif op == "bomb":
        lines.insert(draw(st.integers(0, len(lines))), BOMB + "\n")
    elif op == "recursive":
        lines.insert(draw(st.integers(0, len(lines))), "loop: &loop [*loop]\n")
    text = "".join(lines)
    if op == "cut" and text:
        text = text[: draw(st.integers(0, len(text) - 1))]
    elif op == "insert":
        at = draw(st.integers(0, len(text)))
        stray = draw(st.sampled_from(["\t", ":", "- ", "&", "*", "!!", "{", "'", '"', "\x00", "\ufeff", "? "]))
        text = text[:at] + stray + text[at:]
    return text


GARBAGE_TEXT = st.one_of(
    st.text(max_size=200),
    st.binary(max_size=200).map(lambda b: b.decode("utf-8", "replace")),
    st.lists(st.sampled_from(["a:", " b", "- ", "[", "]", "{", "}", "&x ", "*x", "!!int ", "---\n", "\n", ": "])).map(
        "".join
    ),
)
