"""Alembic environment: run migrations on the connection ``gpufleet.ledger.store`` hands in."""

from __future__ import annotations

from alembic import context

from gpufleet.ledger.schema import metadata

connection = context.config.attributes["connection"]
context.configure(
    connection=connection,
    target_metadata=metadata,
    render_as_batch=True,  # SQLite cannot ALTER most things; batch mode copies the table instead
    version_table="ledger_alembic_version",
)
with context.begin_transaction():
    context.run_migrations()
