"""Alembic migrations of the ledger schema, shipped inside the package."""
