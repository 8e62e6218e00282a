"""`python -m embedded.metadata --config F.json`: the metadata store process."""

from embedded.metadata.server import MetadataService
from harness.service import run_service

if __name__ == "__main__":
    run_service(MetadataService)
