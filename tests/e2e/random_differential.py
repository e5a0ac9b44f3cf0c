"""Random scenarios against the real Kueue, in batches: apply, export, predict, release, settle, compare.

The readers (Kueue's Workloads and the twin's report reduced to :class:`Verdicts`) live in
``tests/e2e/twin_differential.py``; the scenarios in ``tests/e2e/random_scenarios.py``. Used by
``tests/e2e/test_twin_random.py`` (CI) and ``bench/twin_differential.py`` (300+ on demand).
"""

from __future__ import annotations

import copy
import json
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, NoReturn

import yaml
from typer.testing import CliRunner

from gpufleet.cli import app
from gpufleet.testbed import Testbed, TestbedError
from tests.e2e.conftest import eventually
from tests.e2e.random_scenarios import (
    DRA_MAPPINGS,
    RELEASED_LABEL,
    KueueConfig,
    Names,
    Scenario,
    generate,
    job_object,
    queue_objects,
    shared_objects,
)
from tests.e2e.twin_differential import (
    EXPORTED,
    SETTLE_TIMEOUT_S,
    Verdicts,
    job_of,
    twin_usage,
    twin_verdicts,
    usage_of,
    verdicts_of,
)

# Method (issue 18). A batch is several random scenarios of one Kueue Configuration, each under its own
# name prefix: its own two namespaces, Cohorts, ClusterQueues and LocalQueues, so the scenarios never
# share quota and run side by side. The Jobs are created one per second per scenario (a Workload's
# ``creationTimestamp`` has whole seconds, so this gives every Workload of a scenario its own queue
# position). Jobs meant to run first go to the ``-run`` namespace, which the ClusterQueues select from
# the start; the Jobs under test go to ``-new``, which carries the scenario label but not the
# ``released`` one: Kueue creates their Workloads and parks them (namespace mismatch). Once Kueue has
# settled, kubectl exports everything, the twin runs on a copy where ``-new`` is relabelled, and then
# ``-new`` is relabelled in the cluster. One label change makes every ClusterQueue of the scenario
# match at once (Kueue's namespace handler moves all parked workloads of their cohort trees back to
# the heaps together), where a held LocalQueue would need one release per ClusterQueue.

TEMPLATES = "resourceclaimtemplates.resource.k8s.io"  # the claim Jobs' template, which the twin counts from
BATCH_SETTLE_TIMEOUT_S = 90.0
# Longer than QUIET_S: with many scenarios at once on a loaded machine, Kueue's requeue batch (1 s),
# its backoff and the eviction round trips can leave a gap of several seconds between two changes.
BATCH_QUIET_S = 8.0
UNMOVED_WAIT_S = 30.0  # how long a release that changes nothing Kueue writes is waited on (see _settle)
EVICTION_MESSAGE = "Preempted to accommodate"  # what an evicted Workload's QuotaReserved=False says


@dataclass
class Outcome:
    """One scenario's result: both verdicts, the usage tables, and what disagreed (empty: agreement)."""

    scenario: Scenario
    prefix: str
    real: Verdicts
    twin: Verdicts
    real_usage: dict[str, dict[str, dict[str, int]]]
    twin_usage: dict[str, dict[str, dict[str, int]]]
    listing: Path  # the export the twin read (the scenario's objects only, hold not yet lifted)
    released: Path  # the twin's input
    config: Path
    settled: bool
    cycles: int
    ties: list[str] = field(default_factory=list)  # Workloads sharing a creation second (UID decides)
    exported_messages: dict[str, str] = field(default_factory=dict)  # Job -> QuotaReserved message at export
    final: list[dict[str, Any]] = field(default_factory=list)  # Kueue's Workloads once settled (evidence)
    timings: dict[str, float] = field(default_factory=dict)  # the batch's phases, seconds

    @property
    def unwritten(self) -> list[str]:
        """Pending Jobs whose condition Kueue left as it was at the export while the twin wrote a new one.

        Behind a blocked StrictFIFO head, and for equivalents bulk-moved by the scheduling hash, Kueue
        writes no new condition (issue 18, "What Kueue writes"); the twin keeps its own explanation but
        must mark it as its own (``kueueWrites: false``). The condition left is the one at the export,
        for a victim requeued and not tried again the eviction's own message ("Preempted to …"), or
        the one Kueue wrote when the Job failed on its own before an equivalent's failure moved it
        (the twin gives that one as ``kueueStatus``, and it must be the same).
        """
        return sorted(
            job
            for job, message in self.real.pending.items()
            if (
                message == self.exported_messages.get(job)
                or message.startswith(EVICTION_MESSAGE)
                or message == self.twin.written.get(job)
            )
            and self.twin.pending.get(job, message) != message
        )

    @property
    def unmarked(self) -> list[str]:
        """Jobs Kueue wrote nothing for whose twin explanation is not marked as the twin's own."""
        return [job for job in self.unwritten if job not in self.twin.own]

    @property
    def disagreements(self) -> list[str]:
        out: list[str] = []
        if not self.settled:
            out.append("NotSettled")
        if self.real.admitted != self.twin.admitted:
            out.append("Admitted")
        if self.real.preempted != self.twin.preempted:
            out.append("Preempted")
        if set(self.real.pending) != set(self.twin.pending):
            out.append("PendingSet")
        else:
            unwritten = set(self.unwritten)
            if any(self.real.pending[j] != m for j, m in self.twin.pending.items() if j not in unwritten):
                out.append("PendingMessage")
            if unwritten:
                out.append("KueueWroteNothing")
            if self.unmarked:
                out.append("UnmarkedTwinMessage")
            twin_reasons = {j: r for j, r in self.twin.reasons.items() if j not in unwritten}
            if {j: r for j, r in self.real.reasons.items() if j not in unwritten} != twin_reasons:
                out.append("PendingReason")
        if self.real_usage != self.twin_usage:
            out.append("Usage")
        return out

    def save(self, folder: Path) -> Path:
        """The reproducer ``rejudge`` reads: scenario and both outcomes, Kueue's Workloads, the twin's input."""
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "outcome.yaml").write_text(yaml.safe_dump(self.report(), sort_keys=False), encoding="utf-8")
        final = yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": self.final}, sort_keys=False)
        (folder / "kueue-final.yaml").write_text(final, encoding="utf-8")
        for src in (self.listing, self.released, self.config):
            (folder / src.name).write_text(src.read_text(encoding="utf-8"), encoding="utf-8")
        return folder

    def kueue_key(self) -> str:
        """Kueue's verdicts with the name prefix taken out: two runs of one seed compare equal iff Kueue agreed."""
        return repr(self.real.key()).replace(f"{self.prefix}-", "")

    def report(self) -> dict[str, Any]:
        """What a bug report needs: the scenario, both outcomes, and the files to rerun the twin on."""

        def side(v: Verdicts, usage: dict[str, Any]) -> dict[str, Any]:
            return {
                "admitted": {
                    j: {"clusterQueue": cq, "flavors": [list(f) for f in fl]}
                    for j, (cq, fl) in sorted(v.admitted.items())
                },
                "preempted": dict(sorted(v.preempted.items())),
                "pending": {j: {"reason": v.reasons.get(j, ""), "message": m} for j, m in sorted(v.pending.items())},
                "usage": usage,
            }

        return {
            "seed": self.scenario.seed,
            "prefix": self.prefix,
            "disagreements": self.disagreements,
            "ties": self.ties,
            "kueueWroteNothing": self.unwritten,
            "kueue": side(self.real, self.real_usage),
            "twin": side(self.twin, self.twin_usage),
            "scenario": self.scenario.to_dict(),
        }


def _all(bed: Testbed, resource: str) -> list[dict[str, Any]]:
    return list(json.loads(bed.kubectl("get", resource, "--all-namespaces", "--output=json").stdout)["items"])


def _apply(bed: Testbed, objects: list[dict[str, Any]]) -> None:
    bed.kubectl(
        "apply", "--server-side", "--field-manager=gpufleet-e2e", "--filename=-", stdin=yaml.safe_dump_all(objects)
    )


def _workloads_by_prefix(bed: Testbed, prefixes: list[str]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {p: [] for p in prefixes}
    for wl in _all(bed, "workloads.kueue.x-k8s.io"):
        ns = wl["metadata"]["namespace"]
        prefix = ns.rsplit("-", 1)[0]
        if prefix in out and ns in (f"{prefix}-run", f"{prefix}-new"):
            out[prefix].append(wl)
    return out


def _testbed_error(message: str) -> NoReturn:
    raise TestbedError(message)


def _wait(check: Any, what: str, timeout_s: float = 120.0) -> Any:
    """``eventually``, raising TestbedError: this module also runs outside pytest (bench/)."""
    return eventually(check, what, timeout_s, poll_s=0.3, fail=_testbed_error)


def _created(bed: Testbed, prefixes: list[str], wanted: set[tuple[str, str]]) -> list[dict[str, Any]] | None:
    """The Workloads of the ``wanted`` (prefix, Job) pairs, once Kueue has created all of them."""
    found = [(p, wl) for p, wls in _workloads_by_prefix(bed, prefixes).items() for wl in wls]
    mine = [wl for p, wl in found if (p, job_of(wl)) in wanted]
    return mine if len(mine) == len(wanted) else None


def _create_jobs(bed: Testbed, batch: dict[str, Scenario]) -> dict[str, list[str]]:
    """Create each scenario's Jobs in order, one per second per scenario; return creation-second ties."""
    seconds: dict[str, dict[str, str]] = {p: {} for p in batch}
    for i in range(max(len(s.jobs) for s in batch.values())):
        wanted = {(p, s.jobs[i].name) for p, s in batch.items() if i < len(s.jobs)}
        _apply(bed, [job_object(s.jobs[i], Names(p)) for p, s in batch.items() if i < len(s.jobs)])

        made: list[dict[str, Any]] = _wait(
            lambda w=wanted: _created(bed, list(batch), w), f"the Workloads of Jobs {sorted(wanted)}"
        )
        for wl in made:
            seconds[wl["metadata"]["namespace"].rsplit("-", 1)[0]][job_of(wl)] = wl["metadata"]["creationTimestamp"]
        latest = max(
            datetime.strptime(wl["metadata"]["creationTimestamp"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
            for wl in made
        )
        time.sleep(max(0.0, latest.timestamp() + 1.05 - time.time()))  # the next Jobs fall in a later second
    ties: dict[str, list[str]] = {}
    for p, by_job in seconds.items():
        stamps = list(by_job.values())
        ties[p] = sorted(j for j, t in by_job.items() if stamps.count(t) > 1)
    return ties


def _settle(
    bed: Testbed, prefixes: list[str], timeout_s: float, baseline: dict[str, Verdicts] | None = None
) -> tuple[dict[str, Verdicts], set[str]]:
    """Poll until each scenario's verdicts stay unchanged for BATCH_QUIET_S with nothing in flight.

    With ``baseline`` (the verdicts before the release) a scenario is not quiet until its verdicts
    differ from it: a release always changes something (each ClusterQueue's head is judged again,
    and no verdict repeats the namespace mismatch), and on a busy machine Kueue may take longer than
    the quiet window to react. Some releases change nothing Kueue writes (a StrictFIFO head blocked
    before and after, with the Jobs behind it never popped: seeds 158, 205 and 252 of the 300-seed
    run), so after UNMOVED_WAIT_S verdicts equal to the baseline count as settled too. Returns the
    last verdicts of every scenario and the prefixes that did not settle in ``timeout_s`` (a
    preempt-back loop, for one): reported, not waited on forever.
    """
    started = time.monotonic()
    deadline = started + timeout_s
    last: dict[str, Verdicts] = {}
    since: dict[str, float] = {}
    quiet: set[str] = set()
    while time.monotonic() < deadline and len(quiet) < len(prefixes):
        for p, wls in _workloads_by_prefix(bed, prefixes).items():
            if p in quiet:
                continue
            now = verdicts_of(wls, unjudged_busy=False)
            unmoved = (
                baseline is not None and now.key() == baseline[p].key() and time.monotonic() - started < UNMOVED_WAIT_S
            )
            if p not in last or now.key() != last[p].key() or now.busy or unmoved:
                last[p], since[p] = now, time.monotonic()
            elif time.monotonic() - since[p] >= BATCH_QUIET_S:
                quiet.add(p)
        time.sleep(0.5)
    return last, set(prefixes) - quiet


def _scenario_items(items: list[dict[str, Any]], prefix: str) -> list[dict[str, Any]]:
    """The export's objects that belong to the scenario, plus the cluster-scoped ones it uses."""
    shared = {"ResourceFlavor", "WorkloadPriorityClass", "PriorityClass"}
    out = []
    for obj in items:
        meta = obj["metadata"]
        own = meta.get("namespace", meta["name"]).startswith(f"{prefix}-")
        if obj["kind"] in shared or own:
            out.append(obj)
    return out


def twin_report(released: Path, config: Path) -> dict[str, Any]:
    """``gpufleet twin step --until-stable --json`` on the twin's input, as a user runs it."""
    result = CliRunner().invoke(app, ["twin", "step", str(released), str(config), "--until-stable", "--json"])
    if result.exit_code != 0:
        raise TestbedError(f"twin step failed on {released}: {result.output}")
    report: dict[str, Any] = yaml.safe_load(result.output)
    return report


def rejudge(folder: Path) -> Outcome:
    """A saved reproducer judged again without a testbed: Kueue's settled Workloads against the twin now.

    The folder is what ``bench/twin_differential.py`` saves: ``outcome.yaml`` (scenario, Kueue's usage),
    ``kueue-final.yaml`` (Kueue's Workloads once settled), ``cluster.yaml`` (the export),
    ``released.yaml`` and the Configuration (the twin's input). A twin fix shows here at once.
    """
    saved = yaml.safe_load((folder / "outcome.yaml").read_text(encoding="utf-8"))
    scn, prefix = Scenario.from_dict(saved["scenario"]), str(saved["prefix"])
    names = Names(prefix)
    config = next(folder.glob("kueue-config*.yaml"))
    listing, released = folder / "cluster.yaml", folder / "released.yaml"
    report = twin_report(released, config)
    exported = yaml.safe_load(listing.read_text(encoding="utf-8"))["items"]
    final = yaml.safe_load((folder / "kueue-final.yaml").read_text(encoding="utf-8"))["items"]
    return Outcome(
        scenario=scn, prefix=prefix, real=verdicts_of(final),
        twin=twin_verdicts(report, listing, frozenset({names.running, names.held})),
        real_usage=saved["kueue"]["usage"], twin_usage=twin_usage(report, [names.of(q.name) for q in scn.queues]),
        listing=listing, released=released, config=config, settled="NotSettled" not in saved["disagreements"],
        cycles=len(report["cycles"]), ties=list(saved.get("ties", [])),
        exported_messages=verdicts_of([o for o in exported if o["kind"] == "Workload"]).pending, final=final,
    )  # fmt: skip


def run_batch(bed: Testbed, batch: dict[str, Scenario], out: Path) -> list[Outcome]:
    """Apply, export, predict, release and settle several isolated scenarios of one Configuration."""
    out.mkdir(parents=True, exist_ok=True)
    config = out / f"kueue-config-{next(iter(batch))}.yaml"  # one per batch: groups differ in Configuration
    config.write_text((bed.config / "kueue.yaml").read_text(encoding="utf-8"), encoding="utf-8")
    _apply(bed, shared_objects())
    _apply(bed, [obj for p, s in batch.items() for obj in queue_objects(s, Names(p))])
    cqs = {Names(p).of(q.name) for p, s in batch.items() for q in s.queues}

    def active() -> bool:
        return all(
            any(c["type"] == "Active" and c["status"] == "True" for c in cq.get("status", {}).get("conditions", []))
            for cq in _all(bed, "clusterqueues.kueue.x-k8s.io")
            if cq["metadata"]["name"] in cqs
        )

    timings: dict[str, float] = {}
    began = time.monotonic()

    def done(phase: str) -> None:
        nonlocal began
        timings[phase] = round(time.monotonic() - began, 2)
        began = time.monotonic()

    _wait(active, "the scenarios' ClusterQueues to be active")
    done("queues")
    ties = _create_jobs(bed, batch)
    done("jobs")
    before, unsettled_before = _settle(bed, list(batch), SETTLE_TIMEOUT_S)
    done("settle before export")  # a scenario still moving is run anyway and reported NotSettled
    exported = yaml.safe_load(
        bed.kubectl(
            "get", f"{EXPORTED},{TEMPLATES},priorityclasses,namespaces", "--all-namespaces", "--output=yaml"
        ).stdout
    )
    predictions: dict[str, tuple[Verdicts, dict[str, Any], Path, Path]] = {}
    for p in batch:
        names = Names(p)
        folder = out / p
        folder.mkdir(parents=True, exist_ok=True)
        items = _scenario_items(exported["items"], p)
        listing = folder / "cluster.yaml"
        listing.write_text(yaml.safe_dump({**exported, "items": items}), encoding="utf-8")
        released = copy.deepcopy(items)
        for obj in released:
            if obj["kind"] == "Namespace" and obj["metadata"]["name"] == names.held:
                obj["metadata"].setdefault("labels", {})[RELEASED_LABEL] = "true"
        released_path = folder / "released.yaml"
        released_path.write_text(yaml.safe_dump({**exported, "items": released}), encoding="utf-8")
        report = twin_report(released_path, config)
        verdicts = twin_verdicts(report, listing, frozenset({names.running, names.held}))
        predictions[p] = (verdicts, report, listing, released_path)
    done("export and twin")
    bed.kubectl("label", "namespace", *(Names(p).held for p in batch), f"{RELEASED_LABEL}=true")
    real, unsettled = _settle(bed, list(batch), BATCH_SETTLE_TIMEOUT_S, baseline=before)
    done("settle after release")
    final = _workloads_by_prefix(bed, list(batch))
    unsettled |= {p for p in batch if verdicts_of(final[p]).key() != real[p].key()}  # moved again meanwhile
    live = {cq["metadata"]["name"]: cq for cq in _all(bed, "clusterqueues.kueue.x-k8s.io")}
    outcomes = []
    for p, scn in batch.items():
        names = Names(p)
        twin, report, listing, released_path = predictions[p]
        mine = [names.of(q.name) for q in scn.queues]
        outcomes.append(
            Outcome(
                scenario=scn, prefix=p, real=real[p], twin=twin,
                real_usage=usage_of({n: live[n] for n in mine}), twin_usage=twin_usage(report, mine),
                listing=listing, released=released_path, config=config, settled=p not in unsettled | unsettled_before,
                cycles=len(report["cycles"]), ties=ties[p], exported_messages=before[p].pending, timings=timings,
                final=[{k: wl[k] for k in ("metadata", "spec", "status") if k in wl} for wl in final[p]],
            )
        )  # fmt: skip
    return outcomes


def clean_up(bed: Testbed, batch: dict[str, Scenario]) -> None:
    """Delete the scenarios' objects without waiting: names never repeat, so nothing collides."""
    namespaces = [ns for p in batch for ns in (Names(p).running, Names(p).held)]
    bed.kubectl("delete", "namespace", *namespaces, "--wait=false", "--ignore-not-found")
    cqs = [Names(p).of(q.name) for p, s in batch.items() for q in s.queues]
    bed.kubectl("delete", "clusterqueues.kueue.x-k8s.io", *cqs, "--wait=false", "--ignore-not-found")
    cohorts = [Names(p).of(c.name) for p, s in batch.items() for c in s.cohorts]
    bed.kubectl("delete", "cohorts.kueue.x-k8s.io", *cohorts, "--wait=false", "--ignore-not-found")


def configure(bed: Testbed, config: KueueConfig) -> None:
    """Restart Kueue with the scenario group's fair-sharing settings (unless already in force)."""
    current = yaml.safe_load((bed.config / "kueue.yaml").read_text(encoding="utf-8"))
    wanted = config.manager_fields().get("fairSharing")
    resources = current.get("resources") or {}
    fields: dict[str, Any] = {}
    if current.get("fairSharing") != wanted:
        fields["fairSharing"] = wanted
    if resources.get("deviceClassMappings") != DRA_MAPPINGS:  # the claim Jobs' class counts as nvidia.com/gpu
        fields["resources"] = {**resources, "deviceClassMappings": DRA_MAPPINGS}
    if fields:
        bed.reconfigure_kueue(fields)


def run_seeds(bed: Testbed, seeds: list[int], out: Path, *, batch_size: int = 8, tag: str = "") -> Iterator[Outcome]:
    """Every seed's scenario, grouped by Kueue Configuration (one Kueue restart per group), in batches."""
    groups: dict[str, list[Scenario]] = {}
    for seed in seeds:
        scn = generate(seed)
        groups.setdefault(scn.config.key, []).append(scn)
    for scenarios in groups.values():
        began = time.monotonic()
        configure(bed, scenarios[0].config)
        restart = round(time.monotonic() - began, 2)
        for start in range(0, len(scenarios), batch_size):
            batch = {f"rnd{tag}-{s.seed}": s for s in scenarios[start : start + batch_size]}
            try:
                outcomes = run_batch(bed, batch, out)
            finally:
                began = time.monotonic()
                clean_up(bed, batch)
            outcomes[0].timings.update({"kueue restart": restart, "clean up": round(time.monotonic() - began, 2)})
            restart = 0.0
            yield from outcomes
