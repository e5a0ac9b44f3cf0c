"""``gpufleet why`` and ``gpufleet what-if`` against the real Kueue on the testbed.

The live state comes from gpufleet's own rendering of ``why-fleet.yaml`` (two teams in cohort ``wf``,
nobody preempts): wf-beta runs a 6-GPU Job, borrowing 2 of wf-alpha's guaranteed 4, and wf-alpha's
4-GPU Job waits. ``why`` must name the borrower with Kueue's own words; ``what-if`` on the same policy
with ``reclaimWithinCohort: Any`` must predict the reclamation, show the ClusterQueues' changed field
from a server-side dry run, and change nothing; applying that policy for real must then make Kueue do
what ``what-if`` said. Pods select a pool no node carries, so only Kueue's quota decisions are observed.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from gpufleet.cli import app
from gpufleet.policy import load_policy, resolve
from gpufleet.render import kueue_objects
from tests.e2e.batch_jobs import batch_job
from tests.e2e.conftest import HERE, Cluster

POLICY = HERE / "why-fleet.yaml"
GPU = "nvidia.com/gpu"
NAMESPACES = ("wf-alpha", "wf-beta")
KUEUE_KINDS = "clusterqueues.kueue.x-k8s.io,localqueues.kueue.x-k8s.io,workloads.kueue.x-k8s.io"


def policy_objects(path: Path) -> list[dict[str, Any]]:
    return [o for o in kueue_objects(resolve(load_policy(path))) if o["kind"] != "Configuration"]


def reclaiming_policy(tmp: Path) -> Path:
    data = yaml.safe_load(POLICY.read_text(encoding="utf-8"))
    data["queueing"]["reclaimWithinCohort"] = "Any"
    path = tmp / "why-fleet-reclaim.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


def job(name: str, namespace: str, *, pods: int, gpus: int, deadline_s: int | None = None) -> dict[str, Any]:
    limits = {GPU: str(gpus)}
    labels = {"kueue.x-k8s.io/queue-name": namespace, "kueue.x-k8s.io/priority-class": "wf-normal"}
    return batch_job(name, namespace, labels, pods=pods, limits=limits, requests=limits, deadline_s=deadline_s)


def workload_of(cluster: Cluster, namespace: str, owner: str, kind: str = "Job") -> dict[str, Any] | None:
    """The Workload Kueue made for the ``kind`` named ``owner``, once it has."""
    for wl in cluster.get("workloads.kueue.x-k8s.io", f"--namespace={namespace}")["items"]:
        if any(o.get("kind") == kind and o.get("name") == owner for o in wl["metadata"].get("ownerReferences", [])):
            return wl  # type: ignore[no-any-return]
    return None


def condition(wl: dict[str, Any] | None, kind: str) -> dict[str, Any] | None:
    conditions = (wl or {}).get("status", {}).get("conditions", [])
    return next((c for c in conditions if c["type"] == kind), None)


def resource_versions(cluster: Cluster) -> dict[str, str]:
    """Every object ``why`` and ``what-if`` read in the test's namespaces and queues, by resourceVersion."""
    items = cluster.get(KUEUE_KINDS, "--all-namespaces")["items"]
    items += cluster.get("namespaces")["items"]
    items += cluster.get("resourceflavors.kueue.x-k8s.io,cohorts.kueue.x-k8s.io")["items"]
    return {
        f"{o['kind']}/{o['metadata'].get('namespace', '')}/{o['metadata']['name']}": o["metadata"]["resourceVersion"]
        for o in items
        if o["metadata"].get("namespace") in NAMESPACES or o["metadata"]["name"].startswith("wf")
    }


def settled_versions(cluster: Cluster, quiet_s: float = 3.0) -> dict[str, str]:
    """The resourceVersions once Kueue has finished writing status (nothing changed for ``quiet_s``)."""
    last: dict[str, str] = {}
    since = time.monotonic()
    deadline = since + 60
    while time.monotonic() < deadline:
        now = resource_versions(cluster)
        if now != last:
            last, since = now, time.monotonic()
        elif time.monotonic() - since >= quiet_s:
            return now
        time.sleep(0.5)
    pytest.fail(f"Kueue kept writing the test's objects for 60 s: {last}")


@contextlib.contextmanager
def borrowing(cluster: Cluster, big: dict[str, Any]) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
    """wf-beta's 6-GPU ``big`` (a Job, or another owner Kueue integrates) admitted by borrowing and
    wf-alpha's Job waiting with Kueue's reason: their Workloads. Everything is removed after."""
    kind, name = big["kind"], big["metadata"]["name"]
    cluster.apply(policy_objects(POLICY))
    for team in NAMESPACES:
        cluster.eventually(
            lambda team=team: condition(cluster.get("clusterqueues.kueue.x-k8s.io", team), "Active"),
            f"ClusterQueue {team} to be active",
        )
    cluster.apply([big])
    admitted = cluster.eventually(
        lambda: (
            (condition(workload_of(cluster, "wf-beta", name, kind), "QuotaReserved") or {}).get("status") == "True"
            and workload_of(cluster, "wf-beta", name, kind)
        ),
        f"wf-beta's 6-GPU {kind} to be admitted by borrowing",
    )
    cluster.apply([job("wait", "wf-alpha", pods=1, gpus=4)])
    wait = cluster.eventually(
        lambda: (
            (condition(workload_of(cluster, "wf-alpha", "wait"), "QuotaReserved") or {}).get("message")
            and workload_of(cluster, "wf-alpha", "wait")
        ),
        "Kueue to say why wf-alpha's Job waits",
    )
    try:
        yield admitted, wait
    finally:  # a failed test's objects too: the next test on this testbed starts clean
        owners = "jobs" if kind == "Job" else f"jobs,{kind.lower()}s.{big['apiVersion'].partition('/')[0]}"
        for ns in NAMESPACES:
            cluster.kubectl(
                "delete", owners, "--all", f"--namespace={ns}", "--cascade=foreground", "--wait=true", "--timeout=60s"
            )
            cluster.eventually(
                lambda ns=ns: not cluster.get("workloads.kueue.x-k8s.io", f"--namespace={ns}")["items"],
                f"{ns}'s workloads to go",
            )
            cluster.kubectl("delete", "localqueues.kueue.x-k8s.io", "--all", f"--namespace={ns}", "--timeout=60s")
        cluster.kubectl("delete", "clusterqueues.kueue.x-k8s.io", *NAMESPACES, "--timeout=60s")
        cluster.kubectl("delete", "cohorts.kueue.x-k8s.io", "wf", "--ignore-not-found", "--timeout=60s")
        cluster.kubectl("delete", "resourceflavors.kueue.x-k8s.io", "wf-train", "--ignore-not-found", "--timeout=60s")
        cluster.kubectl("delete", "workloadpriorityclasses.kueue.x-k8s.io", "wf-normal", "--ignore-not-found")
        cluster.kubectl("delete", "namespace", *NAMESPACES, "--wait=true", "--timeout=90s")


@pytest.fixture
def waiting(
    cluster: Cluster, request: pytest.FixtureRequest
) -> Iterator[tuple[Cluster, dict[str, Any], dict[str, Any]]]:
    """wf-beta's borrowing Job admitted, wf-alpha's Job waiting with Kueue's reason; parametrized
    (indirect), wf-beta's Job declares that many seconds as its ``activeDeadlineSeconds``."""
    big = job("big", "wf-beta", pods=3, gpus=2, deadline_s=getattr(request, "param", None))
    with borrowing(cluster, big) as (admitted, wait):
        yield cluster, admitted, wait


def gpufleet(cluster: Cluster, *args: str) -> Any:
    config = str(cluster.bed.config / "kueue.yaml")
    return CliRunner().invoke(app, [*args, "--kubeconfig", cluster.kubeconfig, "--kueue-config", config])


def test_why_names_the_borrower_a_workload_waits_behind(
    waiting: tuple[Cluster, dict[str, Any], dict[str, Any]],
) -> None:
    cluster, big, wait = waiting
    big_key = f"wf-beta/{big['metadata']['name']}"
    kueue = condition(wait, "QuotaReserved")
    assert kueue is not None
    before = settled_versions(cluster)

    result = gpufleet(cluster, "why", "wf-alpha/wait", "--json")  # the Job's name finds its Workload
    assert result.exit_code == 0, result.output
    why = json.loads(result.stdout)
    assert why["workload"] == f"wf-alpha/{wait['metadata']['name']}" and why["job"] == "wait"
    assert why["state"] == "Pending" and why["clusterQueue"] == "wf-alpha"
    assert why["kueue"] == {"reason": kueue["reason"], "message": kueue["message"]}  # verbatim
    assert why["verdict"]["reason"] == "WaitsBehindBorrowing"
    assert "wf-beta" in why["verdict"]["message"]
    assert [(h["workload"], h["team"], h["uses"], h["borrowing"]) for h in why["holders"]] == [
        (big_key, "wf-beta", {f"wf-train/{GPU}": 6}, True)
    ]
    queues = {q["name"]: q for q in why["clusterQueues"]}
    assert queues["wf-beta"]["borrowed"] == {f"wf-train/{GPU}": 2}
    assert why["shortfall"] == [{"flavor": "wf-train", "resource": GPU, "needed": "2"}]
    assert why["ends"]["sufficientSets"] == [[big_key]]
    assert why["preemption"]["reason"] == "PreemptionNever"
    assert why["preemption"]["policy"]["reclaimWithinCohort"] == "Never"
    reclaim = next(a for a in why["preemption"]["alternatives"] if a["change"] == {"reclaimWithinCohort": "Any"})
    assert reclaim["preempts"] == [big_key] and reclaim["admittedInCycle"] is not None
    assert why["disagreements"] == []  # the twin reads Kueue's state as Kueue does

    human = CliRunner(env={"COLUMNS": "120"}).invoke(
        app,
        [
            "why",
            "wf-alpha/wait",
            "--kubeconfig",
            cluster.kubeconfig,
            "--kueue-config",
            str(cluster.bed.config / "kueue.yaml"),
        ],
    )
    assert human.exit_code == 0, human.output
    text = " ".join(human.stdout.split())
    assert kueue["message"] in text and big_key in text and "WaitsBehindBorrowing" in text
    print("\n$ gpufleet why wf-alpha/wait\n" + human.stdout)
    out = os.environ.get("GPUFLEET_WHY_TRANSCRIPT")
    if out:
        Path(out).write_text(human.stdout, encoding="utf-8")

    admitted = gpufleet(cluster, "why", f"wf-beta/{big['metadata']['name']}", "--json")
    assert admitted.exit_code == 0 and json.loads(admitted.stdout)["verdict"]["reason"] == "NotPending"
    unknown = gpufleet(cluster, "why", "wf-alpha/no-such-job")
    assert unknown.exit_code == 2 and "no Workload wf-alpha/no-such-job" in unknown.output
    assert resource_versions(cluster) == before  # reading changed nothing


def test_what_if_predicts_the_reclamation_kueue_then_performs(
    waiting: tuple[Cluster, dict[str, Any], dict[str, Any]], tmp_path: Path
) -> None:
    cluster, big, wait = waiting
    big_key, wait_key = f"wf-beta/{big['metadata']['name']}", f"wf-alpha/{wait['metadata']['name']}"
    policy = reclaiming_policy(tmp_path)
    before = settled_versions(cluster)

    result = gpufleet(cluster, "what-if", str(policy), "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert resource_versions(cluster) == before  # a dry run: nothing stored
    assert [(c["workload"], c["alsoWithoutPolicy"]) for c in report["admitted"]] == [(wait_key, False)]
    assert [(c["workload"], c["reason"]) for c in report["preempted"]] == [(big_key, "InCohortReclamation")]
    assert report["inadmissible"] == []
    changed = {(o["kind"], o["name"]): o for o in report["objects"] if o["action"] != "Unchanged"}
    assert set(changed) == {("ClusterQueue", "wf-alpha"), ("ClusterQueue", "wf-beta")}
    for o in changed.values():
        assert [(f["path"], f["before"], f["after"]) for f in o["fields"]] == [
            ("spec.preemption.reclaimWithinCohort", "Never", "Any")
        ]
    human = CliRunner(env={"COLUMNS": "120"}).invoke(
        app,
        [
            "what-if",
            str(policy),
            "--kubeconfig",
            cluster.kubeconfig,
            "--kueue-config",
            str(cluster.bed.config / "kueue.yaml"),
        ],
    )
    assert human.exit_code == 0, human.output
    print("\n$ gpufleet what-if why-fleet-reclaim.yaml\n" + human.stdout)

    cluster.apply(policy_objects(policy))  # now for real: Kueue must do what what-if said
    cluster.eventually(
        lambda: (
            (condition(workload_of(cluster, "wf-beta", "big"), "Preempted") or {}).get("reason")
            == "InCohortReclamation"
        ),
        "Kueue to reclaim wf-beta's borrowed GPUs",
    )
    cluster.eventually(
        lambda: (condition(workload_of(cluster, "wf-alpha", "wait"), "QuotaReserved") or {}).get("status") == "True",
        "wf-alpha's Job to be admitted",
    )


def finished_runs(path: Path, runs: int) -> str:
    """A SQLite ledger holding ``runs`` finished runs of wf-beta's 6-GPU Jobs, 20-40 min each, a day ago."""
    from datetime import UTC, datetime, timedelta

    from gpufleet.ledger.records import EndReason
    from gpufleet.ledger.store import Ledger
    from tests.ledger.ledger_factories import allocation

    url = f"sqlite:///{path}"
    day_ago = datetime.now(UTC) - timedelta(days=1)
    records = [
        allocation(
            workload_uid=f"old-{i}", namespace="wf-beta", name=f"old-{i}", team="wf-beta", model=None,
            local_queue="wf-beta", cluster_queue="wf-beta", gpu_count=6, created=day_ago - timedelta(hours=i),
            quota_reserved=day_ago - timedelta(hours=i), admitted=day_ago - timedelta(hours=i),
            started=day_ago - timedelta(hours=i), finished=day_ago - timedelta(hours=i) + timedelta(minutes=20 + 5 * (i % 5)),
            end_reason=EndReason.FINISHED, end_detail="Succeeded",
        )
        for i in range(runs)
    ]  # fmt: skip
    with Ledger.open(url) as ledger:
        ledger.append(records)
    return url


def test_forecast_and_why_expect_the_waiting_job_when_the_borrower_ends(
    waiting: tuple[Cluster, dict[str, Any], dict[str, Any]], tmp_path: Path
) -> None:
    """The live path: the forecast's replay is built from the cluster's Workloads (the fixture waited
    for big's admission and Kueue's reason for wait), runtimes from a ledger written with its API."""
    cluster, _, _ = waiting
    url = finished_runs(tmp_path / "ledger.db", 12)
    live = ["--policy", str(POLICY), "--kubeconfig", cluster.kubeconfig]
    result = CliRunner().invoke(app, ["forecast", *live, "--ledger", url, "--samples", "20", "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["source"] == "the live cluster" and doc["basis"]["historyFinishedRuns"] == 12
    (f,) = [w for w in doc["workloads"] if w["workload"].startswith("wf-")]  # only the waiting Job
    assert f["workload"] == "wf-alpha/wait" and f["declined"] is None and f["admittedInSamples"] == 20
    q = f["admissionSeconds"]
    # big (runs of 20-40 min) has run for as long as the testbed took to get here: well under 20 min
    assert 0 < q["p10"] <= q["p50"] <= q["p90"] <= 40 * 60 + 60
    assert f["waitsFor"][0]["workload"] == "wf-beta/big"
    assert f["text"].startswith("expected to start in") and "when wf-beta/big ends" in f["text"]
    print(f"\n$ gpufleet forecast --kubeconfig ... --ledger {url}\n  {f['text']} (waited {f['waitedSeconds']} s)")

    admitted = CliRunner().invoke(app, ["forecast", *live, "--ledger", url, "--workload", "wf-beta/big"])
    assert admitted.exit_code == 2 and "no Workload of Job wf-beta/big waits" in " ".join(admitted.output.split())

    bare = CliRunner().invoke(app, ["forecast", *live, "--json"])  # no ledger: no figure, never an invented one
    assert bare.exit_code == 0, bare.output
    (b,) = [w for w in json.loads(bare.stdout)["workloads"] if w["workload"].startswith("wf-")]
    assert b["admissionSeconds"] is None and b["declined"].startswith("too little history")
    few = CliRunner().invoke(app, ["forecast", *live, "--ledger", finished_runs(tmp_path / "few.db", 5), "--json"])
    assert few.exit_code == 0, few.output
    (c,) = [w for w in json.loads(few.stdout)["workloads"] if w["workload"].startswith("wf-")]
    assert c["admissionSeconds"] is None and c["declined"].startswith("too little history: 5 finished runs")

    why = gpufleet(cluster, "why", "wf-alpha/wait", "--policy", str(POLICY), "--ledger", url, "--json")
    assert why.exit_code == 0, why.output
    expected = json.loads(why.stdout)["forecast"]
    assert expected["workload"] == "wf-alpha/wait" and expected["admissionSeconds"]["p50"] is not None
    human = CliRunner(env={"COLUMNS": "200"}).invoke(
        app, ["why", "wf-alpha/wait", *live, "--ledger", url, "--kueue-config", str(cluster.bed.config / "kueue.yaml")]
    )
    assert human.exit_code == 0, human.output
    text = " ".join(human.stdout.split())
    assert "Expected: expected to start in" in text and "when wf-beta/big ends" in text
    print("$ gpufleet why wf-alpha/wait --policy ... --ledger ...\n" + human.stdout)

    import sqlite3

    with sqlite3.connect(tmp_path / "foreign.db") as db:
        db.execute("CREATE TABLE jobs (id TEXT)")
    for bad, says in (
        (f"sqlite:///{tmp_path / 'foreign.db'}", "not a gpufleet ledger"),
        (f"sqlite:///{tmp_path / 'none.db'}", "no such ledger file"),
        ("postgresql://gpufleet@127.0.0.1:1/ledger", "cannot open the ledger"),
    ):
        refused = gpufleet(cluster, "why", "wf-alpha/wait", "--policy", str(POLICY), "--ledger", bad)
        assert refused.exit_code == 2 and says in " ".join(refused.output.split()), refused.output
    assert not (tmp_path / "none.db").exists()


def forecast_behind(
    cluster: Cluster, big: dict[str, Any], tmp: Path, deadline_s: int
) -> tuple[dict[str, Any], dict[str, Any], datetime, datetime]:
    """``gpufleet forecast --json`` (10 samples, no arrivals, a ledger of 12 runs of 20-40 min) while
    ``big``'s declared deadline has not passed: the document, wait's entry, big's admission and *now*
    (the API server's Date)."""
    from gpufleet.forecast.live import parse_time

    reserved = parse_time((condition(big, "QuotaReserved") or {}).get("lastTransitionTime"))
    assert reserved is not None
    url = finished_runs(tmp / "ledger.db", 12)
    live = ["--policy", str(POLICY), "--kubeconfig", cluster.kubeconfig, "--ledger", url]
    result = CliRunner().invoke(app, ["forecast", *live, "--samples", "10", "--no-arrivals", "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    now = parse_time(doc["now"])
    assert now is not None and doc["nowFrom"] == "the API server's Date header"
    if (now - reserved).total_seconds() >= deadline_s:
        pytest.fail(f"the forecast came {now - reserved} after big's admission, past its {deadline_s} s deadline")
    (f,) = [w for w in doc["workloads"] if w["workload"].startswith("wf-")]
    assert f["workload"] == "wf-alpha/wait" and f["declined"] is None and f["admittedInSamples"] == 10
    return doc, f, reserved, now


DEADLINE_S = 150  # wf-beta's Job declares it: the Job controller fails it this long after it starts


@pytest.mark.parametrize("waiting", [DEADLINE_S], indirect=True)
def test_a_declared_deadline_of_the_borrower_moves_the_forecast_as_kueue_then_moves_the_job(
    waiting: tuple[Cluster, dict[str, Any], dict[str, Any]], tmp_path: Path
) -> None:
    """The borrower's Job declares ``activeDeadlineSeconds``: the forecast reads it from the Job (Kueue
    does not copy it to the Workload) and bounds big's draw there, so wait's expected start moves from
    its history's 20-40 min to the deadline; the Job controller then ends big there and the real
    Kueue admits wait. Asserted: the forecast's figures (computed from the cluster's own stamps and
    *now* from the API server's Date, so no race decides them) and that Kueue admitted wait no
    earlier than the deadline; how much later is the controllers' timing, printed."""
    from datetime import timedelta

    from gpufleet.forecast.live import parse_time

    cluster, big, _ = waiting
    doc, f, reserved, now = forecast_behind(cluster, big, tmp_path, DEADLINE_S)
    assert doc["basis"]["runtimeSources"]["history ≤ deadline"] == 10  # big's draw, bounded in every sample
    q = f["admissionSeconds"]
    expected = [now + timedelta(seconds=q[k]) for k in ("p10", "p90")]
    deadline = reserved + timedelta(seconds=DEADLINE_S)
    # every history run is 20 min or longer: only the declaration can bring the start this close
    assert all(deadline <= t <= deadline + timedelta(seconds=3) for t in expected), (expected, deadline)
    print(f"\n$ gpufleet forecast ... (big declares activeDeadlineSeconds: {DEADLINE_S})\n  {f['text']}")

    admitted = cluster.eventually(
        lambda: (
            (c := condition(workload_of(cluster, "wf-alpha", "wait"), "QuotaReserved")) is not None
            and c["status"] == "True"
            and c
        ),
        "the real Kueue to admit wf-alpha's Job once the Job controller ends big at its deadline",
        timeout_s=DEADLINE_S + 120,
    )
    actual = parse_time(admitted["lastTransitionTime"])
    assert actual is not None and actual >= deadline - timedelta(seconds=1)  # not before big's deadline
    late = (actual - expected[1]).total_seconds()
    print(f"  Kueue admitted wait at {actual:%H:%M:%S}, forecast p90 {expected[1]:%H:%M:%S} ({late:+.0f} s)")


def jobset_crd() -> Path:
    """The JobSet CRD of the module Kueue v0.19.2 is built against (the testbed's go.mod pins it)."""
    import shutil
    import subprocess

    from tests.e2e.conftest import REPO

    go = shutil.which("go") or "/usr/local/go/bin/go"
    found = subprocess.run(
        [go, "list", "-m", "-f", "{{.Dir}}", "sigs.k8s.io/jobset"],
        cwd=REPO / "testbed", capture_output=True, text=True, check=False,
    )  # fmt: skip
    crd = Path(found.stdout.strip()) / "config" / "components" / "crd" / "bases" / "jobset.x-k8s.io_jobsets.yaml"
    if found.returncode != 0 or not found.stdout.strip() or not crd.exists():
        pytest.skip(f"the JobSet CRD comes from the testbed's Go modules, not found here: {found.stderr.strip()}")
    return crd


@pytest.fixture
def jobsets(cluster: Cluster) -> Iterator[Cluster]:
    """Kueue's JobSet integration on the testbed: JobSet's own CRD installed and Kueue restarted with the
    integration among its frameworks (Kueue v0.19.2 sets an integration up only where its CRD is served).
    No JobSet controller runs: Kueue makes a JobSet's Workload, admits it and resumes the JobSet, and no
    Job follows, so what is observed is what Kueue and the forecast read. Both are undone after."""
    crd = jobset_crd()
    before = yaml.safe_load((cluster.bed.config / "kueue.yaml").read_text(encoding="utf-8"))["integrations"]
    cluster.kubectl("apply", "--server-side", f"--filename={crd}")
    cluster.eventually(
        lambda: any(
            c["type"] == "Established" and c["status"] == "True"
            for c in (cluster.get("crd", "jobsets.jobset.x-k8s.io").get("status") or {}).get("conditions") or []
        ),
        "the JobSet CRD to be established",
    )
    frameworks = [*before["frameworks"], "jobset.x-k8s.io/jobset"]
    cluster.bed.reconfigure_kueue({"integrations": {**before, "frameworks": frameworks}})
    try:
        yield cluster
    finally:
        cluster.bed.reconfigure_kueue({"integrations": before})
        cluster.kubectl("delete", f"--filename={crd}", "--wait=true", "--timeout=60s")


JOBSET_DEADLINE_S = 150  # each of the JobSet's Jobs declares it; no failure policy, so it bounds the JobSet


def jobset(name: str, namespace: str, *, replicas: int, gpus: int, note: str, deadline_s: int) -> dict[str, Any]:
    """A JobSet of ``replicas`` one-pod Jobs (as a user writes it for Kueue: suspended, with its queue),
    declaring ``note`` as its expected runtime and ``deadline_s`` on each replicated Job."""
    job_spec = job(name, namespace, pods=1, gpus=gpus)["spec"]  # the e2e Job's own pods and shape
    labels = {"kueue.x-k8s.io/queue-name": namespace, "kueue.x-k8s.io/priority-class": "wf-normal"}
    template = {"spec": {**job_spec, "activeDeadlineSeconds": deadline_s}}
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": name, "namespace": namespace, "labels": labels,
                     "annotations": {"gpufleet.io/expected-runtime": note}},
        "spec": {"suspend": True, "replicatedJobs": [{"name": "workers", "replicas": replicas, "template": template}]},
    }  # fmt: skip


def test_a_jobsets_declarations_move_the_forecast_of_the_job_waiting_behind_it(
    jobsets: Cluster, tmp_path: Path
) -> None:
    """The borrower is a JobSet: the real Kueue makes its Workload (owned by the JobSet, its pod set the
    replicated Jobs' pods) and admits it. The forecast finds the JobSet by the Workload's owner reference,
    lists it from the API server, and reads what it declares: an expected runtime of 2 h, which its
    replicated Jobs' 150 s deadline bounds. So wait's expected start is 150 s after the JobSet's admission,
    where the history (20-40 min runs) and the annotation alone would put it minutes to hours later.
    No JobSet controller runs, so whether the JobSet then ends there is not observed."""
    from datetime import timedelta

    cluster = jobsets
    sweep = jobset("sweep", "wf-beta", replicas=3, gpus=2, note="2h", deadline_s=JOBSET_DEADLINE_S)
    with borrowing(cluster, sweep) as (big, _):
        assert [o["kind"] for o in big["metadata"]["ownerReferences"]] == ["JobSet"]
        assert [p["count"] for p in big["spec"]["podSets"]] == [3]
        doc, f, reserved, now = forecast_behind(cluster, big, tmp_path, JOBSET_DEADLINE_S)
        assert f["waitsFor"][0]["workload"] == "wf-beta/sweep"  # named by its owner, as a Job's is
        assert doc["basis"]["runtimeSources"]["declared"] == 10  # the JobSet's draw, in every sample
        q = f["admissionSeconds"]
        expected = [now + timedelta(seconds=q[k]) for k in ("p10", "p90")]
        deadline = reserved + timedelta(seconds=JOBSET_DEADLINE_S)
        assert all(deadline <= t <= deadline + timedelta(seconds=3) for t in expected), (expected, deadline)
        print(f"\n$ gpufleet forecast ... (JobSet sweep: expected-runtime 2h, Jobs' deadline {JOBSET_DEADLINE_S} s)")
        print(f"  {f['text']}")

        why = gpufleet(cluster, "why", "wf-beta/sweep", "--json")  # the JobSet's name finds its Workload
        assert why.exit_code == 0, why.output
        said = json.loads(why.stdout)
        assert (said["workload"], said["ownerKind"], said["job"]) == (
            f"wf-beta/{big['metadata']['name']}",
            "JobSet",
            "sweep",
        )
