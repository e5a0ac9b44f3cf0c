"""A fixed, varied set of records and the ledger that gpufleet's code of 2026-12-01 (main at
7e47630, before the canonical form was written with msgspec) made of them.

The ledger in ``tests/ledger/data`` was written by that code with ``python -m
tests.ledger.ledger_golden tests/ledger/data`` and is checked in as it came out: a ledger written
before a change to the append path must verify after it, and the changed code must write the same
bytes (bodies, all three hashes, the tree, the head), so a ledger it writes verifies with the old
code too. Do not regenerate it with newer code: that would prove nothing.

The records reach every branch of the canonical form: escapes and control characters, text
outside the BMP, every optional field empty and set, non-UTC and microsecond times, MIG
resources, several placements with device IDs, open and closed wait intervals, and several
versions of one key.
"""

from __future__ import annotations

import random
import sqlite3
import sys
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from gpufleet.ledger import checkpoint, note
from gpufleet.ledger.records import Allocation, EndReason, Placement, Record, WaitInterval
from gpufleet.ledger.store import Ledger

DATA = Path(__file__).resolve().parent / "data"
LEDGER = DATA / "golden-ledger.db"
CHECKPOINT = DATA / "golden-ledger.checkpoint"
PUBKEY = DATA / "golden-ledger.pub"
ORIGIN = "golden.example/ledger"

_TEXTS = [
    "",
    "plain",
    'quote " and backslash \\',
    "tab\tnew\nline\rcr\x08bs\x0cff",
    "\x01\x1f\x7f control",
    "ünïcödé ß",
    "日本語のジョブ",
    "emoji 🚀 outside the BMP 𝔘",
    "\u2028line\u2029separators",
    "/slash/ and <html> & 'apostrophe'",
]
_T0 = datetime(2026, 11, 2, 8, 0, tzinfo=UTC)
_PLUS2 = timezone(timedelta(hours=2))


def _maybe(rng: random.Random, value: Any) -> Any:
    return None if rng.random() < 0.3 else value


def records() -> list[Record]:
    """The golden records, in append order (deterministic: a seeded generator)."""
    rng = random.Random(20261201)
    out: list[Record] = []
    for i in range(160):
        text = _TEXTS[i % len(_TEXTS)]
        created = _T0 + timedelta(seconds=rng.randrange(0, 86_400), microseconds=rng.choice([0, 0, 1, 123456]))
        if i % 7 == 3:
            created = created.astimezone(_PLUS2)
        mig = i % 5 == 4
        placements = tuple(
            Placement(
                f"node-{rng.randrange(40)}",
                rng.choice([1, 2, 4, 8]),
                tuple(str(d) for d in rng.sample(range(8), rng.randrange(0, 4))),
                rng.choice(["", "H100-SXM5-80GB", text]),
            )
            for _ in range(rng.randrange(0, 3))
        )
        reserved = _maybe(rng, created + timedelta(minutes=rng.randrange(0, 90)))
        base = Allocation(
            workload_uid=f"uid-{i:04d}",
            attempt=1 + i % 3,
            namespace=rng.choice(["research", "vision", "ns-" + str(i % 4)]),
            name=f"train-{i}" if i % 4 else f"train {text}".strip().replace("\x00", ""),
            team=_maybe(rng, rng.choice(["research", "vision", text or "t"])),
            model=_maybe(rng, text or "llama-3.1-8b"),
            data_class=_maybe(rng, "internal"),
            checkpoint=_maybe(rng, f"s3://bucket/{text}"),
            local_queue="training",
            cluster_queue=rng.choice(["research", "vision"]),
            priority=rng.choice([0, 1000, -5, 2**40]),
            flavors=tuple(sorted({("nvidia.com/gpu", "h100-train"), ("cpu", text or "default")})),
            gpu_resource="nvidia.com/mig-3g.40gb" if mig else "nvidia.com/gpu",
            gpu_count=rng.choice([1, 2, 4, 8]),
            placements=placements,
            created=created,
            quota_reserved=reserved,
            admitted=reserved,
            started=_maybe(rng, reserved),
            finished=None,
            end_reason=None,
            end_detail="",
            end_message="",
            borrowing=rng.choice([None, True, False]),
            simulated=i % 6 == 0,
        )
        out.append(base)
        if i % 2 == 0:  # a later version of the same key: how it ended
            ended = created + timedelta(hours=rng.randrange(1, 30))
            reason = rng.choice(list(EndReason))
            out.append(
                Allocation(
                    **{
                        **{f: getattr(base, f) for f in base.__dataclass_fields__},
                        "finished": ended,
                        "end_reason": reason,
                        "end_detail": rng.choice(["Succeeded", "InCohortReclamation", text]),
                        "end_message": text,
                    }
                )
            )
        if i % 3 == 0:
            start = created - timedelta(minutes=rng.randrange(1, 60))
            out.append(
                WaitInterval(
                    workload_uid=base.workload_uid,
                    index=i % 2,
                    namespace=base.namespace,
                    name=base.name,
                    team=base.team,
                    local_queue="training",
                    reason=rng.choice(["WaitingForQuota", "Pending", text or "x"]),
                    message=text,
                    start=start,
                    end=None if i % 9 == 0 else created,
                    simulated=base.simulated,
                )
            )
    return out


def write(ledger_url: str) -> None:
    """Append the golden records in the batches the fixture was written with."""
    batch = records()
    with Ledger.open(ledger_url) as ledger:
        for start in range(0, len(batch), 50):
            ledger.append(batch[start : start + 50], positions={"golden": str(start)})


def rows(path: Path) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of the chain's tables, as stored: what two writers must agree on byte for byte."""
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as conn:
        return {
            table: conn.execute(f"SELECT * FROM {table} ORDER BY 1, 2").fetchall()
            for table in ("ledger_entries", "ledger_current", "ledger_tree", "ledger_head", "ledger_positions")
        }


def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    db = out / LEDGER.name
    if db.exists():
        raise SystemExit(f"{db} exists: the golden ledger is written once, by the old code")
    write(str(db))
    with sqlite3.connect(db) as conn:  # one self-contained file to check in
        conn.execute("PRAGMA journal_mode=DELETE")
        conn.execute("VACUUM")
    key = note.SignerKey.generate(ORIGIN)
    with Ledger.read(str(db)) as ledger:
        signed = checkpoint.current(ledger, ORIGIN).signed(key)
    (out / CHECKPOINT.name).write_text(signed, encoding="utf-8")
    (out / PUBKEY.name).write_text(key.verifier.encode() + "\n", encoding="utf-8")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
