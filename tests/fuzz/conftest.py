"""The fuzz suite's settings profile and its tally: how many examples each input family ran.

Every family runs ``GPUFLEET_FUZZ_EXAMPLES`` examples (1,000 unless set) under one hypothesis
profile without a deadline: a deadline is wall-clock time, which a shared CI machine makes flaky.
Hangs are kept out instead by bounded inputs and by the loaders' own bounds (alias expansion,
nesting depth, body size). The counts are printed at the end of the run, for the closing note.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, settings

from tests.fuzz.tally import TALLY, fuzz_examples

settings.register_profile(
    "gpufleet-fuzz",
    max_examples=fuzz_examples(),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not TALLY:
        return
    terminalreporter.section("fuzz examples per input family")
    for family, outcomes in sorted(TALLY.items()):
        detail = ", ".join(f"{n:,} {outcome}" for outcome, n in outcomes.most_common())
        terminalreporter.write_line(f"{family:<28} {sum(outcomes.values()):>7,}  ({detail})")
