"""Read the manifests a team wants checked: multi-document YAML files and ``kubectl get -o yaml`` Lists.

Every unreadable file or document is reported at once (file and line), so a CI gate fails with the
whole story instead of the first problem.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

import yaml

from gpufleet.errors import InputError, Problem


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
    sources: list[Source] = []
    problems: list[Problem] = []
    loader = yaml.SafeLoader(text)
    index = 0
    try:
        while loader.check_node():
            node = loader.get_node()
            index += 1
            if node is None:
                continue
            data = loader.construct_document(node)
            if data is None:
                continue
            found, wrong = _items(file, index, data, node.start_mark.line + 1)
            sources += found
            problems += wrong
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        line = mark.line + 1 if mark else None
        problems.append(Problem(f"not valid YAML: {exc.problem}", file=file, line=line))
    finally:
        loader.dispose()
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
