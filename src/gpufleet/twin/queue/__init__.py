"""Kueue's queue manager (``pkg/cache/queue``): a heap per ClusterQueue with its inadmissible set,
scheduling equivalence, AdmissionFairSharing's usage (``afs/``) and each queue's preemptor mark.
"""
