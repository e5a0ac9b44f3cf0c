"""Read a policy file and report every mistake in it at once, each with its line and column.

PyYAML's node tree keeps where each value stands in the file; pydantic reports where a value is
wrong as a path of keys. Joining the two (``gpufleet.yamldoc``) lets every error name file, line,
column and field path.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import ValidationError

from gpufleet.errors import InputError, Problem
from gpufleet.policy.checks import cross_check
from gpufleet.policy.model import FleetPolicy
from gpufleet.yamldoc import read_document, validation_problems


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
        raise InputError(list(validation_problems(doc, exc))) from None
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
