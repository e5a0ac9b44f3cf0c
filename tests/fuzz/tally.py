"""Counting the examples each input family ran, and how they ended; printed at the end of the run.

The hooks are imported by tests/conftest.py, so they run in the process that prints (pytest-xdist's
controller does not load tests/fuzz/conftest.py): each worker hands its tally over in
``workeroutput`` when it finishes, and the controller adds them up.
"""

from __future__ import annotations

import json
import os
from collections import Counter, defaultdict
from typing import Any

import pytest

TALLY: defaultdict[str, Counter[str]] = defaultdict(Counter)
_KEY = "gpufleet_fuzz_tally"


def fuzz_examples() -> int:
    """Examples per family: 1,000 in CI; set GPUFLEET_FUZZ_EXAMPLES to go deeper (or quicker) locally."""
    return int(os.environ.get("GPUFLEET_FUZZ_EXAMPLES", "1000"))


def ran(family: str, outcome: str) -> None:
    """One example of ``family`` ended with ``outcome`` (e.g. "loaded", "refused")."""
    TALLY[family][outcome] += 1


def pytest_sessionfinish(session: pytest.Session) -> None:
    output = getattr(session.config, "workeroutput", None)
    if output is not None:  # an xdist worker
        output[_KEY] = json.dumps(TALLY)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: Any) -> None:
    for family, outcomes in json.loads(getattr(node, "workeroutput", {}).get(_KEY, "{}")).items():
        TALLY[family].update(outcomes)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not TALLY:
        return
    terminalreporter.section("fuzz examples per input family")
    for family, outcomes in sorted(TALLY.items()):
        detail = ", ".join(f"{n:,} {outcome}" for outcome, n in outcomes.most_common())
        terminalreporter.write_line(f"{family:<28} {sum(outcomes.values()):>7,}  ({detail})")
