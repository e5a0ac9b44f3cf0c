"""The teardown that keeps a test's ``gpufleet record`` children from outliving it, on real processes.

``sleep`` stands in for the recorder: what is checked is only how a child is started, signalled and
waited for, which is the same for any command.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.recorder import recorder_children

HANG_GUARD_S = 60.0  # only a hang reaches this: a SIGKILLed process is gone in milliseconds


def _runs(pid: int) -> bool:
    """True while the pid is a process that is neither gone nor a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def _until_gone(pid: int) -> bool:
    deadline = time.monotonic() + HANG_GUARD_S
    while _runs(pid) and time.monotonic() < deadline:
        time.sleep(0.02)
    return not _runs(pid)


@pytest.fixture
def spawn() -> Iterator[list[subprocess.Popen[str]]]:
    """Children in groups of their own, as the recorder's are; whatever a test leaves is killed."""
    started: list[subprocess.Popen[str]] = []
    yield started
    for child in started:
        if child.poll() is None:
            os.killpg(child.pid, signal.SIGKILL)
        child.wait()


def _group_of_two(spawn: list[subprocess.Popen[str]]) -> tuple[subprocess.Popen[str], int]:
    """A shell leading its own group with a ``sleep`` of its own: (the shell, the sleep's pid)."""
    shell = subprocess.Popen(
        ["sh", "-c", "sleep 600 & echo $!; wait"], stdout=subprocess.PIPE, text=True, process_group=0
    )
    spawn.append(shell)
    assert shell.stdout is not None
    return shell, int(shell.stdout.readline())


def test_stop_kills_the_whole_group_and_returns_once_nothing_of_it_runs(spawn: list[subprocess.Popen[str]]) -> None:
    shell, sleeper = _group_of_two(spawn)
    recorder_children.register(shell.pid)
    recorder_children.stop(shell.pid)
    assert not _runs(shell.pid)  # dead on return, not merely signalled
    assert _until_gone(sleeper)  # the group's other member got the SIGKILL too
    assert shell.wait() == -signal.SIGKILL  # the parent still collects the status


def test_stop_all_stops_every_child_a_test_left_running(spawn: list[subprocess.Popen[str]]) -> None:
    groups = [_group_of_two(spawn) for _ in range(2)]
    for shell, _ in groups:
        recorder_children.register(shell.pid)
    recorder_children.stop_all()
    for shell, sleeper in groups:
        assert not _runs(shell.pid) and _until_gone(sleeper)
        assert shell.wait() == -signal.SIGKILL
    recorder_children.stop_all()  # nothing left to stop: a second teardown is harmless


def test_a_child_that_ended_or_a_pid_given_to_another_process_is_never_signalled(
    spawn: list[subprocess.Popen[str]],
) -> None:
    ended = subprocess.Popen(["true"], process_group=0)
    recorder_children.register(ended.pid)
    assert ended.wait() == 0
    recorder_children.stop(ended.pid)  # reaped already: nothing to signal, no error
    other, _ = _group_of_two(spawn)
    recorder_children.register(other.pid)
    # as if the pid had been reused: registered with a start time the running process does not have
    recorder_children._started[other.pid] = "0"
    recorder_children.stop(other.pid)
    assert other.poll() is None and _runs(other.pid)


@pytest.mark.skipif(shutil.which("setpriv") is None, reason="util-linux's setpriv is not installed")
def test_a_guarded_child_dies_with_its_parent_even_when_the_parent_is_sigkilled(tmp_path: Path) -> None:
    """A test run killed outright runs no teardown: the parent-death signal still ends the child."""
    parent = subprocess.Popen(
        [sys.executable, "-c", "import subprocess, sys, time\n"
         "child = subprocess.Popen(sys.argv[1:])\nprint(child.pid, flush=True)\ntime.sleep(600)",
         *recorder_children.guarded(["sleep", "600"])],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    child = 0
    try:
        assert parent.stdout is not None
        child = int(parent.stdout.readline())
        # setpriv sets the signal, then execs: once the child runs sleep, the signal is set
        deadline = time.monotonic() + HANG_GUARD_S
        while not _exe(child).endswith("sleep") and time.monotonic() < deadline:
            time.sleep(0.02)
        assert _runs(child) and _exe(child).endswith("sleep")
        parent.kill()
        parent.wait()
        assert _until_gone(child), f"pid {child} outlived its SIGKILLed parent"
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()
        if child and _runs(child):
            os.kill(child, signal.SIGKILL)


def _exe(pid: int) -> str:
    try:
        return os.readlink(f"/proc/{pid}/exe")
    except OSError:
        return ""
