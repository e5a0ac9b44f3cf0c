"""Kubernetes quantities become Kueue's integers: milli-cpu, bytes, plain counts."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpufleet.twin.resources import QuantityError, format_quantity, parse_quantity


@pytest.mark.parametrize(
    ("value", "resource", "want"),
    [
        ("500m", "cpu", 500),
        ("2", "cpu", 2000),
        (1.5, "cpu", 1500),
        ("0.1", "cpu", 100),
        ("1u", "cpu", 1),  # rounded up like Quantity.MilliValue
        ("2Gi", "memory", 2 * 2**30),
        ("1k", "memory", 1000),
        ("1M", "memory", 10**6),
        ("1e3", "memory", 1000),
        ("8", "nvidia.com/gpu", 8),
        ("1k", "nvidia.com/gpu", 1000),
        ("100m", "memory", 1),  # a tenth of a byte rounds up to one
    ],
    ids=str,
)
def test_parse_quantity(value: object, resource: str, want: int) -> None:
    assert parse_quantity(value, resource) == want


@pytest.mark.parametrize("value", ["", "abc", "1Gb", "--1", "1..2", True, None, "-1"], ids=repr)
def test_malformed_quantity_is_rejected(value: object) -> None:
    with pytest.raises(QuantityError):
        parse_quantity(value, "cpu")


@given(st.integers(0, 10**9))
def test_cpu_round_trip(milli: int) -> None:
    assert parse_quantity(format_quantity(milli, "cpu"), "cpu") == milli


@given(st.integers(0, 2**50))
def test_memory_round_trip(amount: int) -> None:
    assert parse_quantity(format_quantity(amount, "memory"), "memory") == amount
