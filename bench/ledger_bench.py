"""Ledger throughput with the hash chain, the Merkle tree and signed checkpoints, and the time to
verify a million entries against a checkpoint.

Run: ``python -m bench ledger_bench`` (add ``--quick`` for a smoke run). PostgreSQL is Debian's
server started on loopback for the run (skipped with a note if it is not installed).

Issue 15 targets: >= 20,000 records/s into SQLite, >= 10,000 into PostgreSQL with the tree and
checkpoints on; ``audit verify --checkpoint`` of 1 M entries < 30 s. The week's measurement with the
chain only (issue 6's code, quick run): 10,880 and 9,196 records/s.
Records are appended in batches of 500, the recorder's batch size, and a checkpoint is signed every
1,000 entries (the recorder's default); generating the records is not timed. The append figure is
the median of ``--rounds`` fresh ledgers (3), printed with each round's figure.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import statistics
import tempfile
import time
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

from gpufleet.ledger import checkpoint, note
from gpufleet.ledger.records import Allocation, EndReason, Placement
from gpufleet.ledger.store import Ledger

BATCH = 500
T0 = datetime(2026, 11, 2, tzinfo=UTC)
TARGETS = {"sqlite": 20_000.0, "postgresql": 10_000.0}
VERIFY_TARGET_S = 30.0
BASELINE = {"sqlite": 10_880.0, "postgresql": 9_196.0}  # chain only, this week's quick run
CHECKPOINT_EVERY = 1_000
KEY = note.SignerKey.generate("bench.example/ledger")

_TEMPLATE = Allocation(
    workload_uid="",
    attempt=1,
    namespace="research",
    name="",
    team="research",
    model="meta-llama/Llama-3.1-8B",
    data_class="internal",
    checkpoint="s3://eu-central-1/ckpt/research",
    local_queue="training",
    cluster_queue="research",
    priority=1000,
    flavors=(("cpu", "default"), ("nvidia.com/gpu", "h100-train")),
    gpu_resource="nvidia.com/gpu",
    gpu_count=8,
    placements=(Placement("h100-train-0", 8, ("0", "1", "2", "3", "4", "5", "6", "7"), "H100-SXM5-80GB"),),
    created=T0,
    quota_reserved=T0,
    admitted=T0,
    started=T0,
    finished=None,
    end_reason=None,
    end_detail="",
    end_message="",
    borrowing=False,
    simulated=False,
)


def batches(total: int, offset: int = 0) -> Iterator[list[Allocation]]:
    for start in range(offset, offset + total, BATCH):
        batch = []
        for i in range(start, min(start + BATCH, offset + total)):
            when = T0 + timedelta(seconds=i)
            batch.append(
                replace(
                    _TEMPLATE,
                    workload_uid=f"uid-{i:08d}",
                    name=f"train-{i}",
                    created=when,
                    quota_reserved=when,
                    admitted=when,
                    started=when,
                    finished=when + timedelta(hours=1),
                    end_reason=EndReason.FINISHED,
                    end_detail="Succeeded",
                )
            )
        yield batch


def fill(ledger: Ledger, total: int, offset: int = 0) -> tuple[float, float, int]:
    """Append ``total`` records, signing a checkpoint every ``CHECKPOINT_EVERY`` entries; return
    records per wall second, per CPU second of this process, and how many checkpoints were signed.

    The CPU figure does not move with other load on a shared machine; for SQLite it is the whole
    cost (the database runs in this process), for PostgreSQL only the client's share.
    """
    wall = cpu = 0.0
    signed, last = 0, 0
    for batch in batches(total, offset):
        began, began_cpu = time.perf_counter(), time.process_time()
        result = ledger.append(batch, positions={"bench": str(offset)})
        if result.head_seq - last >= CHECKPOINT_EVERY:
            checkpoint.current(ledger, KEY.name).signed(KEY)
            signed, last = signed + 1, result.head_seq
        wall += time.perf_counter() - began
        cpu += time.process_time() - began_cpu
    return total / wall, total / cpu, signed


def _pgserver() -> object | None:
    path = Path(__file__).resolve().parents[1] / "tests" / "ledger" / "ledger_pgserver.py"
    spec = importlib.util.spec_from_file_location("ledger_pgserver", path)
    if spec is None or spec.loader is None:
        return None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module if module.find_bin_dir() is not None else None


def append_rate(backend: str, urls: list[str], rate_n: int) -> None:
    """The append figure, each round on a fresh ledger: the median with the spread, because one
    run on this shared virtual machine moves by about a tenth from run to run."""
    rounds = []
    for url in urls:
        with Ledger.open(url) as ledger:
            rounds.append(fill(ledger, rate_n))
    rates = sorted(r[0] for r in rounds)
    rate = statistics.median(rates)
    per_cpu = statistics.median(r[1] for r in rounds)
    signed = rounds[0][2]
    spread = ", ".join(f"{r:,.0f}" for r in rates)
    print(
        f"{backend:10s} append: {rate:10,.0f} records/s over {rate_n:,} with the tree and {signed} checkpoints"
        f" (median of {len(rounds)} fresh ledgers: {spread})"
        f" (target {TARGETS[backend]:,.0f}: {rate / TARGETS[backend]:.2f}x;"
        f" chain-only baseline {BASELINE[backend]:,.0f}: {rate / BASELINE[backend]:.2f}x);"
        f" {per_cpu:,.0f} per CPU-second of this process (load average {os.getloadavg()[0]:.1f})"
    )


def verify_time(backend: str, url: str, verify_n: int) -> None:
    with Ledger.open(url) as ledger:
        fill(ledger, verify_n)
        published = checkpoint.current(ledger, KEY.name).signed(KEY)
        began, began_cpu = time.perf_counter(), time.process_time()
        result = checkpoint.check(ledger, published, KEY.verifier, origin=None)
        seconds, cpu_seconds = time.perf_counter() - began, time.process_time() - began_cpu
        if not result.ok:
            raise SystemExit(f"verify failed on an untouched ledger: {result}")
        per_million = seconds * 1_000_000 / verify_n
        print(
            f"{backend:10s} verify --checkpoint: {seconds:8.2f} s for {verify_n:,} entries"
            f" = {per_million:.1f} s per million"
            f" (target {VERIFY_TARGET_S:.0f} s: {VERIFY_TARGET_S / per_million:.2f}x);"
            f" {cpu_seconds:.2f} CPU-s of this process (load average {os.getloadavg()[0]:.1f})"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="10k records instead of 1 M (a smoke run)")
    parser.add_argument("--rounds", type=int, default=3, help="fresh ledgers for the append figure (its median)")
    args = parser.parse_args()
    rate_n, verify_n = (10_000, 10_000) if args.quick else (200_000, 1_000_000)
    with tempfile.TemporaryDirectory(prefix="gpufleet-bench-") as tmp:
        append_rate("sqlite", [str(Path(tmp) / f"append-{i}.db") for i in range(args.rounds)], rate_n)
        verify_time("sqlite", str(Path(tmp) / "verify.db"), verify_n)
    pg = _pgserver()
    if pg is None:
        print("postgresql: skipped (no server binaries; install the Debian package 'postgresql')")
        return
    with pg.postgres_server() as base:  # type: ignore[attr-defined]
        urls = [pg.create_database(base, f"append{i}") for i in range(args.rounds)]  # type: ignore[attr-defined]
        append_rate("postgresql", urls, rate_n)
        verify_time("postgresql", pg.create_database(base, "verify"), verify_n)  # type: ignore[attr-defined]


if __name__ == "__main__":
    main()
