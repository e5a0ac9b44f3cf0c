"""Fixtures for recorder tests: the API test double, a kubeconfig pointing at it, and ledgers.

The API server here is kmock's emulator extended by ``emulator.RVEmulator``: an HTTP-level test
double, because the real control plane (a later issue) is not built yet.
"""

from __future__ import annotations

import asyncio
import asyncio.runners
import io
import itertools
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.ledger import ledger_backends
from tests.recorder import recorder_children

_names = itertools.count()
postgres_url = ledger_backends.postgres_url


@pytest.fixture
def ledger_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    database = f"recorder_{next(_names)}"
    return ledger_backends.backend_url(request, tmp_path, sqlite="ledger.db", database=database)


@pytest.fixture(autouse=True)
def _no_recorder_left() -> Iterator[None]:
    """However a test ends (passed, failed, interrupted), no ``gpufleet record`` child it started runs on."""
    yield
    recorder_children.stop_all()


#: How long the end of a test's event loop waits for its cancelled tasks before it names them and goes on.
LOOP_TEARDOWN_S = 60.0


def _cancel_all_tasks_within_bound(loop: asyncio.AbstractEventLoop) -> None:
    """asyncio's own end-of-loop step (``asyncio.runners._cancel_all_tasks``: cancel every task left and
    wait for them all), with a bound on the wait.

    Seen in CI at stop 21 and again on 2026-12-03 (``/work/ci-b``): after the emulator SIGKILL chaos
    test passed, pytest-asyncio's loop teardown waited in ``_cancel_all_tasks`` with the loop idle in
    epoll and no thread busy, until pytest-timeout failed the test 1,200 s later. So a task the test
    left (the kmock test double's server side, as far as the evidence goes) does not finish when
    cancelled. The recorder under test is a separate process, killed and checked by the test itself,
    so this bound changes nothing the test asserts: a task still pending after the bound is printed
    with its stack on stderr (shown in pytest's report) so the next engineer can see which one it was.
    """
    pending = asyncio.all_tasks(loop)
    if not pending:
        return
    for task in pending:
        task.cancel()
    done, stuck = loop.run_until_complete(asyncio.wait(pending, timeout=LOOP_TEARDOWN_S))
    for task in done:
        if not task.cancelled() and task.exception() is not None:
            loop.call_exception_handler(
                {
                    "message": "unhandled exception at the end of a test's loop",
                    "exception": task.exception(),
                    "task": task,
                }
            )
    if stuck:
        out = io.StringIO()
        for task in stuck:
            print(f"task still pending {LOOP_TEARDOWN_S:g} s after it was cancelled: {task!r}", file=out)
            task.print_stack(file=out)
        print(out.getvalue(), file=sys.stderr)


asyncio.runners._cancel_all_tasks = _cancel_all_tasks_within_bound  # type: ignore[attr-defined]
