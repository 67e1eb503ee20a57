"""The client side of stockd's contract and of a foreign service's."""
