"""The Merkle tree over the entries: stored complete subtrees and the frontier in the head row.

Revision ID: 0002
Revises: 0001

A ledger written before this revision gets its tree built here from the stored bodies, in entry
order, so its first checkpoint covers every entry it already holds.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from gpufleet.ledger import merkle

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

STORED_FROM = 4  # must match gpufleet.ledger.schema.TREE_STORED_FROM at this revision


def upgrade() -> None:
    op.create_table(
        "ledger_tree",
        sa.Column("level", sa.SmallInteger, primary_key=True, autoincrement=False),
        sa.Column("idx", sa.BigInteger().with_variant(sa.Integer, "sqlite"), primary_key=True, autoincrement=False),
        sa.Column("hash", sa.LargeBinary(32), nullable=False),
    )
    op.add_column("ledger_head", sa.Column("tree_frontier", sa.LargeBinary, nullable=True))
    _backfill(op.get_bind())


def _backfill(conn: sa.Connection) -> None:
    frontier = merkle.Frontier()
    rows: list[dict[str, object]] = []

    def keep(level: int, index: int, digest: bytes) -> None:
        if level >= STORED_FROM:
            rows.append({"level": level, "idx": index, "hash": digest})

    tree = sa.table("ledger_tree", sa.column("level"), sa.column("idx"), sa.column("hash"))
    result = conn.execute(sa.text("SELECT body FROM ledger_entries ORDER BY seq"))
    for (body,) in result:
        frontier.append(merkle.leaf_hash(body.encode()), keep)
        if len(rows) >= 10_000:
            conn.execute(tree.insert(), rows)
            rows.clear()
    if rows:
        conn.execute(tree.insert(), rows)
    if frontier.size:
        conn.execute(
            sa.text("UPDATE ledger_head SET tree_frontier = :f WHERE id = 1 AND seq = :n"),
            {"f": frontier.pack(), "n": frontier.size},
        )


def downgrade() -> None:
    with op.batch_alter_table("ledger_head") as batch:
        batch.drop_column("tree_frontier")
    op.drop_table("ledger_tree")
