"""The private stack and the services it starts."""
