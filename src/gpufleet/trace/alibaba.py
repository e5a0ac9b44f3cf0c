"""Alibaba ``cluster-trace-gpu-v2023`` (the "openb" lists of the FGD paper): nodes and pods.

Node list: ``sn,cpu_milli,memory_mib,gpu,model``. Pod lists: ``name,cpu_milli,memory_mib,num_gpu,
gpu_milli`` and, except the ``multigpu*`` lists, ``gpu_spec,qos,pod_phase,creation_time,
deletion_time,scheduled_time``. ``gpu_milli`` is a share of one card for 1-GPU pods and 1000 for
multi-GPU pods; ``gpu_spec`` lists the allowed GPU models separated by ``|``.

Turning pods into jobs: each pod is a one-pod job. The trace's own timeline barely loads its
cluster (about 66 GPUs at peak on 6,212), so arrivals can be compressed: submit times are
``(creation_time - first creation_time) / compression``; durations are kept. A pod runs from
``scheduled_time`` (or ``creation_time`` for the 897 pods that never got scheduled) to
``deletion_time``. The trace has no job kind; it is derived: QoS ``LS`` (latency sensitive) is
inference, pods of 2+ GPUs are training, CPU-only and 1-GPU pods are batch-eval; ``qos`` becomes
the priority class.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from gpufleet.errors import InputError, Problem
from gpufleet.trace.job import MILLI, Job, JobKind

if TYPE_CHECKING:  # polars loads with the first trace read, not with every command
    import polars as pl

NODE_COLUMNS = ("sn", "cpu_milli", "memory_mib", "gpu", "model")
POD_COLUMNS = ("name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli")
TIME_COLUMNS = ("gpu_spec", "qos", "pod_phase", "creation_time", "deletion_time", "scheduled_time")
MIB = 1 << 20


@dataclass(frozen=True, slots=True)
class OpenbNode:
    name: str
    cpu_milli: int
    memory_mib: int
    gpus: int
    model: str


@dataclass(frozen=True, slots=True)
class OpenbPod:
    """One pod row. Times are ``None`` in the reduced-schema lists (``multigpu*``)."""

    name: str
    cpu_milli: int
    memory_mib: int
    num_gpu: int
    gpu_milli: int
    gpu_spec: tuple[str, ...] = ()
    qos: str = ""
    phase: str = ""
    creation: int | None = None
    deletion: int | None = None
    scheduled: int | None = None

    @property
    def gpu_milli_total(self) -> int:
        """GPU demand in milli-cards: the share for a sharing pod, 1000 per card otherwise."""
        return self.gpu_milli if self.num_gpu == 1 else self.num_gpu * self.gpu_milli


def _read(path: Path, required: tuple[str, ...]) -> pl.DataFrame:
    import polars as pl

    if not path.is_file():
        raise InputError.one(f"no such trace file: {path}", file=str(path))
    try:
        frame = pl.read_csv(path, infer_schema_length=0)  # every column as text: we check types
    except (pl.exceptions.PolarsError, OSError) as exc:
        raise InputError.one(f"not a readable CSV: {exc}", file=str(path)) from exc
    missing = [c for c in required if c not in frame.columns]
    if missing:
        raise InputError.one(f"missing column(s): {', '.join(missing)}", file=str(path))
    return frame


def _int_columns(
    frame: pl.DataFrame, path: Path, names: tuple[str, ...], optional: tuple[str, ...] = ()
) -> dict[str, list[int | None]]:
    """Columns as Python int lists; a bad cell is a Problem naming its row (file line) and column."""
    out: dict[str, list[int | None]] = {}
    problems = []
    for name in names:
        column = frame.columns.index(name) + 1
        values: list[int | None] = []
        for row, cell in enumerate(frame[name].to_list()):
            text = (cell or "").strip()
            if not text and name in optional:
                values.append(None)
                continue
            try:
                value = int(float(text)) if "." in text else int(text)
            except ValueError:
                problems.append(Problem(f"{name}: expected an integer, got {cell!r}", str(path), name, row + 2, column))
                values.append(None)
                continue
            if value < 0:
                problems.append(Problem(f"{name}: must be >= 0, got {value}", str(path), name, row + 2, column))
            values.append(value)
        out[name] = values
    if problems:
        raise InputError(problems)
    return out


def read_nodes(path: Path) -> list[OpenbNode]:
    """An openb node list (``openb_node_list_gpu_node.csv`` or ``…_all_node.csv``)."""
    frame = _read(path, NODE_COLUMNS)
    ints = _int_columns(frame, path, ("cpu_milli", "memory_mib", "gpu"))
    names = frame["sn"].to_list()
    models = [m if m and m != "nan" else "" for m in frame["model"].to_list()]
    return [
        OpenbNode(str(n), int(c or 0), int(m or 0), int(g or 0), str(model))
        for n, c, m, g, model in zip(names, ints["cpu_milli"], ints["memory_mib"], ints["gpu"], models, strict=True)
    ]


def read_pods(path: Path) -> list[OpenbPod]:
    """An openb pod list; the reduced ``multigpu*`` schema gives pods without times."""
    frame = _read(path, POD_COLUMNS)
    timed = all(c in frame.columns for c in TIME_COLUMNS)
    times = ("creation_time", "deletion_time", "scheduled_time") if timed else ()
    ints = _int_columns(
        frame, path, ("cpu_milli", "memory_mib", "num_gpu", "gpu_milli", *times), optional=("scheduled_time",)
    )
    problems = []
    for row, (gpus, milli) in enumerate(zip(ints["num_gpu"], ints["gpu_milli"], strict=True)):
        if gpus is not None and milli is not None and (milli > MILLI or (gpus > 1 and milli != MILLI)):
            column = frame.columns.index("gpu_milli") + 1
            problems.append(
                Problem(
                    f"gpu_milli: {milli} is not a share of one card for a {gpus}-GPU pod",
                    str(path),
                    "gpu_milli",
                    row + 2,
                    column,
                )
            )
    if problems:
        raise InputError(problems)
    count = frame.height
    names = [str(n) for n in frame["name"].to_list()]
    specs = (
        [tuple(s for s in (cell or "").split("|") if s and s != "nan") for cell in frame["gpu_spec"].to_list()]
        if "gpu_spec" in frame.columns
        else [()] * count
    )
    qos = [str(q or "") for q in frame["qos"].to_list()] if timed else [""] * count
    phase = [str(p or "") for p in frame["pod_phase"].to_list()] if timed else [""] * count
    none: list[int | None] = [None] * count
    return [
        OpenbPod(
            names[i],
            int(ints["cpu_milli"][i] or 0),
            int(ints["memory_mib"][i] or 0),
            int(ints["num_gpu"][i] or 0),
            int(ints["gpu_milli"][i] or 0),
            specs[i],
            qos[i],
            phase[i],
            ints.get("creation_time", none)[i],
            ints.get("deletion_time", none)[i],
            ints.get("scheduled_time", none)[i],
        )
        for i in range(count)
    ]


def _kind(pod: OpenbPod) -> JobKind:
    if pod.qos == "LS":
        return JobKind.INFERENCE
    if pod.num_gpu >= 2:
        return JobKind.TRAINING
    return JobKind.BATCH_EVAL


def to_jobs(pods: list[OpenbPod], compression: float = 1.0, team: str = "openb", source: str = "") -> list[Job]:
    """One job per pod, in submit order (then name). ``compression`` > 1 packs arrivals closer."""
    if compression <= 0:
        raise InputError.one(f"compression must be > 0, got {compression}", file=source)
    untimed = [p.name for p in pods if p.creation is None or p.deletion is None]
    if untimed:
        raise InputError.one(
            f"{len(untimed)} pod(s) have no creation/deletion time (e.g. {untimed[0]}); "
            "this list is for static packing only",
            file=source,
        )
    start = min((p.creation or 0) for p in pods) if pods else 0
    jobs = []
    for p in pods:
        created, deleted = p.creation or 0, p.deletion or 0
        began = p.scheduled if p.scheduled is not None else created
        sharing = p.num_gpu == 1 and p.gpu_milli < MILLI
        jobs.append(
            Job(
                job_id=p.name,
                team=team,
                namespace=team,
                submit_s=round((created - start) / compression),
                duration_s=max(0, deleted - began),
                kind=_kind(p),
                gpus=0 if sharing else p.num_gpu,
                gpu_milli=p.gpu_milli if sharing else 0,
                gpu_models=p.gpu_spec,
                cpu_milli=p.cpu_milli,
                memory=p.memory_mib * MIB,
                priority_class=p.qos,
            )
        )
    jobs.sort(key=lambda j: (j.submit_s, j.job_id))
    return jobs
