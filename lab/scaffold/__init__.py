"""A run's scaffold."""
