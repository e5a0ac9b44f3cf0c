"""The Alibaba cluster-trace-gpu-v2023 loader, on a hand-made excerpt and on the real lists."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpufleet.errors import InputError
from gpufleet.trace import Job, JobKind
from gpufleet.trace.alibaba import read_nodes, read_pods, to_jobs

MIB = 1 << 20
SHARED = Path(__file__).resolve().parents[2] / ".." / "shared" / "traces" / "alibaba-gpu-v2023" / "csv"

HEADER = (
    "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,"
    "creation_time,deletion_time,scheduled_time"
)
EXCERPT = (
    HEADER
    + """
openb-pod-0003,88000,327680,8,1000,,Burstable,Succeeded,1000,5000,1100
openb-pod-0001,4000,15258,1,220,,BE,Running,2000,2600,2000
openb-pod-0002,16000,32768,1,1000,V100M16|V100M32,LS,Running,1500,1700,1503
openb-pod-0004,2000,4096,0,0,,BE,Failed,3000,3010,3001
openb-pod-0005,12000,16384,1,1000,,LS,Pending,3500,3900,
"""
)


def test_excerpt_becomes_the_expected_jobs(tmp_path: Path) -> None:
    """Compression 10: submits are (creation - 1000) / 10. Durations run from scheduled_time
    (creation_time when never scheduled) to deletion_time and are not compressed. Kinds: LS ->
    inference, 8 GPUs -> training, the rest -> batch-eval; a 220-milli pod is a share of one card."""
    path = tmp_path / "pods.csv"
    path.write_text(EXCERPT)
    jobs = to_jobs(read_pods(path), compression=10, team="alibaba")
    common = {"team": "alibaba", "namespace": "alibaba"}
    assert jobs == [
        Job(
            "openb-pod-0003",
            submit_s=0,
            duration_s=3900,
            kind=JobKind.TRAINING,
            gpus=8,
            cpu_milli=88000,
            memory=327680 * MIB,
            priority_class="Burstable",
            **common,
        ),
        Job(
            "openb-pod-0002",
            submit_s=50,
            duration_s=197,
            kind=JobKind.INFERENCE,
            gpus=1,
            gpu_models=("V100M16", "V100M32"),
            cpu_milli=16000,
            memory=32768 * MIB,
            priority_class="LS",
            **common,
        ),
        Job(
            "openb-pod-0001",
            submit_s=100,
            duration_s=600,
            kind=JobKind.BATCH_EVAL,
            gpu_milli=220,
            cpu_milli=4000,
            memory=15258 * MIB,
            priority_class="BE",
            **common,
        ),
        Job(
            "openb-pod-0004",
            submit_s=200,
            duration_s=9,
            kind=JobKind.BATCH_EVAL,
            cpu_milli=2000,
            memory=4096 * MIB,
            priority_class="BE",
            **common,
        ),
        Job(
            "openb-pod-0005",
            submit_s=250,
            duration_s=400,
            kind=JobKind.INFERENCE,
            gpus=1,
            cpu_milli=12000,
            memory=16384 * MIB,
            priority_class="LS",
            **common,
        ),
    ]


@pytest.mark.parametrize(
    ("row", "where", "message"),
    [
        ("x,1,2,1,abc,,LS,Running,0,1,0", (2, 5), "gpu_milli: expected an integer, got 'abc'"),
        (
            "x,1,2,2,500,,LS,Running,0,1,0",
            (2, 5),
            "gpu_milli: 500 is not a share of one card for a 2-GPU pod",
        ),
        ("x,-4,2,1,500,,LS,Running,0,1,0", (2, 2), "cpu_milli: must be >= 0, got -4"),
    ],
    ids=["not-a-number", "share-on-multi-gpu", "negative"],
)
def test_bad_cells_are_located(tmp_path: Path, row: str, where: tuple[int, int], message: str) -> None:
    path = tmp_path / "pods.csv"
    path.write_text(EXCERPT.splitlines()[0] + "\n" + row + "\n")
    with pytest.raises(InputError) as caught:
        read_pods(path)
    (problem,) = caught.value.problems
    assert (problem.file, problem.line, problem.column, problem.message) == (str(path), *where, message)


def test_reduced_schema_loads_for_packing_but_has_no_timeline(tmp_path: Path) -> None:
    path = tmp_path / "multigpu.csv"
    path.write_text("name,cpu_milli,memory_mib,num_gpu,gpu_milli\np1,1000,1024,4,1000\n")
    (pod,) = read_pods(path)
    assert (pod.num_gpu, pod.gpu_milli_total, pod.creation) == (4, 4000, None)
    with pytest.raises(InputError, match="static packing only"):
        to_jobs([pod])


def test_missing_columns_are_named(tmp_path: Path) -> None:
    path = tmp_path / "nodes.csv"
    path.write_text("sn,cpu_milli,gpu\nn1,1000,2\n")
    with pytest.raises(InputError, match="missing column\\(s\\): memory_mib, model"):
        read_nodes(path)


def test_real_openb_lists_match_the_published_counts() -> None:
    if not SHARED.is_dir():
        pytest.skip(f"the Alibaba trace is not at {SHARED} (../shared beside the repository)")
    nodes = read_nodes(SHARED / "openb_node_list_gpu_node.csv")
    pods = read_pods(SHARED / "openb_pod_list_default.csv")
    # counts from the trace's README and the FGD paper: 1,213 GPU nodes, 6,212 GPUs, 8,152 pods
    assert (len(nodes), sum(n.gpus for n in nodes), len(pods)) == (1213, 6212, 8152)
    assert sum(p.num_gpu == 0 for p in pods) == 1088
    assert sum(p.scheduled is None for p in pods) == 897
    jobs = to_jobs(pods, compression=100)
    assert len(jobs) == 8152 and jobs[0].submit_s == 0
    # creation times run from 0 to about 12.9 M s (traces.md), so compressed by 100: about 129,000 s
    assert 128_000 < max(j.submit_s for j in jobs) < 130_000
