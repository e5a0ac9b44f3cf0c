"""Kueue's scheduler (``pkg/scheduler``): the cycle, one head's assignment, the fair-sharing
tournament, flavor assignment (``flavorassigner``) and preemption (``preemption/``), on the
reference path; ``fastpath/`` builds on these, never the other way round.
"""
