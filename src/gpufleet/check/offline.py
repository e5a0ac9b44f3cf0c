"""Run a rendered ValidatingAdmissionPolicy's CEL offline, the way the API server would.

Used by the differential test and the rule tests: the variables are evaluated in order, then the
match conditions, then every validation; a validation that is false contributes its
``messageExpression``. An expression that fails at run time denies the request, as it does under
``failurePolicy: Fail``. The CEL environment is ``gpufleet.validation.cel``'s: standard CEL, the
extensions the API server offers and the Kubernetes library functions (``sum``, ``max``, ...).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gpufleet.errors import InputError
from gpufleet.validation import cel
from gpufleet.validation.cel import ADMISSION_VARIABLES, CelCompileError, CelEvaluationError, Program


def _compile(expression: str) -> Program:
    try:
        return cel.compile(expression, variables=ADMISSION_VARIABLES)
    except CelCompileError as exc:
        raise InputError.one(f"CEL does not compile: {exc}: {expression[:200]}") from None


def _run(expression: str, activation: dict[str, Any]) -> Any:
    return cel.evaluate(_compile(expression), activation)


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
        except CelEvaluationError as exc:
            return [f"EvaluationError: {exc}"]
        return denials
