"""Kueue v0.19.2: ``pkg/resources/resource.go``, ``pkg/resources/requests.go``.

Resource quantities as integers, and interned (flavor, resource) keys.

Kubernetes writes quantities as strings ("500m", "2Gi", "1k"). Kueue does its quota arithmetic on
integers: milli-units for ``cpu``, plain values for everything else (bytes for memory, counts for
extended resources such as ``nvidia.com/gpu``), rounding fractions up like ``Quantity.Value()``.
The twin does the same, so its sums never drift.

Every (flavor, resource) pair the configuration mentions gets a small integer index
(``FlavorResources``); quota and usage are then plain ``list[int]`` indexed by it, which keeps the
hot path free of dict look-ups on tuples.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import ROUND_CEILING, Decimal, InvalidOperation

UNLIMITED = 1 << 62
"""Stands for a limit that is not set (``borrowingLimit: null``); far above any real quantity."""

MILLI_RESOURCES = frozenset({"cpu"})
"""Resources Kueue counts in milli-units."""

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {"n": Decimal("1e-9"), "u": Decimal("1e-6"), "m": Decimal("1e-3"), "": Decimal(1),
            "k": Decimal(10**3), "M": Decimal(10**6), "G": Decimal(10**9), "T": Decimal(10**12),
            "P": Decimal(10**15), "E": Decimal(10**18)}  # fmt: skip
_QUANTITY = re.compile(r"^([+-]?[0-9.]+)(?:([eE][+-]?[0-9]+)|(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]))?$")


class QuantityError(ValueError):
    """A quantity string that Kubernetes would reject."""


def parse_decimal(value: object) -> Decimal:
    """Parse a Kubernetes quantity (string or YAML number) into an exact decimal."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise QuantityError(f"quantity must be a string or a number, not {type(value).__name__}")
    text = str(value).strip()
    match = _QUANTITY.match(text)
    if not match:
        raise QuantityError(f"malformed quantity {text!r}")
    number, exponent, suffix = match.groups()
    try:
        base = Decimal(number)
    except InvalidOperation:
        raise QuantityError(f"malformed quantity {text!r}") from None
    if exponent:
        return base * (Decimal(10) ** int(exponent[1:]))
    if suffix in _BINARY:
        return base * _BINARY[suffix]
    return base * _DECIMAL[suffix or ""]


def parse_quantity(value: object, resource: str) -> int:
    """Parse a quantity of ``resource`` into Kueue's integer unit (milli for cpu), rounding up."""
    amount = parse_decimal(value)
    if amount < 0:
        raise QuantityError(f"quantity {value!r} must not be negative")
    if resource in MILLI_RESOURCES:
        amount *= 1000
    return int(amount.to_integral_value(rounding=ROUND_CEILING))


def format_quantity(amount: int, resource: str) -> str:
    """Render an integer amount back the way a person reads it (cpu in cores, others plain)."""
    if amount >= UNLIMITED:
        return "unlimited"
    if resource in MILLI_RESOURCES:
        return str(amount // 1000) if amount % 1000 == 0 else f"{amount}m"
    for suffix in ("Ei", "Pi", "Ti", "Gi", "Mi", "Ki"):
        unit = _BINARY[suffix]
        if amount >= unit and amount % unit == 0 and resource in ("memory", "ephemeral-storage"):
            return f"{amount // unit}{suffix}"
    return str(amount)


@dataclass(frozen=True, slots=True, order=True)
class FlavorResource:
    """One quota key: a resource in a flavor, written ``flavor/resource`` in the JSON output."""

    flavor: str
    resource: str

    def __str__(self) -> str:
        return f"{self.flavor}/{self.resource}"


class FlavorResources:
    """Interns every ``FlavorResource`` of a configuration into a dense index ``0..n-1``."""

    __slots__ = ("_index", "keys")

    def __init__(self) -> None:
        self.keys: list[FlavorResource] = []
        self._index: dict[tuple[str, str], int] = {}

    def intern(self, flavor: str, resource: str) -> int:
        key = (flavor, resource)
        idx = self._index.get(key)
        if idx is None:
            idx = len(self.keys)
            self._index[key] = idx
            self.keys.append(FlavorResource(flavor, resource))
        return idx

    def get(self, flavor: str, resource: str) -> int | None:
        return self._index.get((flavor, resource))

    def __len__(self) -> int:
        return len(self.keys)
