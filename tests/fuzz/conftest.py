"""The fuzz suite's settings profile and its tally: how many examples each input family ran.

Every family runs ``GPUFLEET_FUZZ_EXAMPLES`` examples (1,000 unless set) under one hypothesis
profile without a deadline: a deadline is wall-clock time, which a shared CI machine makes flaky.
Hangs are kept out instead by bounded inputs and by the loaders' own bounds (alias expansion,
nesting depth, body size). The counts are printed at the end of the run (tests/fuzz/tally.py).
"""

from __future__ import annotations

from hypothesis import HealthCheck, settings

from tests.fuzz.tally import fuzz_examples

settings.register_profile(
    "gpufleet-fuzz",
    max_examples=fuzz_examples(),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
)
