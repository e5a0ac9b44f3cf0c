"""Admission rules: one rule set, judged in Python, compiled to CEL, served by the webhook."""
