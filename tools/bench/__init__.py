"""Micro-benchmarks, one per part of the product: `python -m tools.bench.<part>` (tools/README.md)."""
