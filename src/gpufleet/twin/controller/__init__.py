"""What Kueue's controllers write back (``pkg/controller/core``): a nested ClusterQueue's status and
the requeue it sets off, and each pending workload's condition.
"""
