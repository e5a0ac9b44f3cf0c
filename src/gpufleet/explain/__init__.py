"""Explanations of a live cluster, computed by the twin: ``why`` a Workload waits, and ``what-if``
a new policy were applied. Pure: the objects come in as values (read by ``gpufleet.kube``), the
answers go out as frozen values; no network, no clock. See docs/why.md.
"""
