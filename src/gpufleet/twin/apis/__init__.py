"""Kueue's API as the twin reads it: ``apis/kueue/v1beta2`` (and ``v1beta1``) objects and
``apis/config/v1beta2``'s ``Configuration``, turned into frozen specs and checked as the API
server, Kueue's webhooks (``pkg/webhooks/``) and its config validation (``pkg/config/``) check them.

The bottom of the twin beside ``features.py`` and ``resources.py``: nothing here reads a quota tree.
"""
