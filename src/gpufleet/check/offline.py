"""Run a rendered ValidatingAdmissionPolicy's CEL offline, the way the API server would.

Used by ``gpufleet check --cel`` style comparisons and by the differential test: the variables are
evaluated in order, then the match conditions, then every validation; a validation that is false
contributes its ``messageExpression``. An expression that fails at run time denies the request, as it
does under ``failurePolicy: Fail``.

The environment offers what the shipped expressions use and the API server provides: standard CEL,
the strings, optional and bindings extensions, and the Kubernetes lists library's ``sum`` and ``max``.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

from cel_expr_python import cel
from cel_expr_python.ext import ext_bindings, ext_optional, ext_strings

from gpufleet.errors import InputError

VARIABLES = ("object", "oldObject", "request", "params", "namespaceObject", "variables")


def _list_sum(values: list[Any]) -> Any:
    return sum(values)


def _list_max(values: list[Any]) -> Any:
    if not values:
        raise ValueError("max called on empty list")
    return max(values)


def _lists_library() -> cel.CelExtension:
    """The two Kubernetes lists functions the rules use (``[1, 2].sum()``, ``[1, 2].max()``)."""
    t = cel.Type

    def member(name: str, impl: Any) -> cel.FunctionDecl:
        overload = cel.Overload(
            f"list_{name}", return_type=t.DYN, parameters=[t.List(t.DYN)], is_member=True, impl=impl
        )
        return cel.FunctionDecl(name, [overload])

    return cel.CelExtension("gpufleet.lists", [member("sum", _list_sum), member("max", _list_max)])


@functools.cache
def _environment() -> cel.Env:
    return cel.NewEnv(
        variables=dict.fromkeys(VARIABLES, cel.Type.DYN),
        extensions=[ext_strings.ExtStrings(), ext_optional.ExtOptional(), ext_bindings.ExtBindings(), _lists_library()],
    )


class EvaluationError(Exception):
    """An expression failed at run time (the API server denies the request under failurePolicy Fail)."""


@functools.lru_cache(maxsize=1024)
def _compile(expression: str) -> Any:
    try:
        return _environment().compile(expression)
    except RuntimeError as exc:
        raise InputError.one(f"CEL does not compile: {exc}: {expression[:200]}") from None


def _run(expression: str, activation: dict[str, Any]) -> Any:
    try:
        value = _compile(expression).eval(data=activation)
    except RuntimeError as exc:
        raise EvaluationError(str(exc)) from None
    if value.type() == cel.Type.ERROR:
        raise EvaluationError(str(value.value()))
    return value.plain_value()


@dataclass(frozen=True)
class OfflinePolicy:
    """A ValidatingAdmissionPolicy's spec, ready to judge objects without an API server."""

    spec: dict[str, Any]

    def __post_init__(self) -> None:
        for expression in self.expressions():
            _compile(expression)  # every expression must compile, used or not, as the API server checks

    def expressions(self) -> list[str]:
        out = [v["expression"] for v in self.spec.get("variables", [])]
        out += [m["expression"] for m in self.spec.get("matchConditions", [])]
        for v in self.spec.get("validations", []):
            out += [v["expression"], v["messageExpression"]]
        return out

    def judge(self, obj: dict[str, Any], namespace: str, operation: str = "CREATE") -> list[str]:
        """The messages of every failed validation; empty when the object is admitted."""
        api_version = str(obj.get("apiVersion", ""))
        group, _, version = api_version.rpartition("/")
        request = {
            "namespace": namespace,
            "operation": operation,
            "name": str(obj.get("metadata", {}).get("name", "")),
            "kind": {"group": group, "version": version, "kind": obj.get("kind", "")},
        }
        activation: dict[str, Any] = {"object": obj, "oldObject": None, "request": request, "variables": {}}
        try:
            computed: dict[str, Any] = {}
            for variable in self.spec.get("variables", []):
                computed[variable["name"]] = _run(variable["expression"], {**activation, "variables": computed})
            activation["variables"] = computed
            if not all(_run(m["expression"], activation) is True for m in self.spec.get("matchConditions", [])):
                return []
            denials = []
            for validation in self.spec.get("validations", []):
                if _run(validation["expression"], activation) is not True:
                    denials.append(str(_run(validation["messageExpression"], activation)))
        except EvaluationError as exc:
            return [f"EvaluationError: {exc}"]
        return denials
