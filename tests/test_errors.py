"""How a user's mistake is located in its one line: file, line and column, field path, message."""

from __future__ import annotations

import pytest

from gpufleet.errors import InputError, Problem


@pytest.mark.parametrize(
    ("problem", "shown"),
    [
        (
            Problem("expected an integer", "fleet.yaml", "teams[0].gpus", 3, 7),
            "fleet.yaml:3:7: teams[0].gpus: expected an integer",
        ),
        (
            Problem("expected an integer", "fleet.yaml", "teams[0].gpus", 3),
            "fleet.yaml:3: teams[0].gpus: expected an integer",
        ),
        (Problem("not a policy", "fleet.yaml"), "fleet.yaml: not a policy"),
        # a flag has no file: the flag alone locates it (it read "<input>: --ledger: ..." before)
        (Problem("needs --policy", path="--ledger"), "--ledger: needs --policy"),
        (Problem("bad column", line=2, column=5), "line 2:5: bad column"),
        (Problem("nothing to read"), "nothing to read"),
    ],
)
def test_a_problem_names_where_it_is(problem: Problem, shown: str) -> None:
    assert str(problem) == shown


def test_an_input_error_prints_every_problem_on_its_own_line() -> None:
    error = InputError([Problem("a", "x.yaml"), Problem("b", path="--trace")])
    assert str(error) == "x.yaml: a\n--trace: b"
    assert InputError.one("c", path="--to").summary() == "--to: c"
