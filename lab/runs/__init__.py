"""The runs, each `python3 -m lab NAME`."""
