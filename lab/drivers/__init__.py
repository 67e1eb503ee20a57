"""The load drivers."""
