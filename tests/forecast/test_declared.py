"""What owners declare of their runtimes, read from objects shaped as the API server returns them
(``gpufleet.forecast.declared``), and the clock checks between the ledger and the cluster
(``gpufleet.forecast.clock``)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpufleet.forecast.answer import duration_seconds
from gpufleet.forecast.clock import LOCAL, SERVER, SKEW, cluster_now, ledger_skew
from gpufleet.forecast.declared import EXPECTED_RUNTIME, declared_of
from gpufleet.forecast.runtimes import Declared
from tests.ledger.ledger_factories import allocation

NOW = datetime(2026, 12, 5, 9, 0, tzinfo=UTC)


def workload(
    *,
    template_note: str | None = None,
    own_note: str | None = None,
    max_exec: Any = None,
    pod_deadline: Any = None,
    spent: Any = None,
) -> dict[str, Any]:
    """A Workload as Kueue v0.19.2 writes it for a Job: the Job's pod template copied into its pod set."""
    template: dict[str, Any] = {"metadata": {}, "spec": {"containers": [{"name": "main"}]}}
    if template_note is not None:
        template["metadata"]["annotations"] = {EXPECTED_RUNTIME: template_note}
    if pod_deadline is not None:
        template["spec"]["activeDeadlineSeconds"] = pod_deadline
    wl: dict[str, Any] = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {"name": "job-train-abcde", "namespace": "ml", "annotations": {}},
        "spec": {"queueName": "ml", "podSets": [{"name": "main", "count": 1, "template": template}]},
    }
    if own_note is not None:
        wl["metadata"]["annotations"][EXPECTED_RUNTIME] = own_note
    if max_exec is not None:
        wl["spec"]["maximumExecutionTimeSeconds"] = max_exec
    if spent is not None:  # admitted before, evicted: Kueue sums the time it was admitted
        wl["status"] = {"accumulatedPastExecutionTimeSeconds": spent}
    return wl


def job(*, note: str | None = None, deadline: Any = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "train", "namespace": "ml"}
    if note is not None:
        meta["annotations"] = {EXPECTED_RUNTIME: note}
    spec: dict[str, Any] = {"suspend": True, "template": {"spec": {"containers": [{"name": "main"}]}}}
    if deadline is not None:
        spec["activeDeadlineSeconds"] = deadline
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": meta, "spec": spec}


@pytest.mark.parametrize(
    ("wl", "owner", "want"),
    [
        (workload(), None, None),
        (workload(), job(), None),
        (workload(), job(note="2h30m"), Declared(9000, None)),
        (workload(), job(note="5400"), Declared(5400, None)),
        (workload(template_note="45m"), None, Declared(2700, None)),
        (workload(own_note="1d"), None, Declared(86400, None)),
        # the Job's annotation comes first, then the pod template's, then the Workload's
        (workload(template_note="45m", own_note="1d"), job(note="10m"), Declared(600, None)),
        (workload(template_note="45m", own_note="1d"), job(), Declared(2700, None)),
        # deadlines bound: the earliest of the Job's, Kueue's maximum execution time, the pods'
        (workload(), job(deadline=3600), Declared(None, 3600)),
        (workload(max_exec=1800), job(deadline=3600), Declared(None, 1800)),
        (workload(max_exec=1800, pod_deadline=900), job(deadline=3600), Declared(None, 900)),
        (workload(template_note="20m", max_exec=1800), None, Declared(1200, 1800)),
        (workload(max_exec=0), None, None),  # not a bound the API server would accept: none
        # readmitted: Kueue's maximum less what earlier admissions spent, counted from this admission
        (workload(max_exec=1800, spent=600), None, Declared(None, 1200)),
        (workload(max_exec=1800, spent=600), job(deadline=1000), Declared(None, 1000)),  # the Job's restarts
        (workload(max_exec=1800, spent=1800), None, Declared(None, 1)),  # spent: deactivated once admitted
        (workload(max_exec=1800, spent=0), None, Declared(None, 1800)),
        (workload(spent=600), None, None),  # no maximum: nothing to spend
    ],
)
def test_declarations_are_read_where_kueue_leaves_them(
    wl: dict[str, Any], owner: dict[str, Any] | None, want: Declared | None
) -> None:
    assert declared_of(wl, owner) == (want, "")


@pytest.mark.parametrize(
    ("wl", "owner", "where", "text"),
    [
        (workload(), job(note="soon"), "on Job ml/train", "'soon'"),
        (workload(), job(note="0"), "on Job ml/train", "'0'"),
        (workload(), job(note="2 hours"), "on Job ml/train", "'2 hours'"),
        (workload(template_note="1h-ish"), None, "on the pod template of Workload ml/job-train-abcde", "'1h-ish'"),
        (workload(own_note="-5"), None, "on Workload ml/job-train-abcde", "'-5'"),
        # a malformed first declaration is not passed over for a later one: what the owner meant is unknown
        (workload(template_note="45m"), job(note="soon"), "on Job ml/train", "'soon'"),
    ],
)
def test_a_malformed_declaration_names_the_annotation_and_what_was_expected(
    wl: dict[str, Any], owner: dict[str, Any] | None, where: str, text: str
) -> None:
    declared, problem = declared_of(wl, owner)
    assert declared is None
    assert problem.startswith(f"annotation {EXPECTED_RUNTIME} {where}: expected seconds or a duration such as 2h30m")
    assert problem.endswith(f"got {text}")


def owned_by(api_version: str, kind: str, spec: dict[str, Any], note: str | None = None) -> dict[str, Any]:
    """An owner of another kind than a Job, as the API server returns it (only what the forecast reads)."""
    meta: dict[str, Any] = {"name": "train", "namespace": "ml"}
    if note is not None:
        meta["annotations"] = {EXPECTED_RUNTIME: note}
    return {"apiVersion": api_version, "kind": kind, "metadata": meta, "spec": spec}


def jobset(*deadlines: int | None, failure_policy: dict[str, Any] | None = None) -> dict[str, Any]:
    """A JobSet of one replicated Job per deadline (None: that Job declares none)."""
    jobs = [
        {"name": f"r{i}", "template": {"spec": {} if d is None else {"activeDeadlineSeconds": d}}}
        for i, d in enumerate(deadlines)
    ]
    spec: dict[str, Any] = {"replicatedJobs": jobs}
    if failure_policy is not None:
        spec["failurePolicy"] = failure_policy
    return owned_by("jobset.x-k8s.io/v1alpha2", "JobSet", spec)


@pytest.mark.parametrize(
    ("owner", "want"),
    [
        (owned_by("ray.io/v1", "RayJob", {"activeDeadlineSeconds": 1200}), Declared(None, 1200)),
        (owned_by("ray.io/v1", "RayJob", {"activeDeadlineSeconds": 1200}, note="15m"), Declared(900, 1200)),
        (owned_by("ray.io/v1", "RayJob", {}, note="15m"), Declared(900, None)),
        (
            owned_by("kubeflow.org/v1", "PyTorchJob", {"runPolicy": {"activeDeadlineSeconds": 7200}}),
            Declared(None, 7200),
        ),
        (
            owned_by("kubeflow.org/v2beta1", "MPIJob", {"runPolicy": {"activeDeadlineSeconds": 600}}),
            Declared(None, 600),
        ),
        # a Kubeflow job's deadline is its run policy's, not a field of its spec
        (owned_by("kubeflow.org/v1", "TFJob", {"activeDeadlineSeconds": 600}), None),
        (owned_by("trainer.kubeflow.org/v1alpha1", "TrainJob", {"activeDeadlineSeconds": 3000}), Declared(None, 3000)),
        # the earliest replicated Job's: without a failure policy, the first Job to fail fails the JobSet
        (jobset(5400, None, 3600), Declared(None, 3600)),
        (jobset(None), None),
        # with one, the JobSet may recreate its Jobs, each deadline afresh: no bound on the whole
        (jobset(3600, failure_policy={"maxRestarts": 3}), None),
        (jobset(3600, failure_policy={}), None),
        # an owner whose run has no end of its own declares no deadline, but may declare a runtime
        (owned_by("ray.io/v1", "RayCluster", {"activeDeadlineSeconds": 60}), None),
        (owned_by("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet", {}, note="2h"), Declared(7200, None)),
        # the kind is read with its API group: another group's Job is not batch/v1's
        (owned_by("example.com/v1", "Job", {"activeDeadlineSeconds": 60}), None),
    ],
)
def test_owners_of_other_kinds_declare_where_their_controllers_read_it(
    owner: dict[str, Any], want: Declared | None
) -> None:
    assert declared_of(workload(), owner) == (want, "")
    # the Workload's own bounds still count beside the owner's
    bounded = declared_of(workload(max_exec=300), owner)[0]
    assert bounded == Declared(None if want is None else want.expected_s, 300)


def test_a_malformed_declaration_on_another_owner_names_its_kind() -> None:
    declared, problem = declared_of(workload(), owned_by("ray.io/v1", "RayJob", {}, note="soon"))
    assert declared is None and problem.startswith(f"annotation {EXPECTED_RUNTIME} on RayJob ml/train: expected")


@given(st.integers(0, 30), st.integers(0, 23), st.integers(0, 59), st.integers(0, 59))
def test_a_duration_is_the_sum_of_its_parts(d: int, h: int, m: int, s: int) -> None:
    text = "".join(f"{v}{u}" for v, u in ((d, "d"), (h, "h"), (m, "m"), (s, "s")) if v)
    assert duration_seconds(text or "0") == d * 86400 + h * 3600 + m * 60 + s
    assert duration_seconds(str(d * 86400 + s)) == d * 86400 + s


def test_now_is_the_api_servers_where_it_said() -> None:
    server, local = NOW, NOW + timedelta(minutes=7)
    assert cluster_now(server, local) == (server, SERVER)
    assert cluster_now(None, local) == (local, LOCAL)


def created(uid: str, at: datetime, **kw: Any) -> Any:
    return allocation(workload_uid=uid, created=at, quota_reserved=at, admitted=at, started=at, **kw)


@pytest.mark.parametrize(
    ("offset_s", "declines"),
    [(0, False), (3, False), (-5, False), (600, True), (-600, True), (6, True)],
)
def test_the_ledger_is_measured_against_the_workloads_both_hold(offset_s: int, declines: bool) -> None:
    """The recorder copies a Workload's creationTimestamp: a ledger of this cluster agrees to the second."""
    born = {f"uid-{i}": NOW - timedelta(minutes=10 * i + 30) for i in range(3)}
    shift = timedelta(seconds=offset_s)
    records = [created(uid, t + shift) for uid, t in born.items()]
    # records ahead of now only by the offset: the measured check is the one that answers
    why = ledger_skew(NOW + max(shift, timedelta(0)), list(born.items()), records)
    assert bool(why) is declines
    if declines:
        assert why.startswith(f"{SKEW}: the ledger's clock is ")
        assert f"offset {offset_s:+d} s" in why and "the 3 Workloads both hold" in why
        assert ("ahead of" if offset_s > 0 else "behind") in why


def test_one_workload_off_does_not_make_a_skew() -> None:
    born = {f"uid-{i}": NOW - timedelta(minutes=10 * i + 30) for i in range(3)}
    records = [created(uid, t + timedelta(hours=2 if uid == "uid-0" else 0)) for uid, t in born.items()]
    assert ledger_skew(NOW + timedelta(hours=3), list(born.items()), records) == ""  # the median holds


@pytest.mark.parametrize(("ahead_s", "declines"), [(0, False), (5, False), (-3600, False), (3600, True)])
def test_records_stamped_after_now_are_a_clock_ahead(ahead_s: int, declines: bool) -> None:
    start = NOW - timedelta(hours=2)
    records = [
        allocation(
            workload_uid="old",
            created=start,
            quota_reserved=start,
            admitted=start,
            started=start,
            finished=NOW + timedelta(seconds=ahead_s),
        )
    ]
    why = ledger_skew(NOW, [("live-only", NOW - timedelta(minutes=5))], records)  # no Workload in both
    assert bool(why) is declines
    if declines:
        assert why.startswith(f"{SKEW}: the ledger holds records stamped up to 1 h after the cluster's now")
        assert "offset ≥ +3600 s" in why and "2026-12-05T09:00:00Z" in why
