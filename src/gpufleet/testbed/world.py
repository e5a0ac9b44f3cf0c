"""The world differential's two worlds on one trace: the testbed's real control plane, and ``simulate``.

``run_real`` starts a testbed from the policy (its nodes as declared, Kueue with the Configuration the
policy renders), applies the rendered bundle whole (namespaces, flavors, cohort, ClusterQueues,
LocalQueues, priority classes, admission policy, ...), starts ``gpufleet record`` writing a fresh
ledger, creates each trace job as a real Job (``world_jobs``) at its arrival second through the one
API client (``gpufleet.kube``), and lets Kueue, kube-scheduler and kwok run it: pods run for their
durations, Kueue preempts and evicts as it does. Once every Job has ended (bounded by
``drain_timeout_s``) and the ledger holds every finish, the recorder and the testbed stop and the
ledger's records come back with the run's origin (the wall time of trace second 0).

With ``probes`` (seconds from trace second 0), a thread keeps, at each, what ``gpufleet forecast``
reads of the live cluster (``forecast.snapshots.Snapshot``: the ledger's allocations, the Workloads as
the CLI lists them, the wall clock). It only copies: the forecast, a pure function of those and
*now*, runs after the run (``forecast.snapshots.hindsight``), so its samples take no CPU from the
control plane while the run's races are decided, and it is the answer a user would have got then.

``run_simulated`` runs ``simulate`` (the queue world) on the same trace and policy, its ledger
records stamped from the same kind of origin, so ``simulate.differential`` reads both alike.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import gpufleet
from gpufleet import kube
from gpufleet.errors import InputError
from gpufleet.forecast.snapshots import Snapshot
from gpufleet.ledger.records import Allocation, EndReason, Record
from gpufleet.ledger.store import Ledger
from gpufleet.policy import Fleet
from gpufleet.render import render
from gpufleet.render.bundle import write_files
from gpufleet.simulate.config import SimulationConfig
from gpufleet.simulate.differential import job_name
from gpufleet.simulate.run import simulate
from gpufleet.testbed.binaries import Binaries
from gpufleet.testbed.cluster import Testbed
from gpufleet.testbed.processes import TestbedError
from gpufleet.testbed.world_jobs import RUN_LABEL, job_manifest
from gpufleet.trace.job import Job

LEAD_S = 3.0  # from the recorder's readiness to trace second 0
LEDGER_QUIET_S = 180.0  # how long the ledger may lag the API server's last finish (a loaded machine)
ORIGIN = datetime(2026, 1, 5, tzinfo=UTC)  # the simulated runs' trace second 0

Say = Callable[[str], None]


@dataclass(frozen=True)
class RealRun:
    records: list[Record]
    origin: datetime  # wall time of trace second 0
    wall_s: float  # from trace second 0 to the last Job's end
    ledger: str
    undrained: tuple[str, ...]  # Jobs not ended by the drain deadline
    late: tuple[str, ...] = ()  # Jobs created more than a second after their arrival (the machine was slow)
    unrecorded: tuple[str, ...] = ()  # Jobs the API server shows succeeded and the ledger holds no finish for
    snapshots: tuple[Snapshot, ...] = ()  # a live forecast's inputs at each probe taken before the run ended


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _recorder(ledger: str, kubeconfig: str, log: Path) -> subprocess.Popen[bytes]:
    """``gpufleet record`` as a user runs it, in its own process group (stopped whole)."""
    argv = [sys.executable, "-m", "gpufleet", "record", "--ledger", ledger, "--kubeconfig", kubeconfig,
            "--namespace", "gpufleet-system", "--lease-name", "world-differential", "--identity", "world",
            "--metrics-port", str(_free_port())]  # fmt: skip
    src = str(Path(gpufleet.__file__).resolve().parents[1])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([src, os.environ.get("PYTHONPATH", "")])}
    with log.open("ab") as out:
        return subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env, process_group=0)


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def _ledger_finishes(url: str) -> tuple[set[str], list[Record]]:
    try:
        with Ledger.read(url) as ledger:
            records: list[Record] = [*ledger.allocations(), *ledger.waits()]
    except Exception:  # not created yet
        return set(), []
    done = {job_name(r) for r in records if isinstance(r, Allocation) and r.end_reason is EndReason.FINISHED}
    return done, records


def _wait(check: Callable[[], bool], what: str, timeout_s: float, poll_s: float = 1.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        if time.monotonic() > deadline:
            raise TestbedError(f"timed out after {timeout_s:.0f} s waiting for {what}")
        time.sleep(poll_s)


def _apply_bundle(bed: Testbed, fleet: Fleet, folder: Path) -> None:
    """The policy's bundle, whole, as ``kubectl apply -k`` applies it; then every ClusterQueue Active."""
    write_files(render(fleet), folder)
    bed.kubectl("apply", "--server-side", f"--filename={folder / 'namespaces.yaml'}")
    for namespace in ("gpu-operator", "gpufleet-system"):
        bed.kubectl("create", "namespace", namespace, check=False)
    bed.kubectl("apply", "--server-side", f"--kustomize={folder}")

    def active() -> bool:
        out = bed.kubectl(
            "get", "clusterqueues",
            "--output=jsonpath={range .items[*]}{.status.conditions[?(@.type=='Active')].status}{'\\n'}{end}",
            check=False,
        ).stdout.split()  # fmt: skip
        return len(out) == len(fleet.policy.teams) and all(s == "True" for s in out)

    _wait(active, "every ClusterQueue to turn Active", 120)


class _Probes:
    """A daemon thread taking a ``Snapshot`` at each probe second after the origin, until stopped."""

    def __init__(self, probes: Sequence[float], origin_mono: float, ledger: str, kubeconfig: Path, say: Say) -> None:
        self.snapshots: list[Snapshot] = []
        self._stop = threading.Event()
        self._args = (sorted(probes), origin_mono, ledger, kubeconfig, say)
        self._thread = threading.Thread(target=self._run, name="forecast-probes", daemon=True)
        if probes:
            self._thread.start()

    def _run(self) -> None:
        probes, origin_mono, ledger, kubeconfig, say = self._args
        for second in probes:
            if self._stop.wait(max(origin_mono + second - time.monotonic(), 0)):
                return
            try:
                self.snapshots.append(snapshot(ledger, kubeconfig))
            except (InputError, OSError) as exc:  # a probe the machine could not take is reported, not fatal
                say(f"  probe at {second:.0f} s not taken: {exc}")

    def stop(self) -> list[Snapshot]:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()
        return self.snapshots


def snapshot(ledger: str, kubeconfig: Path) -> Snapshot:
    """What ``gpufleet forecast --ledger`` reads, in its order: the ledger's allocations, then the
    Workloads (the CLI's listing, ``kube.read_kueue_state``) with the API server's clock, then this
    machine's (the CLI's fallback where the server sent no Date)."""
    records: tuple[Record, ...] | None = None
    for tries in range(5):  # the recorder may hold SQLite's write lock for a moment
        try:
            with Ledger.read(ledger) as book:
                records = tuple(book.allocations())
            break
        except Exception as exc:  # locked: read again shortly; still locked: the probe is not taken
            if tries == 4:
                raise OSError(f"the ledger {ledger} not readable: {exc}") from exc
            time.sleep(0.1)
    assert records is not None
    listed = datetime.now(UTC)
    state = kube.read_kueue_state(kubeconfig)
    objects = tuple(o for o in state.objects if o.get("kind") == "Workload")
    return Snapshot(records, listed, objects, datetime.now(UTC), state.server_time)


def run_real(
    fleet: Fleet,
    jobs: Sequence[Job],
    work: Path,
    binaries: Binaries,
    *,
    drain_timeout_s: float = 900,
    probes: Sequence[float] = (),
    say: Say = lambda _: None,
) -> RealRun:
    """One run of ``jobs`` (compressed already) on a fresh testbed in ``work``; always stops what it
    started. ``probes``: seconds after trace second 0 to keep a live forecast's inputs at (see above)."""
    work.mkdir(parents=True, exist_ok=True)
    run = work.name.lower()[:63] or "world"
    manifests = [(job, job_manifest(job, fleet, run)) for job in sorted(jobs, key=lambda j: (j.submit_s, j.job_id))]
    bed = Testbed(work / "testbed", binaries)
    state = bed.up(fleet)
    recorder: subprocess.Popen[bytes] | None = None
    probing: _Probes | None = None
    try:
        _apply_bundle(bed, fleet, work / "bundle")
        ledger = str(work / "ledger.sqlite")
        recorder = _recorder(ledger, state.kubeconfig, work / "recorder.log")
        _wait(lambda: _ledger_exists(work / "ledger.sqlite"), "the recorder's ledger", 120)
        api = kube.sync_client(Path(state.kubeconfig))
        origin_mono = time.monotonic() + LEAD_S
        origin = datetime.now(UTC) + timedelta(seconds=LEAD_S)
        probing = _Probes(probes, origin_mono, ledger, Path(state.kubeconfig), say)
        late: list[str] = []
        for job, manifest in manifests:
            delay = origin_mono + job.submit_s - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            elif delay < -1:
                late.append(job.job_id)
            kube.create_job(api, manifest)
        say(f"  {len(manifests)} Jobs created; {len(late)} more than 1 s late")
        names = {f"{j.namespace}/{j.job_id}" for j, _ in manifests}

        def ended() -> bool:
            outcomes = kube.job_outcomes(api, f"{RUN_LABEL}={run}")
            return all(
                n in outcomes and (outcomes[n][0] >= j.pods or outcomes[n][1] > 0)
                for j, _ in manifests
                if (n := f"{j.namespace}/{j.job_id}")
            )

        with contextlib.suppress(TestbedError):  # what did not end is reported as undrained
            _wait(ended, "every Job to end", drain_timeout_s, poll_s=2.0)
        wall = (datetime.now(UTC) - origin).total_seconds()
        taken = probing.stop()
        outcomes = kube.job_outcomes(api, f"{RUN_LABEL}={run}")
        succeeded = {n for n, (ok, _) in outcomes.items() if n in names and ok > 0}
        undrained = tuple(sorted(names - {n for n, (ok, bad) in outcomes.items() if ok or bad}))
        with contextlib.suppress(TestbedError):
            _wait(lambda: succeeded <= _ledger_finishes(ledger)[0], "the ledger to hold every finish", LEDGER_QUIET_S)
        unrecorded = tuple(sorted(succeeded - _ledger_finishes(ledger)[0]))
        if unrecorded:
            say(f"  the ledger lacks finishes for {list(unrecorded)}")
    finally:
        if probing is not None:
            probing.stop()
        if recorder is not None:
            _stop(recorder)
        bed.down()
    _, records = _ledger_finishes(ledger)
    return RealRun(records, origin, wall, ledger, undrained, tuple(late), unrecorded, tuple(taken))


def _ledger_exists(path: Path) -> bool:
    return path.exists() and path.stat().st_size > 0


def run_simulated(fleet: Fleet, jobs: Sequence[Job], config: SimulationConfig | None = None) -> list[Record]:
    """The queue world on ``jobs``: its ledger records, trace second 0 at ``ORIGIN``."""
    base = config or SimulationConfig()
    return simulate(fleet, jobs, replace(base, start=ORIGIN)).records
