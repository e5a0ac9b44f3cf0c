"""Compile and evaluate CEL expressions offline, with the Kubernetes library functions we implement.

One environment per set of variable names: standard CEL, the strings, optional, math, bindings and
encoders extensions that the API server also offers, and ``cel_library``'s Kubernetes functions.
Variables are declared ``dyn`` (the API server types them from the schema), so a type error inside
a value shows up when the expression runs rather than when it compiles. Compiled programs are cached
by expression text, since the same CRD rule runs on every object of its kind.

Use ``CRD_RULE_VARIABLES`` for ``x-kubernetes-validations`` rules and ``ADMISSION_VARIABLES`` for a
ValidatingAdmissionPolicy's expressions.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from cel_expr_python import cel
from cel_expr_python.ext import ext_bindings, ext_encoders, ext_math, ext_optional, ext_strings

from gpufleet.validation.cel_library import kubernetes_library

CRD_RULE_VARIABLES: tuple[str, ...] = ("self", "oldSelf")
ADMISSION_VARIABLES: tuple[str, ...] = (
    "object",
    "oldObject",
    "request",
    "params",
    "namespaceObject",
    "variables",
)


_STATUS_PREFIX = re.compile(r"^[A-Z_]+: ")
_STATUS_SUFFIX = re.compile(r"\s*\[[A-Z_]+\]$")


class CelError(Exception):
    """An expression that cannot be compiled or whose evaluation failed; the text says why."""


class CelCompileError(CelError):
    """The expression does not parse or type-check (an undeclared function or variable, a bad overload)."""


class CelEvaluationError(CelError):
    """The expression ran into a runtime error (a missing key, a bad argument, an overflow)."""


@dataclass(frozen=True)
class Program:
    """A compiled expression and the variables it may reference."""

    expression: str
    variables: tuple[str, ...]
    _compiled: Any = field(repr=False, compare=False)


@functools.cache
def _environment(variables: tuple[str, ...]) -> cel.Env:
    return cel.NewEnv(
        variables=dict.fromkeys(variables, cel.Type.DYN),
        extensions=[
            ext_strings.ExtStrings(),
            ext_optional.ExtOptional(),
            ext_math.ExtMath(),
            ext_bindings.ExtBindings(),
            ext_encoders.ExtEncoders(),
            kubernetes_library(),
        ],
    )


@functools.lru_cache(maxsize=4096)
def _compile_cached(expression: str, variables: tuple[str, ...]) -> Program:
    try:
        compiled = _environment(variables).compile(expression)
    except RuntimeError as exc:
        raise CelCompileError(_clean(str(exc))) from None
    return Program(expression=expression, variables=variables, _compiled=compiled)


def compile(expression: str, *, variables: Sequence[str] = CRD_RULE_VARIABLES) -> Program:
    """Parse and type-check ``expression``; raise ``CelCompileError`` with the checker's message."""
    return _compile_cached(expression, tuple(variables))


def evaluate(program: Program, activation: Mapping[str, Any]) -> Any:
    """Run ``program`` with the variables in ``activation`` bound; return a plain Python value.

    Raise ``CelEvaluationError`` where CEL yields an error value (a missing key, a failed custom
    function, an unbound variable that the expression reaches).
    """
    try:
        value = program._compiled.eval(data=dict(activation))
    except RuntimeError as exc:  # a value CEL cannot represent, such as an int beyond int64
        raise CelEvaluationError(_clean(str(exc))) from None
    if value.type() == cel.Type.ERROR:
        raise CelEvaluationError(_clean(str(value.value())))
    return value.plain_value()


def _clean(message: str) -> str:
    """Drop cel-cpp's status code around a message ("INVALID_ARGUMENT: … [INVALID_ARGUMENT]")."""
    return _STATUS_SUFFIX.sub("", _STATUS_PREFIX.sub("", message.strip())).strip()
