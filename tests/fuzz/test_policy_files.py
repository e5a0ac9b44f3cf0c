"""Policy files (``plan``, ``render``, ``check``, ``webhook serve`` read them): fuzzed from the bundled examples.

Property: parsing either yields a policy that resolves, plans and renders, or raises an InputError
whose every problem names the file and a line (YAML has lines), and, when the YAML was read, the
field. Never another exception, never unbounded work.
"""

from __future__ import annotations

from typing import Any

import yaml
from hypothesis import example, given, settings
from hypothesis import strategies as st

from gpufleet.errors import InputError
from gpufleet.plan import make_plan
from gpufleet.policy import parse_policy, resolve
from gpufleet.render import render
from tests.fuzz.strategies import BOMB, GARBAGE_TEXT, mutated, tweaked, yaml_text
from tests.fuzz.tally import ran
from tests.support import EXAMPLES

FILE = "fuzz/fleet.yaml"
ORIGINALS: list[Any] = [yaml.safe_load(p.read_text()) for p in sorted(EXAMPLES.glob("*.yaml"))]
TINY = (EXAMPLES / "tiny.yaml").read_text()

POLICY_TEXTS = st.one_of(
    st.sampled_from(ORIGINALS).flatmap(mutated).flatmap(yaml_text),
    st.sampled_from(ORIGINALS).flatmap(tweaked).map(lambda data: yaml.safe_dump(data, sort_keys=False)),
    st.sampled_from(ORIGINALS).flatmap(yaml_text),
    GARBAGE_TEXT,
)


def assert_loads_or_explains(text: str) -> str:
    """The property every policy text must have (shared with the CLI fuzz and the regression table)."""
    try:
        fleet = resolve(parse_policy(text, FILE))
    except InputError as exc:
        assert exc.problems
        for problem in exc.problems:
            assert problem.file == FILE, problem
            assert problem.message, problem
            assert problem.line is not None and problem.line >= 1, problem
            if not problem.message.startswith(("not valid YAML", "expected")):
                assert problem.path, problem  # a field-level mistake names its field
        return "refused"
    make_plan(fleet)
    render(fleet)
    return "planned and rendered"


@settings(settings.get_profile("gpufleet-fuzz"))
@given(text=POLICY_TEXTS)
@example(text=BOMB)
@example(text=TINY + BOMB)
@example(text=TINY + "pools: []\n")  # a duplicate top-level key
@example(text=TINY.replace("gpusPerNode: 8", "gpusPerNode: 8\n    gpusPerNode: 4", 1))
@example(text="a: &a [*a]\n")
@example(text="pools: " + "[" * 400 + "]" * 400)
@example(text="apiVersion: 1" + "0" * 5000)
@example(text="kind: !!timestamp 2024-02-30")
@example(text='{"kind": "FleetPolicy", "\\udc80": 1}')  # found by the fuzzing: a key pydantic cannot name
@example(text='{"kind": "FleetPolicy", "cluster": {"provider": "\\ud83d\\ude80"}}')  # a JSON surrogate pair
@example(text="---\n---\n")
@example(text=TINY + "---\n" + TINY)
def test_a_policy_loads_or_every_problem_is_located(text: str) -> None:
    ran("policy files", assert_loads_or_explains(text))
