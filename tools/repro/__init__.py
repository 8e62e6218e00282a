"""Smallest reproductions of the findings about Pulsar in docs/findings/, one module each."""
