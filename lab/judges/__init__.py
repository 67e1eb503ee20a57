"""The judges: plans, verdicts and the history checker."""
