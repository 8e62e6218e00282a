"""A TCP fault proxy that serves the Toxiproxy HTTP API (see README.md beside this file).

Every link of the embedded cluster passes through it; the nemesis injects network
faults through the same API it uses against the real Toxiproxy of the compose target.
Entry points: `python -m faultproxy --config f.json` (the process),
`faultproxy.server.ProxyServer` (in-process), `harness.toxiproxy.client` (the client).
"""
