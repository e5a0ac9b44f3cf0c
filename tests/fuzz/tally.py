"""Counting the examples each input family ran, and how they ended (printed by the fuzz suite's conftest)."""

from __future__ import annotations

import os
from collections import Counter, defaultdict

TALLY: defaultdict[str, Counter[str]] = defaultdict(Counter)


def fuzz_examples() -> int:
    """Examples per family: 1,000 in CI; set GPUFLEET_FUZZ_EXAMPLES to go deeper (or quicker) locally."""
    return int(os.environ.get("GPUFLEET_FUZZ_EXAMPLES", "1000"))


def ran(family: str, outcome: str) -> None:
    """One example of ``family`` ended with ``outcome`` (e.g. "loaded", "refused")."""
    TALLY[family][outcome] += 1
