"""The bounded end-of-loop step of tests/recorder/conftest.py: a task that ignores its cancellation
no longer holds the test run; it is named with its stack instead."""

from __future__ import annotations

import asyncio
import contextlib

import pytest

from tests.recorder import conftest


async def _deaf() -> None:
    """Swallows every cancellation, as the task left by the emulator chaos test seems to."""
    while True:
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.Event().wait()


async def _polite() -> None:
    await asyncio.Event().wait()


def test_a_task_deaf_to_cancellation_is_named_not_waited_on_forever(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(conftest, "LOOP_TEARDOWN_S", 0.2)
    loop = asyncio.new_event_loop()
    try:
        deaf = loop.create_task(_deaf(), name="deaf")
        polite = loop.create_task(_polite(), name="polite")
        loop.run_until_complete(asyncio.sleep(0))
        conftest._cancel_all_tasks_within_bound(loop)
        assert polite.cancelled()
        assert not deaf.done()
        err = capsys.readouterr().err
        assert "task still pending 0.2 s after it was cancelled" in err and "name='deaf'" in err
        assert "polite" not in err and "_deaf" in err  # the stack names where it waits
    finally:
        loop.close()
