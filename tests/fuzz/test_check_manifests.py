"""Manifests for ``gpufleet check``: YAML streams of the objects teams apply, fuzzed and mangled.

Objects come from the webhook suite's manifest strategy (every governed kind, right and wrong
values), wrapped in ``kind: List`` documents or not, then broken as YAML text. Property: reading and
judging gives a verdict per object, or an InputError whose every problem names the file and a line.
"""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from hypothesis import example, given, settings
from hypothesis import strategies as st

from gpufleet.check.documents import parse
from gpufleet.check.facts import AdmissionFacts, admission_facts
from gpufleet.check.gate import check
from gpufleet.errors import InputError
from gpufleet.policy import load_policy, resolve
from tests.fuzz.strategies import BOMB, GARBAGE_TEXT, JSON_LIKE, mutated
from tests.fuzz.tally import ran
from tests.support import EXAMPLES
from tests.webhook.manifest_strategies import manifests

FILE = "fuzz/manifests.yaml"
FACTS: AdmissionFacts = admission_facts(resolve(load_policy(EXAMPLES / "fleet.yaml")))
OBJECTS = manifests(FACTS).map(lambda pair: pair[0])
DOCUMENTS = st.one_of(
    OBJECTS,
    OBJECTS.flatmap(mutated),
    st.lists(OBJECTS, max_size=3).map(lambda items: {"apiVersion": "v1", "kind": "List", "items": items}),
    JSON_LIKE,
)


@st.composite
def streams(draw: st.DrawFn) -> str:
    documents = draw(st.lists(DOCUMENTS, max_size=4))
    text = yaml.safe_dump_all(documents, sort_keys=False, allow_unicode=draw(st.booleans()))
    op = draw(st.sampled_from(["none", "none", "cut", "double-line", "bomb", "garbage"]))
    lines = text.splitlines(keepends=True)
    if op == "cut" and text:
        return text[: draw(st.integers(0, len(text) - 1))]
    if op == "double-line" and lines:
        i = draw(st.integers(0, len(lines) - 1))
        lines.insert(i, lines[i])
    elif op == "bomb":
        lines += ["---\n", BOMB, "\n"]
    elif op == "garbage":
        lines.insert(draw(st.integers(0, len(lines))), draw(GARBAGE_TEXT))
    return "".join(lines)


def assert_judged_or_explained(text: str) -> str:
    try:
        sources = parse(text, FILE)
    except InputError as exc:
        assert exc.problems
        for problem in exc.problems:
            assert problem.file == FILE, problem
            assert problem.message, problem
            if "no Kubernetes objects" not in problem.message:
                assert problem.line is not None, problem
        return "refused"
    assert sources  # a file that held no object was refused above
    verdicts = check(FACTS, sources, "default")
    assert len(verdicts) == len(sources)
    return "judged"


def _doc(obj: Any) -> str:
    return yaml.safe_dump(obj, sort_keys=False)


@pytest.mark.slow
@settings(settings.get_profile("gpufleet-fuzz"))
@given(text=streams())
@example(text="")
@example(text="---\n---\n# only comments\n")
@example(text="apiVersion: v1\nkind: List\nitems: []\n")
@example(text="apiVersion: batch/v1\nkind: Job\nkind: Pod\n")
@example(text=BOMB)
@example(text="apiVersion: v1\nkind: Pod\nmetadata: &m {labels: *m}\n")
def test_manifests_are_judged_or_every_problem_is_located(text: str) -> None:
    ran("manifests (check)", assert_judged_or_explained(text))
