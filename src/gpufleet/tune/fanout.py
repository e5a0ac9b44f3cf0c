"""Independent simulations of one ``tune`` run, spread over its ``--jobs`` processes.

Beside the study's trials, a run simulates worlds that depend on nothing but their inputs: first apply
and the input policy on the tuned week and on every held-out week, then each judged candidate on each
held-out week. Run one after another in the parent, they were most of the bundled example's wall time
while the ``--jobs`` workers sat idle (issue 33). Here they run in forked processes, so the workers share
the parent's trace, policy and search space instead of receiving them pickled; only each world's result
comes back. The simulator is deterministic and a task's result depends on nothing but its inputs, so
the figures are the same as a serial run's (``tests/tune/test_fanout.py`` holds them equal).

Tasks are dispatched in the order given, one at a time to whichever process is free, and their results
come back in that order; the caller may stop reading early (the judging stops at the first candidate
that holds), and the tasks not yet read are then abandoned, their processes ended. With one process, or
where the platform cannot fork, the tasks run in the caller's process, lazily, in order.
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar

T = TypeVar("T")

# What the forked processes run, by index: set in the parent just before the fork, read only by them.
_TASKS: Sequence[Callable[[], Any]] = ()


def _run(index: int) -> Any:
    return _TASKS[index]()


def forks() -> bool:
    """Whether tasks can run in forked processes here (not on Windows, nor macOS's default)."""
    return "fork" in multiprocessing.get_all_start_methods()


@contextmanager
def ordered(tasks: Sequence[Callable[[], T]], workers: int) -> Iterator[Iterator[T]]:
    """Each task's result, in the tasks' order, computed by up to ``workers`` forked processes.

    Leaving the ``with`` block ends the processes, whatever they still run: a result not read is not
    waited for. ``workers`` above the tasks' count is clipped; 1 (or no fork) runs them here."""
    workers = min(workers, len(tasks))
    if workers <= 1 or not forks():
        yield (task() for task in tasks)
        return
    global _TASKS  # noqa: PLW0603 - the forked children inherit it; nothing else reads it
    _TASKS = tasks
    try:
        with multiprocessing.get_context("fork").Pool(workers) as pool:
            _TASKS = ()  # the children hold their copy; the parent keeps no reference
            yield pool.imap(_run, range(len(tasks)), chunksize=1)
    finally:
        _TASKS = ()


def every(tasks: Sequence[Callable[[], T]], workers: int) -> list[T]:
    """Every task's result, in order (``ordered``, read to the end)."""
    with ordered(tasks, workers) as results:
        return list(results)
