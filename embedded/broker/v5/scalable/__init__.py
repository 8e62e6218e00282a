"""PIP-460 scalable topics: the segment DAG, its controller, sessions and admin REST."""
