"""`python -m faultproxy --config f.json`: the fault proxy process."""

from __future__ import annotations

import sys

from faultproxy.service import ConfigError, ProxyService
from harness.service import run_service


def main(argv: list[str] | None = None) -> None:
    try:
        run_service(ProxyService, argv)
    except ConfigError as err:
        sys.exit(f"faultproxy: {err}")


if __name__ == "__main__":
    main()
