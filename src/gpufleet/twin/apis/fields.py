"""Kueue v0.19.2: ``apis/kueue/v1beta2`` (the CRDs' bounds), ``pkg/webhooks/``.

Reading the typed fields of one Kubernetes object, each mistake named by file, line, object and field.

``Doc`` is where an object came from; its readers take a field's raw YAML value and return the
typed value, or record a problem at the field's path and return a harmless stand-in, so every
mistake of a stream is reported at once. Integers, quantities, enums and booleans are checked
against what Kueue's API accepts (its CRD bounds and webhooks), not merely parsed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from gpufleet.errors import Problem
from gpufleet.twin.resources import QuantityError, parse_decimal, parse_quantity

_INTEGER = re.compile(r"[+-]?[0-9]+")
MAX_QUANTITY = 2**63 - 1
"""Kubernetes keeps a quantity in an int64 (of milli-units at most); anything larger is a typo."""
MAX_INT32 = 2**31 - 1
"""Pod counts and priorities are ``int32`` in Kueue's and Kubernetes' APIs."""
PRIORITY = "a priority in the 32-bit integer range"


def type_name(value: Any) -> str:
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    return f"{type(value).__name__} {shown(value)}"


def shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


@dataclass
class Doc:
    """Where one object came from, so every problem names it; and reads its fields by their types.

    A field of the wrong type (a string where a mapping belongs) is a problem at its path, and
    reading goes on with the field's empty value, so every mistake of a stream is reported at once.
    """

    file: str
    line: int
    kind: str
    name: str
    problems: list[Problem]

    def fail(self, path: str, message: str) -> None:
        who = f"{self.kind} {self.name}" if self.name else self.kind
        self.problems.append(Problem(f"{who}: {message}", self.file, path, self.line))

    def mapping(self, path: str, value: Any) -> dict[str, Any]:
        if value is None:
            return {}
        if isinstance(value, dict):
            return value
        self.fail(path, f"expected a mapping, got {type_name(value)}")
        return {}

    def sequence(self, path: str, value: Any) -> list[Any]:
        if value is None:
            return []
        if isinstance(value, list):
            return value
        self.fail(path, f"expected a list, got {type_name(value)}")
        return []

    def mappings(self, path: str, value: Any) -> list[tuple[str, dict[str, Any]]]:
        """The items of a list of mappings, each with its path; an item of another type is a problem."""
        out = []
        for i, item in enumerate(self.sequence(path, value)):
            if isinstance(item, dict):
                out.append((f"{path}[{i}]", item))
            else:
                self.fail(f"{path}[{i}]", f"expected a mapping, got {type_name(item)}")
        return out

    def strings(self, path: str, value: Any) -> tuple[str, ...]:
        return tuple(str(v) for v in self.sequence(path, value))

    def pairs(self, path: str, value: Any) -> tuple[tuple[str, str], ...]:
        """A string-to-string mapping (labels, node selectors) as sorted pairs."""
        return tuple(sorted((str(k), str(v)) for k, v in self.mapping(path, value).items()))


def choice(doc: Doc, path: str, value: Any, allowed: tuple[str, ...], default: str) -> str:
    """One of an enum's values (Kueue's CRD enums); a typo would otherwise mean the default."""
    if value is None:
        return default
    if value not in allowed:
        doc.fail(path, f"expected one of {', '.join(allowed)}, got {shown(value)}")
        return default
    return str(value)


def reference(doc: Doc, path: str, value: Any) -> str | None:
    """Another object's name (a cohort's parent, a ClusterQueue's cohort), or None where absent: a
    value of another type is a problem, not a name spelt from its ``repr`` (the API server's schema
    refuses it too)."""
    if value is None or value == "":
        return None
    if isinstance(value, str):
        return value
    doc.fail(path, f"expected a name (a string), got {type_name(value)}")
    return None


def boolean(doc: Doc, path: str, value: Any) -> bool:
    if not isinstance(value, bool):
        doc.fail(path, f"expected true or false, got {type_name(value)}")
        return True
    return value


def quantity(doc: Doc, path: str, value: Any, resource: str) -> int | None:
    """A quota, request or overhead: a well-formed, non-negative quantity (Kueue's webhooks
    refuse negative ones: ``validateResourceQuantity``, ``WorkloadValidateResourcesAreNonNegative``)."""
    if value is None:
        return None
    try:
        number = parse_decimal(value)
        if abs(number) > MAX_QUANTITY:  # before parse_quantity builds a million-digit integer
            raise QuantityError(f"quantity {shown(value)} is beyond what Kubernetes can hold")
        if number < 0:
            raise QuantityError(f"expected a quantity of 0 or more, got {shown(value)}")
        return parse_quantity(value, resource)
    except QuantityError as exc:
        doc.fail(path, str(exc))
        return 0


def integer(
    doc: Doc, path: str, value: Any, *, low: int = -MAX_QUANTITY, high: int = MAX_QUANTITY, expected: str = ""
) -> int:
    """An integer within ``[low, high]``; ``expected`` says what belongs there when it is not."""
    text = str(value).strip()
    if isinstance(value, bool) or not _INTEGER.fullmatch(text):  # int() would take '1_0' and '١٢
        doc.fail(path, f"expected {expected or 'an integer'}, got {shown(value)}")
        return max(low, 0)
    if len(text) > 20 or abs(int(text)) > MAX_QUANTITY:
        doc.fail(path, f"{shown(value)} is beyond the 64-bit integer range")
        return max(low, 0)
    number = int(text)
    if not low <= number <= high:
        doc.fail(path, f"expected {expected or f'an integer between {low} and {high}'}, got {number}")
        return min(max(number, low), high)
    return number


POD_COUNT: dict[str, Any] = {"low": 0, "high": MAX_INT32, "expected": "a pod count between 0 and 2147483647"}


def timestamp(doc: Doc, path: str, value: Any, index: int) -> int:
    """Queue-order timestamp in epoch milliseconds; the stream position when none is given."""
    if value is None:
        return index
    if isinstance(value, datetime):
        return int(value.timestamp() * 1000)
    try:
        return int(datetime.fromisoformat(str(value).replace("Z", "+00:00")).timestamp() * 1000)
    except (ValueError, OverflowError, OSError):
        doc.fail(path, f"not an RFC 3339 timestamp: {shown(value)}")
        return index
