"""The faults: the nemeses a run turns on its stack."""
