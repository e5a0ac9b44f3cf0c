"""A CRD's ``x-kubernetes-validations`` rules, evaluated as the API server does on create.

Each rule applies at the schema node that declares it, with ``self`` bound to that node's value: once
per element when the node is a list's ``items``, once per value when it is a map's
``additionalProperties``, and not at all when the value is absent. Transition rules (those that
reference ``oldSelf``) only run on update, so they are skipped here — unless ``optionalOldSelf`` is
set, in which case the server runs them on create with ``oldSelf`` empty, and so do we.

A failed rule reports the rule's ``messageExpression`` result (when it yields a one-line string), else
its ``message``, else ``failed rule: <rule>``, at the node's path plus the rule's ``fieldPath``.
A rule that cannot be compiled or evaluated offline is a finding too: it is never silently skipped.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from gpufleet.validation import cel
from gpufleet.validation import finding as fp
from gpufleet.validation.finding import Finding
from gpufleet.validation.schema import child_schema

_STRING_LITERAL = re.compile(r"'''.*?'''|\"\"\".*?\"\"\"|'(?:[^'\\\n]|\\.)*'|\"(?:[^\"\\\n]|\\.)*\"", re.DOTALL)
_OLD_SELF = re.compile(r"\boldSelf\b")


def is_transition_rule(expression: str) -> bool:
    """Whether ``expression`` references ``oldSelf`` outside string literals."""
    return bool(_OLD_SELF.search(_STRING_LITERAL.sub("''", expression)))


def check_rules(obj: Mapping[str, Any], schema: Mapping[str, Any], ref: str) -> list[Finding]:
    """Every failed, uncompilable or unevaluable rule of a (prepared, schema-valid) custom resource."""
    findings: list[Finding] = []
    _node(findings, to_cel(obj, schema), schema, "", ref)
    return findings


def to_cel(value: Any, schema: Mapping[str, Any] | None) -> Any:
    """Give a value the CEL type its schema declares: a ``number`` field holding ``1`` is the double 1.0."""
    if schema is None:
        return value
    if isinstance(value, Mapping):
        return {name: to_cel(item, child_schema(schema, name)[0]) for name, item in value.items()}
    if isinstance(value, list):
        items = schema.get("items")
        return [to_cel(item, items if isinstance(items, Mapping) else None) for item in value]
    if schema.get("type") == "number" and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    return value


def _node(findings: list[Finding], value: Any, schema: Mapping[str, Any], path: str, ref: str) -> None:
    if value is None:
        return
    for rule in schema.get("x-kubernetes-validations") or []:
        failure = _run_rule(rule, value, path, ref)
        if failure is not None:
            findings.append(failure)
    if isinstance(value, Mapping):
        for name, item in value.items():
            sub, is_map_key = child_schema(schema, name)
            if sub is not None:
                _node(findings, item, sub, fp.key(path, name) if is_map_key else fp.child(path, name), ref)
    elif isinstance(value, list):
        items = schema.get("items")
        if isinstance(items, Mapping):
            for position, item in enumerate(value):
                _node(findings, item, items, fp.index(path, position), ref)


def _run_rule(rule: Mapping[str, Any], value: Any, path: str, ref: str) -> Finding | None:
    expression = rule.get("rule")
    if not isinstance(expression, str) or not expression.strip():
        return Finding(ref, path, "x-kubernetes-validations entry has no rule", "cel")
    if is_transition_rule(expression):
        if not rule.get("optionalOldSelf"):
            return None  # a transition rule: the API server evaluates it on update only
        expression = f"cel.bind(oldSelf, optional.none(), {expression})"
    activation = {"self": value}
    try:
        program = cel.compile(expression)
    except cel.CelCompileError as exc:
        return Finding(ref, path, f"rule {rule['rule']!r} cannot be compiled offline: {_first_line(exc)}", "cel")
    try:
        result = cel.evaluate(program, activation)
    except cel.CelEvaluationError as exc:
        return Finding(ref, path, f"{_first_line(exc)} (evaluating rule {rule['rule']!r})", "cel")
    if result is True:
        return None
    target = fp.join_relative(path, str(rule.get("fieldPath") or ""))
    if result is not False:
        return Finding(ref, target, f"rule {rule['rule']!r} returned {result!r}, not a bool", "cel")
    return Finding(ref, target, _message(rule, activation), "cel")


def _message(rule: Mapping[str, Any], activation: Mapping[str, Any]) -> str:
    """The failed rule's message, as the API server chooses it."""
    expression = rule.get("messageExpression")
    if isinstance(expression, str) and expression.strip():
        try:
            text = cel.evaluate(cel.compile(expression), activation)
        except cel.CelError:
            text = None
        if isinstance(text, str) and text.strip() and "\n" not in text:
            return text
    message = rule.get("message")
    if isinstance(message, str) and message:
        return message
    return f"failed rule: {rule['rule']}"


def _first_line(exc: Exception) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
