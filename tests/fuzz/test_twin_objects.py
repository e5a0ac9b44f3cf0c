"""Kueue object streams for ``twin step``: the conformance scenarios, mutated object by object.

Property: the twin runs until stable (the command's default) and reports, or the stream is refused
with an InputError whose every problem names the file and a line. Never a traceback.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import example, given, settings
from hypothesis import strategies as st

from gpufleet.errors import InputError
from gpufleet.twin.step import step
from tests.fuzz.strategies import BOMB, GARBAGE_TEXT, mutated
from tests.fuzz.tally import ran

SCENARIOS = Path(__file__).resolve().parents[1] / "twin" / "scenarios"
STREAMS: list[list[Any]] = [
    [d for d in yaml.safe_load_all(p.read_text()) if d is not None and d.get("kind") != "TwinScenario"]
    for p in sorted(SCENARIOS.glob("*.yaml"))
]
FILE = "fuzz/kueue.yaml"


@st.composite
def object_streams(draw: st.DrawFn) -> str:
    documents = list(draw(st.sampled_from(STREAMS)))
    for _ in range(draw(st.integers(1, 3))):
        if not documents:
            break
        i = draw(st.integers(0, len(documents) - 1))
        documents[i] = draw(mutated(documents[i], max_mutations=2))
    if draw(st.integers(0, 5)) == 0:
        documents = [{"apiVersion": "v1", "kind": "List", "items": documents}]
    text = yaml.safe_dump_all(documents, sort_keys=False)
    op = draw(st.sampled_from(["none", "none", "none", "cut", "double-line", "bomb"]))
    if op == "cut" and text:
        return text[: draw(st.integers(0, len(text) - 1))]
    lines = text.splitlines(keepends=True)
    if op == "double-line" and lines:
        i = draw(st.integers(0, len(lines) - 1))
        lines.insert(i, lines[i])
    elif op == "bomb":
        lines += ["---\n", BOMB, "\n"]
    return "".join(lines)


def assert_steps_or_explains(text: str) -> str:
    try:
        report = step([(FILE, text)])
    except InputError as exc:
        assert exc.problems
        for problem in exc.problems:
            assert problem.file == FILE, problem
            assert problem.message, problem
            assert problem.line is not None, problem
        return "refused"
    assert report["cycles"] is not None
    return "stepped"


@pytest.mark.slow
@settings(settings.get_profile("gpufleet-fuzz"))
@given(text=st.one_of(object_streams(), object_streams(), object_streams(), GARBAGE_TEXT))
@example(text="")
@example(text=BOMB)
@example(text="apiVersion: kueue.x-k8s.io/v1beta2\nkind: ClusterQueue\nmetadata: {name: a}\nmetadata: {name: b}\n")
def test_a_kueue_stream_steps_or_every_problem_is_located(text: str) -> None:
    ran("Kueue objects (twin step)", assert_steps_or_explains(text))
