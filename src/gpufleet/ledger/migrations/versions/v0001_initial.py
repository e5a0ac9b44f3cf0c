"""The first ledger schema: entries, current view, head and positions.

Revision ID: 0001
Revises:
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

SEQ = sa.BigInteger().with_variant(sa.Integer, "sqlite")


def key_text(length: int) -> sa.types.TypeEngine[str]:
    """Byte-order collation on PostgreSQL (see ``gpufleet.ledger.schema.key_text``)."""
    return sa.String(length).with_variant(sa.String(length, collation="C"), "postgresql")


def upgrade() -> None:
    op.create_table(
        "ledger_entries",
        sa.Column("seq", SEQ, primary_key=True, autoincrement=False),
        sa.Column("kind", sa.String(32), nullable=False),
        sa.Column("record_key", key_text(300), nullable=False),
        sa.Column("body", sa.Text, nullable=False),
        sa.Column("record_hash", sa.String(64), nullable=False),
        sa.Column("prev_hash", sa.String(64), nullable=False),
        sa.Column("chain_hash", sa.String(64), nullable=False),
        sa.UniqueConstraint("record_key", "record_hash", name="uq_ledger_entries_key_hash"),
    )
    op.create_table(
        "ledger_current",
        sa.Column("record_key", key_text(300), primary_key=True),
        sa.Column("kind", sa.String(32), nullable=False),
        sa.Column("seq", SEQ, nullable=False),
        sa.Column("workload_uid", key_text(128), nullable=False),
        sa.Column("namespace", key_text(253), nullable=False),
        sa.Column("name", key_text(253), nullable=False),
        sa.Column("team", sa.String(253), nullable=True),
        sa.Column("begin_us", sa.BigInteger, nullable=True),
        sa.Column("end_us", sa.BigInteger, nullable=True),
        sa.Column("simulated", sa.Boolean, nullable=False),
    )
    op.create_index("ix_ledger_current_workload", "ledger_current", ["namespace", "name"])
    op.create_index("ix_ledger_current_uid", "ledger_current", ["workload_uid"])
    op.create_index("ix_ledger_current_span", "ledger_current", ["kind", "begin_us", "end_us"])
    op.create_table(
        "ledger_head",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("seq", sa.BigInteger, nullable=False),
        sa.Column("record_hash", sa.String(64), nullable=False),
        sa.Column("chain_hash", sa.String(64), nullable=False),
    )
    op.create_table(
        "ledger_positions",
        sa.Column("source", sa.String(200), primary_key=True),
        sa.Column("position", sa.Text, nullable=False),
    )


def downgrade() -> None:
    for table in ("ledger_positions", "ledger_head", "ledger_current", "ledger_entries"):
        op.drop_table(table)
