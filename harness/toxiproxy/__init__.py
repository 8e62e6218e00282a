"""Toxiproxy's HTTP API as the harness speaks it: its vocabulary and a client.

Why a harness leaf: network faults reach the embedded cluster's fault proxy
(`faultproxy`, which serves this API) and the compose cluster's real Toxiproxy
through the same API. The fault package, its proxy server and the compose target all
use it and it belongs to none of them (the targets sit above the faults), so it lives in
the harness, below all three.

* `model`: the toxic types, streams and attribute names (Toxiproxy's words);
* `client`: `ToxiproxyClient`, a small blocking client of the API.
"""
