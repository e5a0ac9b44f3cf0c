"""Read the manifests a team wants checked: multi-document YAML files and ``kubectl get -o yaml`` Lists.

Every unreadable file or document is reported at once (file and line), so a CI gate fails with the
whole story instead of the first problem.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from gpufleet.errors import InputError, Problem
from gpufleet.yamldoc import iter_documents


@dataclass(frozen=True)
class Source:
    """One object and where it came from."""

    file: str
    document: int  # 1-based position of the YAML document in the file
    obj: dict[str, Any]
    item: int | None = None  # 0-based position inside a List document


def _items(file: str, index: int, data: Any, line: int) -> tuple[list[Source], list[Problem]]:
    if not isinstance(data, dict) or not isinstance(data.get("kind"), str):
        return [], [Problem(f"document {index} is not a Kubernetes object (no kind)", file=file, line=line)]
    if data["kind"].endswith("List") and isinstance(data.get("items"), list):
        sources, problems = [], []
        for i, item in enumerate(data["items"]):
            if isinstance(item, dict) and isinstance(item.get("kind"), str):
                sources.append(Source(file, index, item, i))
            else:
                problems.append(
                    Problem(f"item {i} of document {index} is not a Kubernetes object", file=file, line=line)
                )
        return sources, problems
    return [Source(file, index, data)], []


def parse(text: str, file: str) -> list[Source]:
    """Every object of one file's text; a file with none is an error (a gate that checked nothing must not pass)."""
    sources: list[Source] = []
    problems: list[Problem] = []
    index = 0
    try:
        for document in iter_documents(text, file):
            index += 1
            if document.data is None:
                continue
            found, wrong = _items(file, index, document.data, document.line)
            sources += found
            problems += wrong
    except InputError as exc:
        problems += exc.problems
    if not sources and not problems:
        problems.append(Problem("no Kubernetes objects in this file (nothing to check)", file=file))
    if problems:
        raise InputError(problems)
    return sources


def read(paths: list[Path], stdin: TextIO | None = None) -> list[Source]:
    """Every object in ``paths`` (``-`` is ``stdin``), in order; raise one InputError with every problem found."""
    sources: list[Source] = []
    problems: list[Problem] = []
    for path in paths:
        try:
            text = stdin.read() if str(path) == "-" and stdin is not None else path.read_text(encoding="utf-8")
        except FileNotFoundError:
            problems.append(Problem("no such file", file=str(path)))
            continue
        except (OSError, UnicodeDecodeError) as exc:
            problems.append(Problem(f"cannot read the file: {exc}", file=str(path)))
            continue
        try:
            sources += parse(text, str(path))
        except InputError as exc:
            problems += exc.problems
    if problems:
        raise InputError(problems)
    return sources
