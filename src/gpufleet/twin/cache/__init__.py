"""Kueue's scheduler cache (``pkg/cache/scheduler``, ``pkg/cache/hierarchy``): the quota tree of
ClusterQueues and Cohorts, its per-flavor-resource arithmetic, dominant resource shares and the
cycle's snapshot.
"""
