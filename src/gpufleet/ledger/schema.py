"""The ledger's tables (SQLAlchemy Core), the same on SQLite and PostgreSQL.

- ``ledger_entries``: the append-only, hash-chained history. One row per record version, never
  updated. ``(record_key, record_hash)`` is unique, which is what makes a replayed write a no-op.
- ``ledger_current``: the fold of the entries, one row per record key pointing at its latest
  version, with the columns the queries filter on. It is a cache of the entries (``audit verify``
  rebuilds and compares it), not evidence.
- ``ledger_head``: one row holding the chain head; writers lock it, so entries get gap-free
  sequence numbers even with several writers (the recorder and a twin run).
- ``ledger_positions``: where each source (a recorder watch) stopped, written in the same
  transaction as the records it produced.
- ``ledger_tree``: the Merkle tree's complete subtrees (RFC 9162) from level ``TREE_STORED_FROM``
  up, named ``(level, idx)``; lower nodes are rehashed from at most 2**TREE_STORED_FROM bodies when
  a proof needs them. ``ledger_head.tree_frontier`` holds the right edge (the complete subtrees of
  the current size, highest first), so an append or a checkpoint costs log n hashes. Both are a
  cache of the entries: ``audit verify`` rebuilds the tree from the bodies and compares.

Alembic owns the schema (``gpufleet/ledger/migrations``); these definitions must match its head.
"""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    SmallInteger,
    String,
    Table,
    Text,
    UniqueConstraint,
)
from sqlalchemy.types import TypeEngine

metadata = MetaData()

HASH = String(64)
TREE_STORED_FROM = 4  # a stored node covers at least 16 entries: 1 row per 8 entries in all
SCHEMA_REVISION = "0002"  # the Alembic head; a reader refuses any other revision


def key_text(length: int) -> TypeEngine[str]:
    """Byte-order text: the same ordering on both databases, and cheap index comparisons on
    PostgreSQL (a locale collation costs much more on every insert)."""
    return String(length).with_variant(String(length, collation="C"), "postgresql")


entries = Table(
    "ledger_entries",
    metadata,
    Column("seq", BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=False),
    Column("kind", String(32), nullable=False),
    Column("record_key", key_text(300), nullable=False),
    Column("body", Text, nullable=False),
    Column("record_hash", HASH, nullable=False),
    Column("prev_hash", HASH, nullable=False),
    Column("chain_hash", HASH, nullable=False),
    UniqueConstraint("record_key", "record_hash", name="uq_ledger_entries_key_hash"),
)

current = Table(
    "ledger_current",
    metadata,
    Column("record_key", key_text(300), primary_key=True),
    Column("kind", String(32), nullable=False),
    Column("seq", BigInteger().with_variant(Integer, "sqlite"), nullable=False),
    Column("workload_uid", key_text(128), nullable=False),
    Column("namespace", key_text(253), nullable=False),
    Column("name", key_text(253), nullable=False),
    Column("team", String(253), nullable=True),
    Column("begin_us", BigInteger, nullable=True),  # UTC microseconds since the epoch: exact, portable
    Column("end_us", BigInteger, nullable=True),
    Column("simulated", Boolean, nullable=False),
    Index("ix_ledger_current_workload", "namespace", "name"),
    Index("ix_ledger_current_uid", "workload_uid"),
    Index("ix_ledger_current_span", "kind", "begin_us", "end_us"),
)

head = Table(
    "ledger_head",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=False),
    Column("seq", BigInteger, nullable=False),
    Column("record_hash", HASH, nullable=False),
    Column("chain_hash", HASH, nullable=False),
    Column("tree_frontier", LargeBinary, nullable=True),  # concatenated 32-byte hashes; empty tree: NULL
)

tree = Table(
    "ledger_tree",
    metadata,
    Column("level", SmallInteger, primary_key=True, autoincrement=False),
    Column("idx", BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=False),
    Column("hash", LargeBinary(32), nullable=False),
)

positions = Table(
    "ledger_positions",
    metadata,
    Column("source", String(200), primary_key=True),
    Column("position", Text, nullable=False),
)
