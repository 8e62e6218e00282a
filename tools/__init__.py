"""Tools around the product: benchmarks, a synthetic-history generator, experiments, launchers.

Why a package of its own: they measure or drive the product from outside, so they may
import anything (the harness, the reference cluster, the fault proxy, the analysis) and
nothing imports them (an import-linter contract in pyproject.toml keeps it so). Each is
run as `python -m tools.<name>`; tools/README.md lists them.
"""
