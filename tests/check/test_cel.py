"""The CEL compiler's pieces: literals that round-trip, and the offline evaluator's behaviour."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpufleet.check.cel import lit, specs_of
from gpufleet.check.offline import OfflinePolicy
from gpufleet.errors import InputError

# cel-expr-python 0.1.3 cuts a Python string passed in as data at its first NUL (a binding limitation;
# no Kubernetes name, label or annotation can hold one), so the generated text leaves NUL out.
TEXT = st.text(alphabet=st.characters(codec="utf-8", exclude_characters="\x00"))
VALUES = st.recursive(
    st.booleans() | st.integers(-(2**63), 2**63 - 1) | TEXT,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(TEXT, inner, max_size=4),
    max_leaves=20,
)


@given(VALUES)
def test_literals_evaluate_back_to_the_value(value: Any) -> None:
    spec = {"validations": [{"expression": f"object.value == {lit(value)}", "messageExpression": "'differs'"}]}
    assert OfflinePolicy(spec).judge({"value": value}, "ns") == []


@pytest.mark.parametrize(
    ("path", "obj", "count"),
    [
        (("spec", "template", "spec"), {"spec": {"template": {"spec": {"containers": []}}}}, 1),
        (("spec", "template", "spec"), {"spec": {}}, 0),
        (
            ("spec", "groups", "[]", "template", "spec"),
            {"spec": {"groups": [{"template": {"spec": {}}}, {"other": 1}]}},
            1,
        ),
        (
            ("spec", "roles", "{}", "template", "spec"),
            {"spec": {"roles": {"a": {"template": {"spec": {}}}, "b": {"template": {"spec": {}}}}}},
            2,
        ),
    ],
    ids=["plain", "missing", "list-skips-incomplete-items", "map-values"],
)
def test_pod_spec_paths_find_what_the_python_walk_finds(path: tuple[str, ...], obj: dict[str, Any], count: int) -> None:
    spec = {"validations": [{"expression": f"size({specs_of(path)}) == {count}", "messageExpression": "'wrong count'"}]}
    assert OfflinePolicy(spec).judge(obj, "ns") == []


def test_a_runtime_error_denies_as_under_failure_policy_fail() -> None:
    spec = {"validations": [{"expression": "object.missing == 1", "messageExpression": "'x'"}]}
    (message,) = OfflinePolicy(spec).judge({}, "ns")
    assert message.startswith("EvaluationError: ")


def test_an_expression_that_does_not_compile_is_an_input_error() -> None:
    with pytest.raises(InputError, match="does not compile"):
        OfflinePolicy({"validations": [{"expression": "1 + 'a'", "messageExpression": "'x'"}]})


def test_the_kubernetes_list_functions_sum_and_max() -> None:
    spec = {
        "validations": [
            {"expression": "[1, 2, 3].sum() == 6 && [4, 9, 2].max() == 9 && [].sum() == 0", "messageExpression": "'x'"}
        ]
    }
    assert OfflinePolicy(spec).judge({}, "ns") == []
