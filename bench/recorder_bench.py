"""The recorder on the testbed: events per second and CPU per event at 5,000 Jobs through the real Kueue.

Issue 16 asks for the figure and names no baseline. Two phases, each with ``gpufleet record`` as a
child process writing a fresh ledger:

- live: the recorder runs while ``--jobs`` one-GPU Jobs (``run-for`` 1 s) are created in batches and
  flow through Kueue on kwok nodes; the cluster sets the pace, so events per second here is the
  cluster's rate, and CPU per event is the recorder's cost;
- catch-up: a second recorder starts on an empty ledger once everything finished and records the
  whole history from its listing; events per second here is the recorder's own speed.

CPU is the recorder process's user + system time (``/proc``), events are its
``gpufleet_recorder_events_total``. On a shared machine CPU per event is the robust figure; wall
figures move with the neighbours. Run: ``python -m bench recorder_bench [--jobs 5000]`` (starts a
testbed from ``recorder_bench_fleet.yaml``), or ``--run-dir DIR`` to reuse a testbed started with
``python -m gpufleet.testbed up --policy bench/recorder_bench_fleet.yaml --run-dir DIR``.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

import yaml

from gpufleet.cli import app
from gpufleet.ledger.records import EndReason
from gpufleet.ledger.store import Ledger
from gpufleet.policy import load_policy, resolve
from gpufleet.testbed import Testbed, ensure
from gpufleet.testbed.kwok import RUN_FOR_ANNOTATION

HERE = Path(__file__).resolve().parent
POLICY = HERE / "recorder_bench_fleet.yaml"
TEAMS = ("alpha", "beta")
BATCH = 250


def _job(i: int) -> dict[str, Any]:
    team = TEAMS[i % 2]
    labels = {
        "kueue.x-k8s.io/queue-name": team,
        "gpufleet.io/team": team,
        "gpufleet.io/model": "bench",
        "gpufleet.io/data-class": "internal",
        "bench.gpufleet.io/run": "recorder",
    }
    limits = {"nvidia.com/gpu": "1"}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": f"bench-{i:05d}", "namespace": team, "labels": labels},
        "spec": {
            "backoffLimit": 0,
            "template": {
                "metadata": {"labels": labels, "annotations": {RUN_FOR_ANNOTATION: "1s"}},
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "main", "image": "bench", "resources": {"limits": limits}}],
                },
            },
        },
    }


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Recorder:
    """``gpufleet record`` as a user runs it; its CPU from /proc and its events from /metrics."""

    def __init__(
        self, ledger: str, kubeconfig: str, log: Path, lease: str, src: Path | None = None, profile: Path | None = None
    ) -> None:
        self.port = _port()
        self.profile = profile
        python = [sys.executable, *(["-m", "cProfile", "-o", str(profile)] if profile else [])]
        argv = [*python, "-m", "gpufleet", "record", "--ledger", ledger, "--kubeconfig", kubeconfig,
                "--namespace", "gpufleet-system", "--lease-name", lease, "--identity", lease,
                "--metrics-port", str(self.port)]  # fmt: skip
        env = dict(os.environ)
        if src is not None:  # another gpufleet's code (before a change), ahead of this checkout's
            env["PYTHONPATH"] = os.pathsep.join([str(src), env.get("PYTHONPATH", "")])
        with log.open("ab") as out:
            self.process = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env)

    def cpu_s(self) -> float:
        fields = Path(f"/proc/{self.process.pid}/stat").read_text().rpartition(")")[2].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime

    def _metrics(self) -> str | None:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/metrics", timeout=10) as reply:
                return str(reply.read().decode())
        except OSError:
            return None

    def up(self) -> bool:
        """Serving /metrics: Python and the recorder's imports are done (their CPU is not the recorder's work)."""
        return self._metrics() is not None

    def events(self) -> float:
        text = self._metrics() or ""
        return sum(
            float(line.rpartition(" ")[2])
            for line in text.splitlines()
            if line.startswith("gpufleet_recorder_events_total{")
        )

    def stop(self) -> None:
        if self.profile is not None:  # interrupted, so cProfile writes its file
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(timeout=30)
                return
            except subprocess.TimeoutExpired:
                pass
        self.process.kill()
        self.process.wait()


def _finished(ledger: str) -> int:
    """Attempts that ran to their end: one per Job once all are done (a preempted attempt is not one)."""
    try:
        with Ledger.read(ledger) as opened:
            return sum(1 for a in opened.allocations() if a.end_reason == EndReason.FINISHED)
    except Exception:  # not created yet
        return 0


def _succeeded(bed: Testbed) -> int:
    """Bench Jobs the API server shows as succeeded."""
    out = bed.kubectl(
        "get", "jobs", "--all-namespaces", "--selector=bench.gpufleet.io/run=recorder",
        "--output=jsonpath={range .items[*]}{.status.succeeded}{'\\n'}{end}",
    ).stdout  # fmt: skip
    return sum(1 for line in out.split() if line == "1")


def _recorded(bed: Testbed, ledger: str, jobs: int, what: str, timeout_s: float = 3600) -> int:
    """Wait until the ledger holds a finished attempt of every Job; or, once the API server shows
    every Job succeeded, until the ledger's count has not moved for a minute, then say which Jobs
    the ledger lacks a finish for (a finding, not a hang). Returns the ledger's finished count."""
    deadline, last, still_since = time.monotonic() + timeout_s, -1, time.monotonic()
    while (finished := _finished(ledger)) < jobs:
        now = time.monotonic()
        if finished != last:
            last, still_since = finished, now
        elif now - still_since > 60 and _succeeded(bed) >= jobs:
            with Ledger.read(ledger) as opened:
                done = {a.name for a in opened.allocations() if a.end_reason == EndReason.FINISHED}
                lacking = sorted({a.name for a in opened.allocations()} - done)
            print(f"{what}: the API server shows all {jobs} Jobs succeeded; the ledger has {finished}"
                  f" finished attempts; no finish for {', '.join(lacking) or 'Jobs never recorded'}", flush=True)  # fmt: skip
            return finished
        if now > deadline:
            raise SystemExit(f"timed out waiting for {what}")
        time.sleep(1.0)
    return finished


def _wait(what: str, check: Any, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out waiting for {what}")
        time.sleep(1.0)


def _phase(name: str, rec: Recorder, began: float, cpu0: float) -> dict[str, float]:
    wall = time.monotonic() - began
    events, cpu = rec.events(), rec.cpu_s() - cpu0
    figures = {"events": events, "wall_s": wall, "cpu_s": cpu}
    print(
        f"{name:<9} {events:>9,.0f} events in {wall:7.1f} s wall: {events / wall:8,.0f} events/s;"
        f" recorder CPU {cpu:6.1f} s = {cpu / events * 1e6:7.1f} µs per event"
        f" ({events / cpu:,.0f} events per CPU-second)",
        flush=True,
    )
    return figures


def _apply(bed: Testbed, objects: list[dict[str, Any]]) -> None:
    bed.kubectl("apply", "--server-side", "--field-manager=bench", "--filename=-", stdin=yaml.safe_dump_all(objects))


def _live(
    bed: Testbed,
    kubeconfig: str,
    jobs: int,
    ledgers: dict[str, str],
    codes: dict[str, Path | None],
    work: Path,
    profile: Path | None,
) -> dict[str, dict[str, Any]]:
    """Every recorder watches the same flow at once, each on its own ledger and Lease."""
    live = {name: Recorder(ledgers[name], kubeconfig, work / f"live-{name}.log", f"bench-live-{name}", src,
                           profile / f"live-{name}.prof" if profile else None)
            for name, src in codes.items()}  # fmt: skip
    for name, rec in live.items():
        _wait(f"the live recorder ({name}) to start", lambda rec=rec: rec.events() > 0, 120)
    began = time.monotonic()
    start = {name: (rec.cpu_s(), rec.events()) for name, rec in live.items()}
    for first in range(0, jobs, BATCH):
        _apply(bed, [_job(i) for i in range(first, min(jobs, first + BATCH))])
    print(f"{jobs:,} Jobs created in {time.monotonic() - began:.1f} s", flush=True)
    for name in live:
        _recorded(bed, ledgers[name], jobs, f"the live ledger ({name})")
    wall_live = time.monotonic() - began
    results: dict[str, dict[str, Any]] = {}
    for name, rec in live.items():
        cpu, events = rec.cpu_s() - start[name][0], rec.events() - start[name][1]
        rec.stop()
        results[name] = {"events": events, "wall_s": round(wall_live, 1), "cpu_s": round(cpu, 2),
                         "cpu_us_per_event": round(cpu / events * 1e6, 1)}  # fmt: skip
        print(
            f"live      [{name}] {events:>9,.0f} events in {wall_live:7.1f} s wall: {events / wall_live:8,.0f} events/s"
            f" (the cluster's pace); recorder CPU {cpu:6.1f} s = {cpu / events * 1e6:7.1f} µs per event",
            flush=True,
        )
    return results


def run(
    bed: Testbed,
    kubeconfig: str,
    jobs: int,
    ledger_url: str | None,
    work: Path,
    compare: Path | None,
    profile: Path | None = None,
    catch_up_only: bool = False,
) -> None:
    from typer.testing import CliRunner

    codes: dict[str, Path | None] = {"this": None}
    if compare is not None:
        codes["compared"] = compare
    ledgers = {name: (ledger_url if name == "this" and ledger_url else str(work / f"live-{name}.db")) for name in codes}
    results: dict[str, dict[str, Any]] = {name: {} for name in codes}
    if not catch_up_only:
        bundle = work / "bundle"
        result = CliRunner().invoke(app, ["render", str(POLICY), "--out", str(bundle)])
        assert result.exit_code == 0, result.output
        bed.kubectl("apply", "--server-side", f"--filename={bundle / 'namespaces.yaml'}")
        bed.kubectl("apply", "--server-side", f"--kustomize={bundle}")
        bed.kubectl("create", "namespace", "gpufleet-system", check=False)
        time.sleep(3)  # Kueue reconciles the ClusterQueues
        for name, figures in _live(bed, kubeconfig, jobs, ledgers, codes, work, profile).items():
            results[name]["live"] = figures
    # catch-up: one recorder at a time on an empty ledger, recording the whole history from its listing
    for name, src in codes.items():
        catch_ledger = str(work / f"catch-up-{name}.db")
        catch = Recorder(catch_ledger, kubeconfig, work / f"catch-up-{name}.log", f"bench-catch-up-{name}", src,
                         profile / f"catch-up-{name}.prof" if profile else None)  # fmt: skip
        _wait("the catch-up recorder to start", catch.up, 120)
        began, cpu0 = time.monotonic(), catch.cpu_s()
        _recorded(bed, catch_ledger, jobs, f"the catch-up ledger ({name})")
        figures = _phase(f"catch-up [{name}]", catch, began, cpu0)
        catch.stop()
        results[name]["catch_up"] = {**{k: round(v, 2) for k, v in figures.items()},
                                     "cpu_us_per_event": round(figures["cpu_s"] / figures["events"] * 1e6, 1)}  # fmt: skip
        if catch_up_only:
            continue
        with Ledger.read(ledgers[name]) as a, Ledger.read(catch_ledger) as b:
            same = {(x.workload_uid, x.attempt, x.end_reason) for x in a.allocations()} == {
                (x.workload_uid, x.attempt, x.end_reason) for x in b.allocations()
            }
            results[name]["entries"] = {"live": sum(1 for _ in a.entries()), "catch_up": sum(1 for _ in b.entries())}
        print(
            f"[{name}] ledger entries {results[name]['entries']}; the catch-up ledger holds the live one's attempts: {same}"
        )
    if compare is not None:
        for phase in ("catch_up",) if catch_up_only else ("live", "catch_up"):
            ratio = results["compared"][phase]["cpu_us_per_event"] / results["this"][phase]["cpu_us_per_event"]
            print(f"{phase}: CPU per event {ratio:.2f}x less than the compared code's", flush=True)
    print(json.dumps({"jobs": jobs, **results, "baseline": None}))
    print("issue 16 names no baseline for the recorder; CPU per event is the figure to compare across runs")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=5000)
    parser.add_argument("--run-dir", type=Path, help="reuse the testbed running from this folder")
    parser.add_argument("--ledger", help="the live ledger's URL (default: a SQLite file in a temporary folder)")
    parser.add_argument(
        "--compare-src",
        type=Path,
        help="also run the recorder of another gpufleet's src folder (git archive REV src | tar -x -C DIR;"
        " pass DIR/src) beside this one, live on the same flow and catch-up after it, and print the ratios",
    )
    parser.add_argument(
        "--profile",
        type=Path,
        help="run the recorders under cProfile and write DIR/<phase>-<code>.prof (the CPU figures then include"
        " the profiler's overhead: not comparable with a run without it)",
    )
    parser.add_argument(
        "--catch-up-only",
        action="store_true",
        help="with --run-dir: only the catch-up phase, on the Jobs the testbed already ran (no new Jobs)",
    )
    args = parser.parse_args()
    if args.catch_up_only and args.run_dir is None:
        parser.error("--catch-up-only needs --run-dir (a testbed whose bench Jobs ran)")
    binaries = ensure(HERE.parent)
    with tempfile.TemporaryDirectory(prefix="gpufleet-recorder-bench-") as tmp:
        work = Path(tmp)
        if args.run_dir is not None:
            bed = Testbed(args.run_dir, binaries)
            state = bed.state()
            if state is None:
                raise SystemExit(f"no testbed runs from {args.run_dir}")
            run(bed, state.kubeconfig, args.jobs, args.ledger, work, args.compare_src, args.profile, args.catch_up_only)
            return
        bed = Testbed(work / "testbed", binaries)
        state = bed.up(resolve(load_policy(POLICY)))
        try:
            run(bed, state.kubeconfig, args.jobs, args.ledger, work, args.compare_src, args.profile)
        finally:
            bed.down()


if __name__ == "__main__":
    main()
