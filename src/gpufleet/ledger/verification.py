"""``audit verify``'s one pass: the chain, then every derived table rebuilt from it and compared.

The chained entries are the evidence; everything else the queries or the proofs read is derived
from them and can be rewritten by anyone with database access, so each is recomputed here from the
entries' bodies and compared row by row:

- ``ledger_current``: the newest entry of each key, with the columns the queries filter on
  (``begin_us``/``end_us``, names, team, ``simulated``): a row whose span was edited would hide an
  allocation from ``audit who`` while the chain stays intact;
- ``ledger_tree`` and ``ledger_head``: the Merkle tree's stored subtrees, the frontier, the size
  and the chain head;
- the Merkle roots at the sizes a caller asks for (a checkpoint's), from the bodies alone.

Streaming: entries are read once in order; memory holds the newest seq per key and the stored
tree rows (one per 8 entries), never the bodies.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from sqlalchemy import select

from gpufleet.ledger import chain, merkle, schema
from gpufleet.ledger.records import from_canonical

if TYPE_CHECKING:
    from gpufleet.ledger.store import Ledger

CURRENT_COLUMNS = tuple(c.name for c in schema.current.columns)
SHOWN = 3  # how many differing keys a message names


@dataclass(frozen=True, slots=True)
class Problem:
    """A finding about derived data or the end of the chain: a machine reason and a message."""

    reason: str  # PascalCase: CurrentViewDiffers, TreeDiffers, HeadDiffers, HeadNotPublished
    message: str


@dataclass(frozen=True, slots=True)
class LedgerVerdict:
    """The chain verdict, what else disagrees with it, and the tree recomputed from the bodies."""

    chain: chain.Verdict
    problems: list[Problem] = field(default_factory=list)
    size: int = 0
    root: bytes = merkle.EMPTY_ROOT
    roots_at: dict[int, bytes] = field(default_factory=dict)  # requested sizes that exist

    @property
    def ok(self) -> bool:
        return self.chain.ok and not self.problems

    @property
    def view_problems(self) -> list[str]:
        return [p.message for p in self.problems]


class _Pass:
    """State of one walk over the entries."""

    def __init__(self, stored_tree: dict[tuple[int, int], bytes], sizes: set[int]) -> None:
        self.frontier = merkle.Frontier()
        self.newest: dict[str, int] = {}
        self.stored_tree = stored_tree
        self.tree_bad: list[str] = []
        self.sizes = sizes
        self.roots_at: dict[int, bytes] = {0: merkle.EMPTY_ROOT} if 0 in sizes else {}

    def completed(self, level: int, index: int, digest: bytes) -> None:
        if level < schema.TREE_STORED_FROM:
            return
        stored = self.stored_tree.pop((level, index), None)
        if stored != digest and len(self.tree_bad) < SHOWN:
            what = "missing" if stored is None else "different"
            self.tree_bad.append(f"node (level {level}, index {index}) is {what}")

    def walk(self, entries: Iterator[chain.Entry]) -> Iterator[chain.Entry]:
        for entry in entries:
            self.newest[entry.record_key] = entry.seq
            yield entry
            # only reached when the chain accepted the entry: the tree covers verified entries
            self.frontier.append(merkle.leaf_hash(entry.body.encode()), self.completed)
            if self.frontier.size in self.sizes:
                self.roots_at[self.frontier.size] = self.frontier.root()


def verify(ledger: Ledger, expected_head: str | None = None, sizes: frozenset[int] = frozenset()) -> LedgerVerdict:
    """Check the chain and every derived table; compute the Merkle roots at ``sizes``."""
    with ledger.engine.connect() as conn:
        t = schema.tree
        stored_tree = {(r.level, r.idx): bytes(r.hash) for r in conn.execute(select(t.c.level, t.c.idx, t.c.hash))}
    state = _Pass(stored_tree, set(sizes))
    verdict = chain.verify(state.walk(ledger.entries()), ledger.seq_of_record_hash)
    if not verdict.ok:
        return LedgerVerdict(verdict)
    problems: list[Problem] = []
    if expected_head is not None and verdict.head != expected_head:
        problems.append(
            Problem(
                "HeadNotPublished",
                f"the chain head is {verdict.head}, not the published {expected_head}:"
                " entries were appended after it was published, or removed from the end",
            )
        )
    problems += _current_view(ledger, state.newest)
    if state.stored_tree and len(state.tree_bad) < SHOWN:
        level, index = min(state.stored_tree)
        state.tree_bad.append(f"node (level {level}, index {index}) is stored but covers entries that do not exist")
    if state.tree_bad:
        problems.append(
            Problem("TreeDiffers", "the stored Merkle tree disagrees with the entries: " + "; ".join(state.tree_bad))
        )
    problems += _head(ledger, verdict, state.frontier)
    return LedgerVerdict(verdict, problems, state.frontier.size, state.frontier.root(), state.roots_at)


def _current_view(ledger: Ledger, newest: dict[str, int]) -> list[Problem]:
    """Rebuild every ``ledger_current`` row from the newest entry of its key and compare."""
    cur, ent = schema.current, schema.entries
    query = (
        select(*[cur.c[name] for name in CURRENT_COLUMNS], ent.c.body)
        .select_from(cur.outerjoin(ent, ent.c.seq == cur.c.seq))
        .order_by(cur.c.record_key)
    )
    differing: list[str] = []
    count = 0
    expected = dict(newest)
    from gpufleet.ledger.store import derived_row  # the one definition of a current row

    with ledger.engine.connect() as conn:
        for row in conn.execution_options(yield_per=20_000).execute(query):
            stored = _normalised(row[: len(CURRENT_COLUMNS)])
            key = stored[0]
            seq = expected.pop(key, None)
            problem: str | None = None
            if seq is None:
                problem = f"{key!r} is not a key of any entry"
            elif stored[2] != seq:
                problem = f"{key!r} points at entry {stored[2]}, but its newest entry is {seq}"
            else:
                rebuilt = derived_row(from_canonical(row.body), seq)
                columns = _diff(stored, rebuilt)
                if columns:
                    shown = ", ".join(f"{c} is {a!r}, the entry says {b!r}" for c, a, b in columns)
                    problem = f"{key!r}: {shown}"
            if problem is not None:
                count += 1
                if len(differing) < SHOWN:
                    differing.append(problem)
    for key in sorted(expected)[: max(0, SHOWN - len(differing))]:
        differing.append(f"{key!r} (entry {expected[key]}) is missing")
    count += len(expected)
    if not count:
        return []
    return [
        Problem(
            "CurrentViewDiffers",
            f"the current view disagrees with the chain for {count} key(s): " + "; ".join(differing),
        )
    ]


def _normalised(row: Any) -> tuple[Any, ...]:
    values = list(row)
    values[-1] = bool(values[-1])  # SQLite stores booleans as 0/1
    return tuple(values)


def _diff(stored: tuple[Any, ...], rebuilt: tuple[Any, ...]) -> list[tuple[str, Any, Any]]:
    return [(n, a, b) for n, a, b in zip(CURRENT_COLUMNS, stored, rebuilt, strict=True) if a != b]


def _head(ledger: Ledger, verdict: chain.Verdict, frontier: merkle.Frontier) -> list[Problem]:
    with ledger.engine.connect() as conn:
        row = conn.execute(select(schema.head).where(schema.head.c.id == 1)).first()
    stored = (0, chain.GENESIS, b"") if row is None else (row.seq, row.chain_hash, bytes(row.tree_frontier or b""))
    rebuilt = (verdict.entries, verdict.head, frontier.pack())
    names = ("size", "chain hash", "Merkle frontier")
    wrong = [n for n, a, b in zip(names, stored, rebuilt, strict=True) if a != b]
    if not wrong:
        return []
    return [
        Problem(
            "HeadDiffers",
            f"ledger_head disagrees with the entries ({', '.join(wrong)}): it records {stored[0]} entries,"
            f" the chain holds {verdict.entries}; the end of the ledger was cut or rewritten",
        )
    ]
