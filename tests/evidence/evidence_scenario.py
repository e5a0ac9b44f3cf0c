"""DCGM- and kube-state-metrics-shaped series for the test fleet (tests/evidence/fleet.yaml), as OpenMetrics.

Two windows of 240 scrapes at 30 s (2 h each) three hours apart, ending about an hour before "now",
so Prometheus' default retention keeps them. Values are constant per device and window so every
figure can be worked out by hand (see test_figures_on_prometheus.py). What each window holds:

before   node-a gpu0 engine 0.5 (research), gpu1 engine 0.0 (nobody); FB 60/20 GiB and 0/80 GiB
         node-b MIG 3g.40gb 0.5 (research, 60 scrapes missing), 2g.20gb 1.0 (nlp), two 1g.10gb 0.0,
                and a whole-card series 0.7 that must be ignored on a MIG pool
         node-c time-sliced card 0.25 (research)
after    node-a gpu0 engine 0.8 (research), gpu1 only DCGM_FI_DEV_GPU_UTIL 60 (nlp); FB 60/20 and 40/40 GiB
         node-b MIG without namespace labels: 3g 0.5, 2g 0.5, 1g 0.0, 1g 1.0 (24 scrapes missing)
         node-c 0.75 (research); node-x, in no pool, 0.9
kube-state-metrics: kube_node_info for every node (node-c misses 48 scrapes after), GPU requests
and pod phases; research/old-job requests a GPU but has Succeeded, so it must not count.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

STEP = 30
SLOTS = 240
H100 = "NVIDIA H100 80GB HBM3"
A100 = "NVIDIA A100-SXM4-80GB"
L40S = "NVIDIA L40S"


@dataclass(frozen=True)
class Windows:
    before_start: datetime
    after_start: datetime

    @property
    def before(self) -> str:
        return _span(self.before_start)

    @property
    def after(self) -> str:
        return _span(self.after_start)


@dataclass(frozen=True)
class LivePrometheus:
    """A running Prometheus (see conftest.py) and the windows its data covers."""

    url: str
    windows: Windows


def _span(start: datetime) -> str:
    end = start + timedelta(seconds=STEP * SLOTS)
    return f"{start.strftime('%Y-%m-%dT%H:%M:%SZ')}..{end.strftime('%Y-%m-%dT%H:%M:%SZ')}"


def windows(now: datetime) -> Windows:
    aligned = datetime.fromtimestamp(int(now.timestamp()) // 3600 * 3600, tz=UTC)
    before = aligned - timedelta(hours=6)
    return Windows(before_start=before, after_start=before + timedelta(hours=3))


@dataclass
class _Family:
    kind: str
    series: dict[tuple[tuple[str, str], ...], list[tuple[int, float]]] = field(default_factory=dict)


class OpenMetrics:
    def __init__(self) -> None:
        self.families: dict[str, _Family] = {}

    def add(
        self, metric: str, labels: dict[str, str], start: datetime, value: float, missing: Iterable[int] = ()
    ) -> None:
        skip = set(missing)
        points = self.families.setdefault(metric, _Family("gauge")).series.setdefault(tuple(sorted(labels.items())), [])
        t0 = int(start.timestamp())
        points.extend((t0 + k * STEP, value) for k in range(SLOTS) if k not in skip)

    def text(self) -> str:
        lines = []
        for metric, family in self.families.items():
            lines.append(f"# TYPE {metric} {family.kind}")
            for labels, points in family.series.items():
                rendered = ",".join(f'{k}="{v}"' for k, v in labels)
                lines.extend(f"{metric}{{{rendered}}} {v} {t}" for t, v in sorted(points))
        lines.append("# EOF")
        return "\n".join(lines) + "\n"


def _gpu(host: str, gpu: int, model: str, pod: tuple[str, str] | None = None, mig: tuple[str, str] | None = None):
    labels = {
        "Hostname": host,
        "gpu": str(gpu),
        "UUID": f"GPU-{host}-{gpu}",
        "device": f"nvidia{gpu}",
        "modelName": model,
    }
    if mig is not None:
        labels |= {"GPU_I_PROFILE": mig[0], "GPU_I_ID": mig[1]}
    if pod is not None:
        labels |= {"namespace": pod[0], "pod": pod[1], "container": "main"}
    return labels


ENGINE = "DCGM_FI_PROF_GR_ENGINE_ACTIVE"
UTIL = "DCGM_FI_DEV_GPU_UTIL"
USED = "DCGM_FI_DEV_FB_USED"
FREE = "DCGM_FI_DEV_FB_FREE"


def generate(w: Windows) -> str:
    om = OpenMetrics()
    b, a = w.before_start, w.after_start
    # before
    om.add(ENGINE, _gpu("node-a", 0, H100, ("research", "train-1")), b, 0.5)
    om.add(ENGINE, _gpu("node-a", 1, H100), b, 0.0)
    om.add(USED, _gpu("node-a", 0, H100, ("research", "train-1")), b, 61440)
    om.add(FREE, _gpu("node-a", 0, H100, ("research", "train-1")), b, 20480)
    om.add(USED, _gpu("node-a", 1, H100), b, 0)
    om.add(FREE, _gpu("node-a", 1, H100), b, 81920)
    om.add(ENGINE, _gpu("node-b", 0, A100, ("research", "eval-1"), ("3g.40gb", "1")), b, 0.5, range(60, 120))
    om.add(ENGINE, _gpu("node-b", 0, A100, ("nlp", "eval-2"), ("2g.20gb", "5")), b, 1.0)
    om.add(ENGINE, _gpu("node-b", 0, A100, None, ("1g.10gb", "13")), b, 0.0)
    om.add(ENGINE, _gpu("node-b", 0, A100, None, ("1g.10gb", "14")), b, 0.0)
    om.add(ENGINE, _gpu("node-b", 0, A100), b, 0.7)
    om.add(ENGINE, _gpu("node-c", 0, L40S, ("research", "nb-1")), b, 0.25)
    # after
    om.add(ENGINE, _gpu("node-a", 0, H100, ("research", "train-2")), a, 0.8)
    om.add(UTIL, _gpu("node-a", 1, H100, ("nlp", "ft-1")), a, 60)
    om.add(USED, _gpu("node-a", 0, H100, ("research", "train-2")), a, 61440)
    om.add(FREE, _gpu("node-a", 0, H100, ("research", "train-2")), a, 20480)
    om.add(USED, _gpu("node-a", 1, H100, ("nlp", "ft-1")), a, 40960)
    om.add(FREE, _gpu("node-a", 1, H100, ("nlp", "ft-1")), a, 40960)
    om.add(ENGINE, _gpu("node-b", 0, A100, None, ("3g.40gb", "1")), a, 0.5)
    om.add(ENGINE, _gpu("node-b", 0, A100, None, ("2g.20gb", "5")), a, 0.5)
    om.add(ENGINE, _gpu("node-b", 0, A100, None, ("1g.10gb", "13")), a, 0.0)
    om.add(ENGINE, _gpu("node-b", 0, A100, None, ("1g.10gb", "14")), a, 1.0, range(100, 124))
    om.add(ENGINE, _gpu("node-c", 0, L40S, ("research", "nb-2")), a, 0.75)
    om.add(ENGINE, _gpu("node-x", 0, H100), a, 0.9)
    # kube-state-metrics
    for node in ("node-a", "node-b", "node-c"):
        om.add("kube_node_info", {"node": node, "kernel_version": "6.1"}, b, 1)
        om.add(
            "kube_node_info", {"node": node, "kernel_version": "6.1"}, a, 1, range(0, 48) if node == "node-c" else ()
        )
    pods = [
        (b, "research", "train-1", "node-a", "nvidia_com_gpu", 1, "Running"),
        (b, "research", "old-job", "node-a", "nvidia_com_gpu", 1, "Succeeded"),
        (b, "research", "eval-1", "node-b", "nvidia_com_mig_3g_40gb", 1, "Running"),
        (b, "nlp", "eval-2", "node-b", "nvidia_com_mig_2g_20gb", 1, "Running"),
        (b, "research", "nb-1", "node-c", "nvidia_com_gpu_shared", 1, "Running"),
        (a, "research", "train-2", "node-a", "nvidia_com_gpu", 1, "Running"),
        (a, "nlp", "ft-1", "node-a", "nvidia_com_gpu", 1, "Running"),
        (a, "research", "eval-3", "node-b", "nvidia_com_mig_3g_40gb", 1, "Running"),
        (a, "nlp", "eval-4", "node-b", "nvidia_com_mig_2g_20gb", 1, "Running"),
        (a, "research", "nb-2", "node-c", "nvidia_com_gpu_shared", 1, "Running"),
        (a, "nlp-eval", "nb-3", "node-c", "nvidia_com_gpu_shared", 2, "Running"),
    ]
    for start, ns, pod, node, resource, count, phase in pods:
        om.add(
            "kube_pod_container_resource_requests",
            {"namespace": ns, "pod": pod, "container": "main", "node": node, "resource": resource, "unit": "integer"},
            start,
            count,
        )
        for each in ("Running", "Succeeded"):
            om.add("kube_pod_status_phase", {"namespace": ns, "pod": pod, "phase": each}, start, int(each == phase))
    return om.text()
