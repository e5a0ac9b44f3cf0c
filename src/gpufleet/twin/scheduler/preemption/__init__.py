"""Kueue's preemption (``pkg/scheduler/preemption``): the entry point and the victims' order
(``preemption``), classical preemption's hierarchical candidates (``classical``), fair-sharing
preemption (``fairsharing``) and the fit check both end with (``common``).
"""
