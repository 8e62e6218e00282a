"""Experiments whose results the README reports: `python -m tools.experiments.<name>`."""
