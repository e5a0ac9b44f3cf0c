"""The CEL helper and the Kubernetes library functions it adds to cel-expr-python."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpufleet.validation import cel
from gpufleet.validation.cel_library import cel_equal


def run(expression: str, **variables: Any) -> Any:
    names = tuple(variables) or cel.CRD_RULE_VARIABLES
    return cel.evaluate(cel.compile(expression, variables=names), variables)


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        pytest.param("[1, 2, 3].isSorted()", True, id="isSorted-ints"),
        pytest.param("['a', 'b', 'b', 'c'].isSorted()", True, id="isSorted-strings-with-ties"),
        pytest.param("[2.0, 1.0].isSorted()", False, id="isSorted-doubles-descending"),
        pytest.param("[].isSorted()", True, id="isSorted-empty"),
        pytest.param("[1, 3].sum()", 4, id="sum-ints"),
        pytest.param("[1.0, 3.5].sum()", 4.5, id="sum-doubles"),
        pytest.param("[].sum()", 0, id="sum-empty-is-zero"),
        pytest.param("[1, 3].min()", 1, id="min"),
        pytest.param("[1, 3].max()", 3, id="max"),
        pytest.param("['b', 'a'].min()", "a", id="min-strings"),
        pytest.param("[1, 2, 2, 3].indexOf(2)", 1, id="indexOf-first"),
        pytest.param("[1, 2, 2, 3].lastIndexOf(2)", 2, id="lastIndexOf-last"),
        pytest.param("[1, 2].indexOf(5)", -1, id="indexOf-missing"),
        pytest.param("[true, 1].indexOf(1)", 1, id="indexOf-bool-is-not-int"),
        pytest.param("[{'a': 1}, {'a': 2}].indexOf({'a': 2})", 1, id="indexOf-maps"),
        pytest.param("'abc 123 def 456'.find('[0-9]+')", "123", id="find"),
        pytest.param("'abc'.find('[0-9]+')", "", id="find-no-match"),
        pytest.param("'abc 123 def 456'.findAll('[0-9]+')", ["123", "456"], id="findAll"),
        pytest.param("'abc 123 def 456'.findAll('[0-9]+', 1)", ["123"], id="findAll-limit"),
        pytest.param("'abc 123 def 456'.findAll('[0-9]+', -1)", ["123", "456"], id="findAll-negative-limit-is-all"),
        pytest.param("'abc 123'.findAll('[0-9]+', 0)", [], id="findAll-zero-limit"),
        pytest.param("sets.contains([1, 2, 3, 4], [2, 3])", True, id="sets.contains"),
        pytest.param("sets.contains([1, 2], [3])", False, id="sets.contains-missing"),
        pytest.param("sets.contains([], [])", True, id="sets.contains-empty"),
        pytest.param("sets.equivalent([1, 2, 3], [3, 2, 1, 1])", True, id="sets.equivalent-ignores-order-and-dups"),
        pytest.param("sets.equivalent([1, 2], [1, 2, 3])", False, id="sets.equivalent-differs"),
        pytest.param("sets.intersects([1, 2], [2, 3])", True, id="sets.intersects"),
        pytest.param("sets.intersects([1], [2])", False, id="sets.intersects-disjoint"),
        pytest.param("'GPU'.lowerAscii() == 'gpu'", True, id="strings-extension"),
        pytest.param("{'a': 1}.?b.orValue(7)", 7, id="optional-extension"),
        pytest.param("cel.bind(x, 2, x * x)", 4, id="bindings-extension"),
        pytest.param("math.greatest(1, 5, 3)", 5, id="math-extension"),
    ],
)
def test_library_function(expression: str, expected: Any) -> None:
    result = run(expression)
    assert result == expected
    assert type(result) is type(expected)


@pytest.mark.parametrize(
    ("expression", "fragment"),
    [
        pytest.param("[].min()", "min called on empty list", id="min-empty"),
        pytest.param("[].max()", "max called on empty list", id="max-empty"),
        pytest.param("[9223372036854775807, 1].sum()", "overflow", id="sum-overflow"),
        pytest.param("['a', 1].sum()", "numbers", id="sum-not-numbers"),
        pytest.param("{'a': 1}.b", "b", id="missing-key"),
    ],
)
def test_runtime_errors_raise_evaluation_error(expression: str, fragment: str) -> None:
    with pytest.raises(cel.CelEvaluationError, match=fragment):
        run(expression)


@pytest.mark.parametrize(
    ("expression", "variables"),
    [
        pytest.param("1 + 'a'", cel.CRD_RULE_VARIABLES, id="type-error"),
        pytest.param("self.all(x,", cel.CRD_RULE_VARIABLES, id="syntax-error"),
        pytest.param(
            "quantity('1Gi').isGreaterThan(quantity('1G'))",
            cel.CRD_RULE_VARIABLES,
            id="unimplemented-library",
        ),
        pytest.param("object.metadata.name == 'x'", cel.CRD_RULE_VARIABLES, id="admission-variable-in-crd-rule"),
        pytest.param("self.x == 1", cel.ADMISSION_VARIABLES, id="crd-variable-in-admission"),
    ],
)
def test_compile_errors(expression: str, variables: tuple[str, ...]) -> None:
    with pytest.raises(cel.CelCompileError):
        cel.compile(expression, variables=variables)


def test_admission_variables_bind_the_object() -> None:
    program = cel.compile(
        "has(object.metadata.labels) && ['team', 'model'].all(l, l in object.metadata.labels)",
        variables=cel.ADMISSION_VARIABLES,
    )
    labelled = {"metadata": {"labels": {"team": "a", "model": "m"}}}
    assert cel.evaluate(program, {"object": labelled}) is True
    assert cel.evaluate(program, {"object": {"metadata": {"labels": {"team": "a"}}}}) is False
    assert cel.evaluate(program, {"object": {"metadata": {}}}) is False


def test_unbound_variable_is_an_evaluation_error() -> None:
    with pytest.raises(cel.CelEvaluationError, match="oldSelf"):
        cel.evaluate(cel.compile("self == oldSelf"), {"self": 1})


def test_programs_are_cached_by_expression() -> None:
    assert cel.compile("self.a == 1") is cel.compile("self.a == 1")


values = st.lists(st.integers(min_value=-1000, max_value=1000), max_size=12)


@given(values)
def test_sum_min_max_match_python(items: list[int]) -> None:
    assert run("self.sum()", self=items) == sum(items)
    if items:
        assert run("self.min()", self=items) == min(items)
        assert run("self.max()", self=items) == max(items)


@given(values)
def test_is_sorted_matches_python(items: list[int]) -> None:
    assert run("self.isSorted()", self=items) == (items == sorted(items))


@given(values, st.integers(min_value=-3, max_value=3))
def test_index_of_and_last_index_of_bracket_every_occurrence(items: list[int], needle: int) -> None:
    first = run("self.indexOf(n)", self=items, n=needle)
    last = run("self.lastIndexOf(n)", self=items, n=needle)
    positions = [i for i, item in enumerate(items) if item == needle]
    assert (first, last) == ((positions[0], positions[-1]) if positions else (-1, -1))


@given(values, values)
def test_sets_functions_match_python_sets(left: list[int], right: list[int]) -> None:
    assert run("sets.contains(a, b)", a=left, b=right) == set(right).issubset(left)
    assert run("sets.equivalent(a, b)", a=left, b=right) == (set(left) == set(right))
    assert run("sets.intersects(a, b)", a=left, b=right) == bool(set(left) & set(right))


@pytest.mark.parametrize(
    ("left", "right", "equal"),
    [
        pytest.param(1, 1.0, True, id="int-double"),
        pytest.param(True, 1, False, id="bool-int"),
        pytest.param([1, True], [1, True], True, id="lists"),
        pytest.param({"a": [1]}, {"a": [1.0]}, True, id="nested"),
        pytest.param({"a": 1}, {"b": 1}, False, id="different-keys"),
    ],
)
def test_cel_equality(left: Any, right: Any, equal: bool) -> None:
    assert cel_equal(left, right) is equal
