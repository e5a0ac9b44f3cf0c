"""The recorder against the testbed: ``gpufleet record`` as a child process, Jobs for the real Kueue,
and what the API server shows, to compare the ledger with.

Two oracles, both from the API server rather than from the recorder's code:

- ``WorkloadWatch``: ``kubectl get workloads --watch`` beside the recorder, every version of every
  Workload in order (used where nothing is restarted, so the watch itself is never cut);
- ``final_history``: the Workloads as they stand once every Job has finished (Kueue keeps their
  conditions and ``schedulingStats.evictions``), plus what the test deleted (used under chaos).
"""

from __future__ import annotations

import itertools
import json
import os
import random
import socket
import subprocess
import sys
import threading
import urllib.request
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from gpufleet.ledger.records import Allocation, EndReason, WaitInterval, inferred, parse_time
from gpufleet.ledger.store import Ledger
from gpufleet.testbed.kwok import RUN_FOR_ANNOTATION
from tests.e2e.batch_jobs import batch_job
from tests.ledger import ledger_backends
from tests.recorder import recorder_children

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
RUN_LABEL = "e2e.gpufleet.io/run"
LEASE_NAMESPACE = "gpufleet-system"
_names = itertools.count()

BACKENDS = [
    pytest.param("sqlite", id="sqlite"),
    pytest.param("postgresql", id="postgresql"),
]


postgres_url = ledger_backends.postgres_url  # a fixture: imported where the tests use it


@pytest.fixture
def ledger_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    database = f"live_{os.getpid()}_{next(_names)}"
    return ledger_backends.backend_url(request, tmp_path, sqlite="ledger.db", database=database)


def job(
    name: str,
    team: str,
    run: str,
    *,
    pods: int = 1,
    gpus: int = 1,
    run_for: str = "1h",
    deadline_s: int | None = None,
) -> dict[str, Any]:
    """A Job for Kueue; ``deadline_s`` makes the Job controller fail it that long after it starts."""
    labels = {
        QUEUE_LABEL: team,
        "gpufleet.io/team": team,
        "gpufleet.io/model": "tiny",
        "gpufleet.io/data-class": "internal",
        RUN_LABEL: run,
    }
    limits = {"nvidia.com/gpu": str(gpus)}
    pod = {"labels": labels, "annotations": {RUN_FOR_ANNOTATION: run_for}}
    return batch_job(name, team, labels, pods=pods, limits=limits, pod_metadata=pod, deadline_s=deadline_s)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class RecorderProcess:
    """``gpufleet record`` as a user runs it, in a child process that a test may SIGKILL."""

    def __init__(self, ledger: str, kubeconfig: str, log: Path, *, identity: str, lease: str, lease_s: int) -> None:
        self.port = free_port()
        self.argv = recorder_children.command(
            "--ledger", ledger, "--kubeconfig", kubeconfig, "--namespace", LEASE_NAMESPACE, "--lease-name", lease,
            "--identity", identity, "--lease-seconds", str(lease_s), "--metrics-port", str(self.port),
        )  # fmt: skip
        self.env = recorder_children.environment()
        self.log = log
        self.identity = identity
        self.process: subprocess.Popen[bytes] | None = None
        self.kills = 0
        self.paused = False  # the supervisor leaves a paused replica down
        self.gone_seen = 0.0  # 410 Gone restarts counted by killed processes, summed

    def start(self) -> None:
        """A new process (one still running is stopped first: a replica never runs twice)."""
        self.kill()
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(
                self.argv, env=self.env, stdout=log, stderr=subprocess.STDOUT, process_group=0
            )
        recorder_children.register(self.process.pid)

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def kill(self) -> None:
        """SIGKILL (its process group): no shutdown code runs, a transaction in flight is cut where it stands."""
        if self.process is None:
            return
        if self.process.poll() is None:
            self.gone_seen += self.restarts("Gone")
            recorder_children.stop(self.process.pid)
            self.kills += 1
        self.process.wait()

    def metrics(self) -> str:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/metrics", timeout=5) as reply:
                return str(reply.read().decode())
        except OSError:
            return ""

    def sample(self, name: str, **labels: str) -> float:
        """The sum of a metric's samples whose labels include ``labels``."""
        total = 0.0
        for line in self.metrics().splitlines():
            if not line.startswith(name + "{") and not line.startswith(name + " "):
                continue
            head, _, value = line.rpartition(" ")
            if all(f'{k}="{v}"' in head for k, v in labels.items()):
                total += float(value)
        return total

    def logged(self, text: str) -> int:
        """How many lines of this replica's log (every process it ran) contain ``text``."""
        with self.log.open(encoding="utf-8", errors="replace") as lines:
            return sum(text in line for line in lines)

    def restarts(self, cause: str) -> float:
        return self.sample("gpufleet_recorder_watch_restarts_total", cause=cause)

    def leader(self) -> bool:
        return self.sample("gpufleet_recorder_leader") == 1.0


@dataclass
class Attempt:
    """One admission of one Workload as the API server showed it."""

    uid: str
    name: str
    reserved: datetime
    cluster_queue: str = ""
    gpus: int = 0
    end: EndReason | None = None
    detail: str = ""
    message: str = ""
    finished: datetime | None = None


@dataclass
class History:
    """Per Workload uid: its admissions and the pending (reason, message) spans, in order."""

    attempts: dict[str, list[Attempt]] = field(default_factory=dict)
    waits: dict[str, list[tuple[str, str]]] = field(default_factory=dict)
    names: dict[str, str] = field(default_factory=dict)


def _conditions(wl: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in wl.get("status", {}).get("conditions") or []}


def _true(conds: dict[str, dict[str, Any]], kind: str) -> bool:
    return conds.get(kind, {}).get("status") == "True"


def _gpus(wl: dict[str, Any]) -> tuple[str, int]:
    admission = wl.get("status", {}).get("admission") or {}
    total = sum(
        int(a.get("resourceUsage", {}).get("nvidia.com/gpu", 0)) for a in admission.get("podSetAssignments") or []
    )
    return str(admission.get("clusterQueue", "")), total


class WorkloadWatch:
    """``kubectl get workloads -A --watch``: every version of every Workload, as the API server sends it."""

    def __init__(self, kubectl: Path, kubeconfig: str) -> None:
        self.events: list[tuple[str, dict[str, Any]]] = []
        self._process = subprocess.Popen(
            [str(kubectl), f"--kubeconfig={kubeconfig}", "get", "workloads.kueue.x-k8s.io", "--all-namespaces",
             "--watch", "--output-watch-events", "--output=json"],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        self._lock = threading.Lock()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self._process.stdout is not None
        decoder, buffer = json.JSONDecoder(), ""
        for raw in self._process.stdout:
            buffer += raw.decode()
            while True:
                stripped = buffer.lstrip()
                try:
                    event, end = decoder.raw_decode(stripped)
                except json.JSONDecodeError:
                    break
                buffer = stripped[end:]
                with self._lock:
                    self.events.append((event["type"], event["object"]))

    def stop(self) -> None:
        self._process.terminate()
        self._process.wait(timeout=10)

    def uids(self, prefix: str) -> set[str]:
        """The Workloads of Jobs whose names start with ``prefix``."""
        with self._lock:
            return {wl["metadata"]["uid"] for _, wl in self.events if owner_job(wl).startswith(prefix)}

    def history(self, uids: set[str]) -> History:
        """Replay the versions: each new QuotaReserved=True time is an attempt; how it ended follows."""
        with self._lock:
            events = list(self.events)
        history = History()
        pending: dict[str, bool] = {}
        for kind, wl in events:
            uid = wl["metadata"]["uid"]
            if uid not in uids:
                continue
            history.names[uid] = f"{wl['metadata']['namespace']}/{wl['metadata']['name']}"
            attempts = history.attempts.setdefault(uid, [])
            waits = history.waits.setdefault(uid, [])
            conds = _conditions(wl)
            reserved = conds.get("QuotaReserved", {})
            latest = attempts[-1] if attempts else None
            if kind == "DELETED":
                if latest is not None and latest.end is None:
                    latest.end, latest.detail = EndReason.EVICTED, "Deleted"
                    latest.finished = parse_time(wl["metadata"]["deletionTimestamp"])
                continue
            if reserved.get("status") == "True":
                pending[uid] = False
                when = parse_time(reserved["lastTransitionTime"])
                if latest is None or latest.reserved != when:
                    latest = Attempt(uid, history.names[uid], when)
                    attempts.append(latest)
                cq, gpus = _gpus(wl)
                latest.cluster_queue, latest.gpus = cq or latest.cluster_queue, gpus or latest.gpus
                finished = conds.get("Finished", {})
                if finished.get("status") == "True" and latest.end is None:
                    latest.end = finished_as(finished["reason"])
                    latest.detail, latest.message = finished["reason"], finished.get("message", "")
                    latest.finished = parse_time(finished["lastTransitionTime"])
                continue
            evicted = conds.get("Evicted", {})
            if latest is not None and latest.end is None and evicted.get("status") == "True":
                preempted = evicted.get("reason") == "Preempted"
                latest.end = EndReason.PREEMPTED if preempted else EndReason.EVICTED
                latest.detail = conds.get("Preempted", {}).get("reason", "") if preempted else evicted["reason"]
                latest.message = evicted.get("message", "")
                latest.finished = parse_time(evicted["lastTransitionTime"])
            if reserved.get("status") == "False" and not _true(conds, "Finished"):
                span = (reserved.get("reason", ""), reserved.get("message", ""))
                if not pending.get(uid) or waits[-1] != span:
                    waits.append(span)
                pending[uid] = True
            else:
                pending[uid] = False
        return history


def finished_as(reason: str) -> EndReason:
    """Kueue's Finished reasons (workload_types.go): Succeeded, Failed, or OwnerNotFound when the Job
    was deleted while its workload held quota."""
    return {"Succeeded": EndReason.FINISHED, "Failed": EndReason.FAILED, "OwnerNotFound": EndReason.EVICTED}[reason]


def owner_job(wl: dict[str, Any]) -> str:
    return next((o["name"] for o in wl["metadata"].get("ownerReferences") or [] if o.get("kind") == "Job"), "")


def compare(ledger: Ledger, history: History) -> list[str]:
    """Every difference between the ledger and the API server's history (empty: they match)."""
    problems: list[str] = []
    allocations: dict[str, list[Allocation]] = {}
    for a in ledger.allocations():
        allocations.setdefault(a.workload_uid, []).append(a)
    waits: dict[str, list[WaitInterval]] = {}
    for w in ledger.waits():
        waits.setdefault(w.workload_uid, []).append(w)
    for uid in set(allocations) - set(history.attempts):
        problems.append(f"ledger has allocations of a workload the test did not run: {uid}")
    for uid, expected in history.attempts.items():
        name = history.names[uid]
        got = sorted(allocations.get(uid, []), key=lambda a: a.attempt)
        if [a.attempt for a in got] != list(range(1, len(expected) + 1)):
            problems.append(f"{name}: attempts {[a.attempt for a in got]}, expected 1..{len(expected)}")
            continue
        for a, e in zip(got, expected, strict=True):
            want = (e.reserved, e.cluster_queue, e.gpus, e.end, e.detail, e.message, e.finished)
            have = (
                a.quota_reserved,
                a.cluster_queue,
                a.gpu_count,
                a.end_reason,
                a.end_detail,
                a.end_message,
                a.finished,
            )
            if want != have:
                problems.append(f"{name} attempt {a.attempt}: ledger {have} != API server {want}")
        spans = sorted(waits.get(uid, []), key=lambda w: w.index)
        if [(w.reason, w.message) for w in spans] != history.waits.get(uid, []):
            problems.append(
                f"{name}: waits {[(w.reason, w.message) for w in spans]} != API server {history.waits.get(uid)}"
            )
        if any(w.end is None for w in spans) and got and got[-1].end is not None:
            problems.append(f"{name}: a wait is still open after the workload ended")
    return problems


def ended(ledger: Ledger) -> dict[tuple[str, int], str]:
    return {(a.workload_uid, a.attempt): str(a.end_reason or "open") for a in ledger.allocations()}


def live_workloads(cluster: Any, prefix: str) -> list[dict[str, Any]]:
    """The Workloads of this test's Jobs (named with ``prefix``)."""
    items: list[dict[str, Any]] = cluster.get("workloads", "--all-namespaces")["items"]
    return [wl for wl in items if owner_job(wl).startswith(prefix)]


def final_history(workloads: list[dict[str, Any]], deleted: dict[str, tuple[str, int]]) -> dict[tuple[str, int], str]:
    """How every attempt ended, from the finished Workloads (evictions counted by Kueue) and the deletions.

    ``deleted`` maps a deleted workload's uid to (name, attempts it had had when deleted).
    """
    expected: dict[tuple[str, int], str] = {}
    for wl in workloads:
        conds = _conditions(wl)
        uid = wl["metadata"]["uid"]
        evictions = wl.get("status", {}).get("schedulingStats", {}).get("evictions") or []
        earlier = sum(int(e.get("count", 0)) for e in evictions)
        for attempt in range(1, earlier + 1):
            expected[(uid, attempt)] = str(EndReason.PREEMPTED)  # the flows' only evictions are preemptions
        finished = conds.get("Finished", {})
        if finished.get("status") == "True":
            failed = finished["reason"] == "Failed"
            expected[(uid, earlier + 1)] = str(EndReason.FAILED if failed else EndReason.FINISHED)
    for uid, (_, attempts) in deleted.items():
        for attempt in range(1, attempts + 1):
            expected.setdefault((uid, attempt), str(EndReason.EVICTED))
    return expected


def duplicated_entries(ledger: Ledger) -> int:
    """Entries that repeat the record hash of an entry before them: a record written twice."""
    seen: set[str] = set()
    twice = 0
    for entry in ledger.entries():
        if entry.record_hash in seen:
            twice += 1
        seen.add(entry.record_hash)
    return twice


class Supervisor:
    """Plays the kubelet for recorder replicas: one that exits (lost its Lease) is started again."""

    def __init__(self, *replicas: RecorderProcess) -> None:
        self.replicas = replicas
        self.exits = 0
        self.codes: list[int] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)

    def __enter__(self) -> Supervisor:
        for replica in self.replicas:
            if not replica.running:
                replica.start()
        self._thread.start()
        return self

    def _watch(self) -> None:
        while not self._stop.wait(0.2):
            for replica in self.replicas:
                if replica.process is not None and replica.process.poll() is not None and not replica.paused:
                    self.exits += 1
                    self.codes.append(replica.process.returncode)
                    replica.start()

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()
        for replica in self.replicas:
            replica.kill()


@dataclass
class Flow:
    """Jobs for the real Kueue in waves: short ones that finish, some that fail, borrowers that get
    preempted when the lender reclaims, and long ones the flow deletes once they hold quota."""

    cluster: Any
    prefix: str
    jobs: int
    seed: int
    wave: int = 4
    created: int = 0
    deleted: dict[str, tuple[str, int]] = field(default_factory=dict)  # uid -> (name, attempts when deleted)

    def spec(self, i: int) -> dict[str, Any]:
        rng = random.Random(self.seed * 100_003 + i)
        team = "beta" if i % 2 else "alpha"
        name, run = f"{self.prefix}{i}", self.run
        if i % 9 == 4:
            return job(name, "alpha", run, gpus=1, run_for="1h")  # deleted once admitted
        if i % 7 == 3:
            return job(name, team, run, gpus=1, run_for="1h", deadline_s=2)  # fails
        return job(name, team, run, gpus=rng.choice([1, 2, 4]), run_for=rng.choice(["1s", "2s", "3s"]))

    @property
    def run(self) -> str:
        return self.prefix.rstrip("-")

    def step(self, *, delete: bool = True) -> bool:
        """Create the next wave and (unless ``delete`` is false) delete the long Jobs that hold quota;
        False once all are created."""
        if self.created < self.jobs:
            upto = min(self.jobs, self.created + self.wave)
            self.cluster.apply([self.spec(i) for i in range(self.created, upto)])
            self.created = upto
        if delete:
            self._delete_admitted()
        return self.created < self.jobs

    def _long(self) -> set[str]:
        return {f"{self.prefix}{i}" for i in range(self.created) if i % 9 == 4}

    def _delete_admitted(self) -> None:
        for wl in live_workloads(self.cluster, self.prefix):
            name = owner_job(wl)
            if name not in self._long() or wl["metadata"]["uid"] in self.deleted:
                continue
            conds = _conditions(wl)
            if not _true(conds, "Admitted"):
                continue
            evictions = wl.get("status", {}).get("schedulingStats", {}).get("evictions") or []
            self.deleted[wl["metadata"]["uid"]] = (name, 1 + sum(int(e.get("count", 0)) for e in evictions))
            self.cluster.kubectl("delete", "job", name, f"--namespace={wl['metadata']['namespace']}", "--wait=false")

    def settled(self) -> bool:
        """Every Job created, every long one deleted, every other one finished."""
        if self.created < self.jobs:
            return False
        self._delete_admitted()
        workloads = live_workloads(self.cluster, self.prefix)
        names = {owner_job(wl) for wl in workloads}
        return (
            len(self.deleted) == len(self._long())
            and all(_true(_conditions(wl), "Finished") for wl in workloads if owner_job(wl) not in self._long())
            and len(names - self._long()) == self.jobs - len(self._long())
        )

    def expected(self) -> dict[str, tuple[Outcome, ...]]:
        """Each Workload's outcome as Kueue's two witnesses tell it: its ``schedulingStats`` count, and
        its ``Preempted`` events (``witnesses``)."""
        workloads = live_workloads(self.cluster, self.prefix)
        return witnesses(outcomes_from_api(workloads, self.deleted),
                         outcomes_from_api(workloads, self.deleted, preempted_events(self.cluster)))  # fmt: skip

    def cleanup(self) -> None:
        for team in ("alpha", "beta"):
            self.cluster.kubectl(
                "delete", "jobs", f"--selector={RUN_LABEL}={self.run}", f"--namespace={team}", "--wait=true",
                "--timeout=120s", check=False,
            )  # fmt: skip


@dataclass(frozen=True)
class Outcome:
    """One Workload's admissions: how the earlier ones ended (sorted), and the last one in full."""

    earlier: tuple[str, ...]
    last: str
    reserved: datetime | None
    finished: datetime | None


def preempted_events(cluster: Any) -> dict[str, int]:
    """How many times Kueue's own events say it preempted each Workload (by uid).

    Kueue v0.19.2 emits ``Preempted`` on the victim only after its eviction was written
    (``preemption.go``). A second witness beside the Workload's ``schedulingStats``, which a
    readmission from a stale copy can lower (docs/ledger.md). Events have their own faults: lost when
    Kueue restarts before its broadcaster sent them, and, after a restart, a second eviction written
    to a workload already evicted ends no attempt. An event repeated within the series window is one
    object with ``series.count``.
    """
    items: list[dict[str, Any]] = cluster.get("events.events.k8s.io", "--all-namespaces")["items"]
    found: dict[str, int] = {}
    for event in items:
        regarding = event.get("regarding") or {}
        if event.get("reason") != "Preempted" or regarding.get("kind") != "Workload":
            continue
        count = max(1, int((event.get("series") or {}).get("count", 1)))
        found[regarding.get("uid", "")] = found.get(regarding.get("uid", ""), 0) + count
    return found


def outcomes_from_api(
    workloads: list[dict[str, Any]], deleted: dict[str, tuple[str, int]], preempted: dict[str, int] | None = None
) -> dict[str, Outcome]:
    """From the finished Workloads (Kueue counts their evictions by reason) and what the test deleted;
    with ``preempted`` (Kueue's ``Preempted`` events, by uid), the events count the preemptions."""
    found: dict[str, Outcome] = {}
    for wl in workloads:
        uid = wl["metadata"]["uid"]
        if uid in deleted:
            continue
        conds = _conditions(wl)
        evictions = wl.get("status", {}).get("schedulingStats", {}).get("evictions") or []
        earlier = sorted(
            str(EndReason.PREEMPTED if e.get("reason") == "Preempted" else EndReason.EVICTED)
            for e in evictions
            for _ in range(int(e.get("count", 0)))
        )
        # Kueue's count can also lose an eviction (a readmission written from a stale copy, seen once in
        # 5,000 bench Jobs, docs/ledger.md, and in CI under the kube-apiserver and Kueue restarts: the
        # ledger held three preemptions, the count two). Nothing in the final Workload tells that case;
        # Kueue's events may
        if preempted is not None:
            others = [e for e in earlier if e != str(EndReason.PREEMPTED)]
            earlier = sorted(others + [str(EndReason.PREEMPTED)] * preempted.get(uid, 0))
        evicted = conds.get("Evicted")
        if evicted is not None and evicted["status"] == "True":
            # Kueue began to evict it and counted that, but the Job finished first (Kueue's job reconciler handles
            # a finished Job before an eviction): that count ended no attempt
            began = str(EndReason.PREEMPTED if evicted["reason"] == "Preempted" else EndReason.EVICTED)
            if began in earlier:  # its event may have been lost
                earlier.remove(began)
        finished = conds["Finished"]
        last = finished_as(finished["reason"])
        found[uid] = Outcome(
            tuple(earlier),
            str(last),
            parse_time(conds["QuotaReserved"]["lastTransitionTime"]),
            parse_time(finished["lastTransitionTime"]),
        )
    for uid, (_, attempts) in deleted.items():
        found[uid] = Outcome((str(EndReason.PREEMPTED),) * (attempts - 1), str(EndReason.EVICTED), None, None)
    return found


def outcomes_from_ledger(ledger: Ledger, uids: set[str], deleted: set[str], prefix: str) -> dict[str, Outcome]:
    """The same view of the ledger (times of deleted Workloads' last attempts are left out: the test
    deleted them, so only their reason is known independently), for the Workloads of this flow's Jobs
    (``prefix``) alone: the recorder records the whole cluster, and an earlier test's Jobs its clean-up
    did not remove (seen in CI after the kube-apiserver restart test) are not this flow's to compare."""
    per: dict[str, list[Allocation]] = {}
    for a in ledger.allocations():
        if a.name.startswith(f"job-{prefix}") or a.workload_uid in uids:
            per.setdefault(a.workload_uid, []).append(a)
    found: dict[str, Outcome] = {}
    for uid, attempts in per.items():
        attempts.sort(key=lambda a: a.attempt)
        if [a.attempt for a in attempts] != list(range(1, len(attempts) + 1)):
            found[uid] = Outcome(("attempts", *map(str, (a.attempt for a in attempts))), "gap", None, None)
            continue
        last = attempts[-1]
        gone = uid in deleted
        found[uid] = Outcome(
            tuple(sorted(_counted_as(a) for a in attempts[:-1])),
            str(last.end_reason or "open"),
            None if gone else last.quota_reserved,
            None if gone else last.finished,
        )
    for uid in uids - set(per):
        found[uid] = Outcome((), "missing", None, None)
    return found


def _counted_as(a: Allocation) -> str:
    """How an earlier attempt counts against the API server's view: an attempt inferred from Kueue's
    count counts only if it is marked so and claims no time; an unmarked one without its reservation
    time, or a marked one with a time, is a mismatch."""
    times = (a.quota_reserved, a.admitted, a.started, a.finished)
    if inferred(a) and any(t is not None for t in times):
        return "inferred with a time"
    if not inferred(a) and a.quota_reserved is None:
        return "unmarked without a reservation time"
    return str(a.end_reason or "open")


def attempts_told(ledger: Ledger, uids: set[str]) -> list[str]:
    """The ledger's attempts of these Workloads, one line each, for a failure's message: when a
    difference is found, which attempt it is and what the recorder saw of it."""
    return [
        f"{a.workload_uid[:8]} #{a.attempt}: reserved {a.quota_reserved}, finished {a.finished},"
        f" {a.end_reason or 'open'}{' (inferred)' if inferred(a) else ''}: {a.end_message}"
        for a in sorted(ledger.allocations(), key=lambda a: (a.workload_uid, a.attempt))
        if a.workload_uid in uids
    ]


def inferred_attempts(ledger: Ledger) -> int:
    """How many attempts the recorder inferred from Kueue's eviction counts instead of observing."""
    return sum(1 for a in ledger.allocations() if inferred(a))


def witnesses(counted: dict[str, Outcome], evented: dict[str, Outcome]) -> dict[str, tuple[Outcome, ...]]:
    """Each Workload's outcome by Kueue's count and by its events; one where they agree.

    Under kube-apiserver and Kueue restarts each witness has been wrong on its own in CI: the count
    two preemptions where the ledger held three observed attempts, and two preemptions where the
    ledger held one, its readmission numbered from the count as it was then. The ledger must agree
    with one of them: a lost or duplicated attempt that both witnesses contradict still fails.
    """
    return {uid: tuple(dict.fromkeys((o, evented.get(uid, o)))) for uid, o in counted.items()}


def differences(want: dict[str, tuple[Outcome, ...]], have: dict[str, Outcome]) -> list[str]:
    return [f"{uid}: ledger {have.get(uid)} != API server {' or '.join(map(str, want.get(uid, (None,))))}"
            for uid in sorted(set(want) | set(have))
            if not any(_agree(w, have.get(uid)) for w in want.get(uid, (None,)))]  # fmt: skip


def _agree(want: Outcome | None, have: Outcome | None) -> bool:
    """Equal, except that the ledger may hold an earlier finish than the final status: Kueue v0.19.2's
    ``workloadfinish.Finish`` skips a workload only when its (cached) copy is finished, so a second
    reconcile from a stale copy applies ``Finished`` again with a new ``lastTransitionTime`` (seen in
    CI: the recorder saw Finished at :36, the final status says :38). The ledger keeps the first
    finish it saw, which is when the attempt ended."""
    if want is None or have is None or want == have:
        return want == have
    return (
        replace(have, finished=want.finished) == want
        and have.finished is not None
        and want.finished is not None
        and (have.reserved is None or have.reserved <= have.finished <= want.finished)
        and have.finished <= want.finished
    )


def audit_verify(ledger: str) -> tuple[int, str]:
    """``gpufleet audit verify`` as a user runs it: (exit code, output)."""
    done = subprocess.run(
        [sys.executable, "-m", "gpufleet", "audit", "verify", "--ledger", ledger],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    return done.returncode, done.stdout + done.stderr
