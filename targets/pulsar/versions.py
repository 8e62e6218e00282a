"""The Apache Pulsar releases the `pulsar` target runs, and what each one needs.

Why these versions: the issue asked for 5.0.0 (GA, PIP-473 inside) and 4.0.14 (LTS). The
Maven mirror this project is built and tested against serves neither (`pulsar-broker`
5.0.0, 5.0.0-M2 and 4.0.14 answer 404); it serves 5.0.1, the next 5.0 patch release
with the same PIP-473 code line, and 4.0.8 of the 4.0 LTS line. Those are pinned here
and in `maven/pom.xml`, and every manifest and report names the version a run used.
"""

from __future__ import annotations

from dataclasses import dataclass

from harness.txn_paths import TxnPath


@dataclass(frozen=True)
class PulsarRelease:
    """One pinned release: its version, the Java its servers need, and what it can run."""

    version: str
    min_java: int
    #: PIP-473: the metadata-driven coordinator and scalable (`topic://`) topics
    scalable_transactions: bool

    @property
    def line(self) -> str:
        """`5.0` or `4.0`: the release line, for labels in reports."""
        return ".".join(self.version.split(".")[:2])

    def supports(self, txn_path: TxnPath) -> bool:
        return txn_path is not TxnPath.V5 or self.scalable_transactions


PULSAR_5 = PulsarRelease(version="5.0.1", min_java=21, scalable_transactions=True)
PULSAR_4_LTS = PulsarRelease(version="4.0.8", min_java=17, scalable_transactions=False)
RELEASES = {r.version: r for r in (PULSAR_5, PULSAR_4_LTS)}

#: One version for all three paths, so the comparison between them is fair.
DEFAULT_RELEASE = PULSAR_5


def release(version: str | None) -> PulsarRelease:
    """The pinned release named `version` (None: the default); ValueError names the choices."""
    if version is None:
        return DEFAULT_RELEASE
    try:
        return RELEASES[version]
    except KeyError:
        raise ValueError(f"Pulsar {version} is not a release the pulsar target pins; choose one of "
                         f"{', '.join(RELEASES)} (targets/pulsar/versions.py says why these)") from None
