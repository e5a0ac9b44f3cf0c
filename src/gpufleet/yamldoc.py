"""Reading YAML a user wrote: positions kept, duplicate keys refused, aliases bounded.

Every loader of user YAML (the policy, manifests for ``check``, Kueue objects for ``twin step``)
reads through here, so they agree on what is refused and how it is reported:

- A key written twice in one mapping is an error naming both lines (PyYAML keeps the last silently,
  so the first value would be ignored without a word). Keys a merge (``<<: *base``) brings in may
  be overridden; that is what merges are for.
- Aliases may not expand a document far beyond its written size (an "alias bomb" of nine lists,
  each of nine aliases to the one before, is half a billion values from 100 written), nor refer
  to a node that contains them, nor nest deeper than ``MAX_DEPTH``. The node graph is measured
  before anything is built, so the cost of reading is linear in the text.
- A scalar a constructor cannot build (an integer of more than 4,300 digits, 2024-02-30) is an error
  at its line instead of a ``ValueError`` from deep inside PyYAML.

Errors are ``InputError`` with file, line and column (1-based).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any

import yaml
from pydantic import ValidationError

from gpufleet.errors import InputError, Problem

MAX_DEPTH = 100
"""Deepest nesting of collections accepted; Kubernetes objects stay well below 30."""
MIN_EXPANSION_BUDGET = 10_000
"""Nodes any document may expand to through aliases, however small it is written."""
EXPANSION_FACTOR = 10
"""Beyond the minimum, aliases may expand a document to this many times its written nodes."""

_MERGE_TAG = "tag:yaml.org,2002:merge"


@dataclass(frozen=True)
class YamlDocument:
    """One document: its node tree (with positions), the data built from it, and its first line."""

    node: yaml.Node
    data: Any
    line: int  # 1-based


class _Loader(yaml.SafeLoader):
    """PyYAML's safe loader, with a constructor failure reported at the node it failed on."""

    def construct_object(self, node: yaml.Node, deep: bool = False) -> Any:
        try:
            return super().construct_object(node, deep=deep)
        except (ValueError, OverflowError, TypeError, IndexError, KeyError, AttributeError) as exc:
            reason = str(exc).split("; use sys.set_int_max_str_digits")[0]  # advice for programmers, not users
            raise yaml.constructor.ConstructorError(
                None, None, f"cannot read {_excerpt(node)} as {node.tag.rsplit(':', 1)[-1]}: {reason}", node.start_mark
            ) from None


_SURROGATE = re.compile("[\ud800-\udfff]")


def _construct_str(loader: _Loader, node: yaml.ScalarNode) -> str:
    """A string, with JSON's surrogate pairs (``"\\ud83d\\ude80"``) joined into their character and a
    lone surrogate refused: PyYAML keeps each escape apart, though none is a character, and whatever
    reads the string next (pydantic, JSON, the terminal) then fails on it."""
    value: str = loader.construct_scalar(node)
    if value.isascii() or not _SURROGATE.search(value):
        return value
    try:
        return value.encode("utf-16", "surrogatepass").decode("utf-16")
    except UnicodeDecodeError:
        raise yaml.constructor.ConstructorError(
            None, None, f"{_excerpt(node)} holds a lone surrogate, which is no Unicode character", node.start_mark
        ) from None


_Loader.add_constructor("tag:yaml.org,2002:str", _construct_str)


def _excerpt(node: yaml.Node) -> str:
    if isinstance(node, yaml.ScalarNode):
        text = str(node.value)
        return repr(text if len(text) <= 40 else text[:37] + "...")
    return "the value"


def _at(node: yaml.Node, message: str) -> yaml.MarkedYAMLError:
    return yaml.MarkedYAMLError(problem=message, problem_mark=node.start_mark)


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.MappingNode):
        return [child for pair in node.value for child in pair]
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    return []


def _duplicate_keys(node: yaml.MappingNode) -> None:
    seen: dict[tuple[str, str], yaml.Node] = {}
    for key, _ in node.value:
        if not isinstance(key, yaml.ScalarNode) or key.tag == _MERGE_TAG:
            continue
        first = seen.setdefault((key.tag, key.value), key)
        if first is not key:
            raise _at(key, f"duplicate key {key.value!r} (first at line {first.start_mark.line + 1})")


def measure(root: yaml.Node) -> None:
    """Refuse a node graph that is cyclic, too deep, has duplicate keys, or expands beyond the budget.

    One iterative depth-first pass over the distinct collections; the expanded size of a node (what
    the constructor and every walker after it will visit) is summed from its children's, so shared
    (aliased) nodes are measured once. "Written" counts every node and alias as it appears in the text.
    """
    if not isinstance(root, yaml.CollectionNode):
        return
    size: dict[int, int] = {}
    depth: dict[int, int] = {}
    kids: dict[int, list[yaml.Node]] = {}
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    written = 1
    while stack:
        node, done = stack.pop()
        key = id(node)
        if done:
            total, deepest = 1, 0
            for child in kids.pop(key):
                if isinstance(child, yaml.ScalarNode):
                    total, deepest = total + 1, max(deepest, 1)
                else:
                    total, deepest = total + size[id(child)], max(deepest, depth[id(child)])
            size[key], depth[key] = total, deepest + 1
            if deepest + 1 > MAX_DEPTH:
                raise _at(node, f"nested deeper than {MAX_DEPTH} levels")
            continue
        if key in size:
            continue
        if key in kids:
            raise _at(node, "an alias refers to a node that contains it (a recursive structure)")
        if isinstance(node, yaml.MappingNode):
            _duplicate_keys(node)
        children = _children(node)
        kids[key] = children
        written += len(children)
        stack.append((node, True))
        stack.extend((k, False) for k in reversed(children) if not isinstance(k, yaml.ScalarNode) and id(k) not in size)
    budget = max(MIN_EXPANSION_BUDGET, EXPANSION_FACTOR * written)
    if size[id(root)] > budget:
        raise _at(
            root,
            f"aliases expand this document to {size[id(root)]:,} values from {written:,} written "
            f"(at most {budget:,}): an alias bomb?",
        )


def _problem(exc: yaml.YAMLError, file: str) -> Problem:
    mark = getattr(exc, "problem_mark", None)
    message = getattr(exc, "problem", None) or str(exc)
    return Problem(
        message=f"not valid YAML: {message}",
        file=file,
        line=mark.line + 1 if mark is not None else None,
        column=mark.column + 1 if mark is not None else None,
    )


def _unreadable(exc: yaml.reader.ReaderError, text: str, file: str) -> Problem:
    before = text[: exc.position]
    line = before.count("\n") + 1
    column = exc.position - (before.rfind("\n") + 1) + 1
    return Problem(f"not valid YAML: control character U+{exc.character:04X} is not allowed", file, "", line, column)


def iter_documents(text: str, file: str) -> Iterator[YamlDocument]:
    """Every non-empty document of a YAML stream, in order; the first unreadable one raises InputError."""
    try:
        loader = _Loader(text)
    except yaml.reader.ReaderError as exc:  # a control character: the reader refuses the text before parsing
        raise InputError([_unreadable(exc, text, file)]) from None
    try:
        while loader.check_node():
            node = loader.get_node()
            if node is None:
                continue
            measure(node)
            yield YamlDocument(node, loader.construct_document(node), node.start_mark.line + 1)
    except yaml.YAMLError as exc:
        raise InputError([_problem(exc, file)]) from None
    except RecursionError:  # PyYAML composes recursively: a few hundred open brackets exhaust the stack
        mark = loader.get_mark()
        problem = Problem(
            f"not valid YAML: nested deeper than {MAX_DEPTH} levels", file, "", mark.line + 1, mark.column + 1
        )
        raise InputError([problem]) from None
    finally:
        loader.dispose()


def read_single(text: str, file: str) -> YamlDocument | None:
    """The one document of ``text`` (None when it holds none); a second document is an error."""
    documents = iter_documents(text, file)
    first = next(documents, None)
    for extra in documents:
        raise InputError([Problem("expected one YAML document, found a second", file=file, line=extra.line, column=1)])
    return first


# --- located data: where each value stands, so pydantic's errors can name line, column and field ---

Key = str | int
PathKey = tuple[Key, ...]


@dataclass(frozen=True)
class Document:
    """Parsed YAML data with the position of every value in it."""

    file: str
    data: Any
    marks: dict[PathKey, tuple[int, int]]  # path -> (line, column), both 1-based

    def locate(self, loc: Sequence[Key]) -> tuple[PathKey, int | None, int | None]:
        """Resolve a pydantic ``loc`` against the file, skipping the entries pydantic adds for unions."""
        resolved: PathKey = ()
        node = self.data
        for key in loc:
            child = _child(node, key)
            if child is _MISSING:
                continue  # a union member's tag (e.g. 'int', 'literal[...]'), not a place in the file
            node, resolved = child, (*resolved, key)
        # a value the file does not spell out (a default) is reported at its nearest written parent
        for depth in range(len(resolved), -1, -1):
            mark = self.marks.get(resolved[:depth])
            if mark is not None:
                return resolved, mark[0], mark[1]
        return resolved, None, None

    def problem(self, loc: Sequence[Key], message: str) -> Problem:
        resolved, line, column = self.locate(loc)
        path = format_path(resolved if resolved else loc)
        return Problem(message=message, file=self.file, path=path, line=line, column=column)


_MISSING = object()


def _child(node: Any, key: Key) -> Any:
    if isinstance(node, dict) and key in node:
        return node[key]
    if isinstance(node, list) and isinstance(key, int) and 0 <= key < len(node):
        return node[key]
    return _MISSING


def format_path(loc: Sequence[Key]) -> str:
    out = ""
    for key in loc:
        out += f"[{key}]" if isinstance(key, int) else (f".{key}" if out else str(key))
    return out


def _walk(node: yaml.Node, path: PathKey, marks: dict[PathKey, tuple[int, int]]) -> None:
    marks[path] = (node.start_mark.line + 1, node.start_mark.column + 1)
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            _walk(value_node, (*path, key_node.value), marks)
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            _walk(item, (*path, index), marks)


def read_document(text: str, file: str) -> Document:
    """Parse one YAML document, keeping positions; a syntax error becomes an InputError with its line.

    Duplicate keys, alias bombs and unbuildable scalars are refused by ``gpufleet.yamldoc``.
    """
    found = read_single(text, file)
    marks: dict[PathKey, tuple[int, int]] = {}
    if found is None:
        return Document(file=file, data=None, marks=marks)
    _walk(found.node, (), marks)
    return Document(file=file, data=found.data, marks=marks)


def validation_problems(doc: Document, error: ValidationError) -> Iterator[Problem]:
    """One problem per place in the file; a union's alternatives are merged into one message."""
    merged: dict[PathKey, list[str]] = {}
    first_loc: dict[PathKey, tuple[Key, ...]] = {}
    missing: set[PathKey] = set()
    for detail in error.errors(include_url=False):
        loc = tuple(detail["loc"])
        text = detail["msg"]
        absent: Key | None = None  # a field the file lacks: it has no place, so name it after its parent's
        if detail["type"] == "extra_forbidden":
            text = "unknown field (check the spelling; gpufleet schema lists the fields)"
        elif detail["type"] == "missing" and loc:
            text, loc, absent = "field required", loc[:-1], loc[-1]
        elif detail["type"] == "union_tag_not_found":  # a tagged union (slicing) without its tag (mode)
            text, absent = "field required", str(detail.get("ctx", {}).get("discriminator", "")).strip("'")
        resolved, _, _ = doc.locate(loc)
        key = resolved if resolved else loc
        if absent is not None:
            key = (*key, absent)
            missing.add(key)
        merged.setdefault(key, [])
        if text not in merged[key]:
            merged[key].append(text)
        first_loc.setdefault(key, loc)
    for key, texts in merged.items():
        message = texts[0] if len(texts) == 1 else "expected one of: " + "; or ".join(texts)
        problem = doc.problem(first_loc[key], message)
        if key in missing:
            problem = replace(problem, path=format_path(key))
        yield problem
