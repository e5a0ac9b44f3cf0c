"""The allocation ledger: append-only, hash-chained records of who held which GPUs, and why anyone waited.

``records`` holds the pure record types (no database imports); ``store`` the storage; ``queries``
the audit questions; ``export`` the CSV/Parquet export.
"""
