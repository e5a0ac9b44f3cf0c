"""Read a policy file and report every mistake in it at once, each with its line and column.

PyYAML's node tree keeps where each value stands in the file; pydantic reports where a value is
wrong as a path of keys. Joining the two lets every error name file, line, column and field path.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from gpufleet.errors import InputError, Problem
from gpufleet.policy.checks import cross_check
from gpufleet.policy.model import FleetPolicy
from gpufleet.yamldoc import read_single

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


def _validation_problems(doc: Document, error: ValidationError) -> Iterator[Problem]:
    """One problem per place in the file; a union's alternatives are merged into one message."""
    merged: dict[PathKey, list[str]] = {}
    first_loc: dict[PathKey, tuple[Key, ...]] = {}
    missing: dict[PathKey, Key] = {}
    for detail in error.errors(include_url=False):
        loc = tuple(detail["loc"])
        text = detail["msg"]
        if detail["type"] == "extra_forbidden":
            text = "unknown field (check the spelling; gpufleet schema lists the fields)"
        elif detail["type"] == "missing" and loc:
            # the file cannot locate a field it lacks: place it at its parent, but name the field
            text, loc = "field required", loc[:-1]
        resolved, _, _ = doc.locate(loc)
        key = resolved if resolved else loc
        if detail["type"] == "missing" and detail["loc"]:
            key = (*key, detail["loc"][-1])
            missing[key] = detail["loc"][-1]
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


def parse_policy(text: str, file: str = "<policy>") -> FleetPolicy:
    """Validate a policy's text: field by field, then across fields; raise every problem at once."""
    doc = read_document(text, file)
    if not isinstance(doc.data, dict):
        line, column = doc.marks.get((), (1, 1))
        got = "an empty file" if doc.data is None else f"a {type(doc.data).__name__}"
        message = f"expected a FleetPolicy mapping at the top level, got {got}"
        raise InputError([Problem(message=message, file=file, line=line, column=column)])
    try:
        policy = FleetPolicy.model_validate(doc.data)
    except ValidationError as exc:
        raise InputError(list(_validation_problems(doc, exc))) from None
    problems = [doc.problem(loc, message) for loc, message in cross_check(policy)]
    if problems:
        raise InputError(problems)
    return policy


def load_policy(path: Path) -> FleetPolicy:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError.one("no such file", file=str(path)) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError.one(f"cannot read the file: {exc}", file=str(path)) from None
    return parse_policy(text, str(path))
