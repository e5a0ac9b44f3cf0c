"""Kubernetes CEL library functions that cel-expr-python lacks, as custom functions.

The API server's CEL environment adds libraries to standard CEL (kubernetes.io, "CEL in
Kubernetes"). cel-expr-python already has the strings, optional, math and bindings extensions; this
module adds the Kubernetes **lists** library (``isSorted``, ``sum``, ``min``, ``max``, ``indexOf``,
``lastIndexOf``), the **regex** library (``find``, ``findAll``) and the **sets** extension
(``sets.contains``, ``sets.equivalent``, ``sets.intersects``) — the ones whose values are plain CEL
types. The quantity, URL, IP/CIDR and semver libraries return opaque types that cel-expr-python 0.1.3
cannot carry at runtime ("Unimplemented type"), so they are absent: an expression that uses them fails
to compile and is reported, never guessed.

A Python exception raised here becomes a CEL error value, as a runtime error does in the API server.
Regular expressions run on Python's ``re``, which agrees with RE2 for the syntax both accept.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

from cel_expr_python import cel

_INT64_MIN = -(2**63)
_INT64_MAX = 2**63 - 1


def cel_equal(left: Any, right: Any) -> bool:
    """CEL equality on plain values: numbers compare across int and double, but never with bools."""
    if isinstance(left, bool) or isinstance(right, bool):
        return isinstance(left, bool) and isinstance(right, bool) and left == right
    if isinstance(left, list) and isinstance(right, list):
        return len(left) == len(right) and all(cel_equal(a, b) for a, b in zip(left, right, strict=True))
    if isinstance(left, dict) and isinstance(right, dict):
        return left.keys() == right.keys() and all(cel_equal(left[k], right[k]) for k in left)
    return bool(left == right)


def _contains(values: Sequence[Any], item: Any) -> bool:
    return any(cel_equal(value, item) for value in values)


def is_sorted(values: list[Any]) -> bool:
    """``list.isSorted()``: each element is no greater than the next (an empty list is sorted)."""
    return all(not (values[i + 1] < values[i]) for i in range(len(values) - 1))


def sum_of(values: list[Any]) -> Any:
    """``list.sum()``: the sum of ints or doubles; 0 for an empty list; an int64 overflow is an error."""
    total: Any = 0
    for value in values:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise TypeError(f"sum() needs a list of numbers, found {type(value).__name__}")
        total += value
    if isinstance(total, int) and not _INT64_MIN <= total <= _INT64_MAX:
        raise OverflowError("integer overflow in sum()")
    return total


def min_of(values: list[Any]) -> Any:
    """``list.min()``: the smallest element; an empty list is an error, as in Kubernetes."""
    if not values:
        raise ValueError("min called on empty list")
    return min(values)


def max_of(values: list[Any]) -> Any:
    """``list.max()``: the largest element; an empty list is an error, as in Kubernetes."""
    if not values:
        raise ValueError("max called on empty list")
    return max(values)


def index_of(values: list[Any], item: Any) -> int:
    """``list.indexOf(x)``: the first index of ``x``, or -1."""
    return next((i for i, value in enumerate(values) if cel_equal(value, item)), -1)


def last_index_of(values: list[Any], item: Any) -> int:
    """``list.lastIndexOf(x)``: the last index of ``x``, or -1."""
    return next((i for i in range(len(values) - 1, -1, -1) if cel_equal(values[i], item)), -1)


def find(text: str, pattern: str) -> str:
    """``string.find(regex)``: the first match, or the empty string."""
    match = re.search(pattern, text)
    return match.group(0) if match else ""


def find_all(text: str, pattern: str, limit: int = -1) -> list[str]:
    """``string.findAll(regex[, limit])``: all matches, at most ``limit`` when it is not negative."""
    matches = [m.group(0) for m in re.finditer(pattern, text)]
    return matches if limit < 0 else matches[:limit]


def sets_contains(values: list[Any], other: list[Any]) -> bool:
    """``sets.contains(a, b)``: every element of ``b`` is in ``a``."""
    return all(_contains(values, item) for item in other)


def sets_equivalent(values: list[Any], other: list[Any]) -> bool:
    """``sets.equivalent(a, b)``: ``a`` and ``b`` hold the same elements, duplicates ignored."""
    return sets_contains(values, other) and sets_contains(other, values)


def sets_intersects(values: list[Any], other: list[Any]) -> bool:
    """``sets.intersects(a, b)``: ``a`` and ``b`` share at least one element."""
    return any(_contains(values, item) for item in other)


def kubernetes_library() -> cel.CelExtension:
    """The CEL extension that declares every function of this module with its overloads."""
    t = cel.Type
    any_list = t.List(t.DYN)

    def member(
        name: str, overload: str, returns: cel.Type, params: list[cel.Type], impl: Callable[..., Any]
    ) -> cel.FunctionDecl:
        return cel.FunctionDecl(
            name, [cel.Overload(overload, return_type=returns, parameters=params, is_member=True, impl=impl)]
        )

    def function(name: str, overload: str, params: list[cel.Type], impl: Callable[..., Any]) -> cel.FunctionDecl:
        return cel.FunctionDecl(name, [cel.Overload(overload, return_type=t.BOOL, parameters=params, impl=impl)])

    return cel.CelExtension(
        "gpufleet.kubernetes",
        [
            member("isSorted", "list_is_sorted", t.BOOL, [any_list], is_sorted),
            member("sum", "list_sum", t.DYN, [any_list], sum_of),
            member("min", "list_min", t.DYN, [any_list], min_of),
            member("max", "list_max", t.DYN, [any_list], max_of),
            member("indexOf", "list_index_of", t.INT, [any_list, t.DYN], index_of),
            member("lastIndexOf", "list_last_index_of", t.INT, [any_list, t.DYN], last_index_of),
            member("find", "string_find", t.STRING, [t.STRING, t.STRING], find),
            cel.FunctionDecl(
                "findAll",
                [
                    cel.Overload(
                        "string_find_all",
                        return_type=t.List(t.STRING),
                        parameters=[t.STRING, t.STRING],
                        is_member=True,
                        impl=find_all,
                    ),
                    cel.Overload(
                        "string_find_all_limit",
                        return_type=t.List(t.STRING),
                        parameters=[t.STRING, t.STRING, t.INT],
                        is_member=True,
                        impl=find_all,
                    ),
                ],
            ),
            function("sets.contains", "sets_contains_list_list", [any_list, any_list], sets_contains),
            function("sets.equivalent", "sets_equivalent_list_list", [any_list, any_list], sets_equivalent),
            function("sets.intersects", "sets_intersects_list_list", [any_list, any_list], sets_intersects),
        ],
    )
