"""The finding programs' command line (targets/pulsar/repro/Cli.java), compiled and run with a JDK.

Why: a program and a helper it shares (V5Clients) once read `--txn-timeout-s` with two defaults,
20 and 120 s: the program planned its reads after a 20 s timeout while its transactions stayed
open for 120 s, and a lag of that length was taken for a lead on real Pulsar. Cli now refuses an
option read with a second, different default.
"""

from __future__ import annotations

import pytest

from tests.unit.pulsar.java_probe import run_probe

PROBE = """
import java.util.function.Supplier;

public final class CliProbe {
    static void show(Supplier<Object> read) {
        try {
            System.out.println(read.get());
        } catch (IllegalStateException | IllegalArgumentException err) {
            System.out.println("refused: " + err.getMessage());
        }
    }

    public static void main(String[] argv) {
        Cli cli = Cli.parse(new String[] {"--given", "7", "--negative", "-5", "--word", "soon"});
        show(() -> cli.integer("--timeout", 20) + " " + cli.integer("--timeout", 20));
        show(() -> cli.get("--listener", null) + " " + cli.get("--listener", null));
        show(() -> cli.integer("--timeout", 120));
        show(() -> cli.integer("--given", 1));
        show(() -> cli.integer("--given", 2));
        show(() -> cli.nonNegative("--absent", 120));
        show(() -> cli.nonNegative("--negative", 120));
        show(() -> cli.nonNegative("--word", 120));
    }
}
"""


@pytest.fixture(scope="module")
def probe_output(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    return run_probe(tmp_path_factory.mktemp("cli"), "CliProbe", PROBE, ["Cli.java"])


def test_an_option_read_twice_with_one_default_gives_one_value(probe_output: list[str]) -> None:
    assert probe_output[:2] == ["20 20", "null null"]


def test_a_second_default_for_an_option_is_refused_naming_both(probe_output: list[str]) -> None:
    assert probe_output[2] == ("refused: --timeout is read with two defaults, 20 and 120: "
                               "give one default to both readers")


def test_a_given_option_is_still_checked_for_one_default(probe_output: list[str]) -> None:
    """A value on the command line hides a disagreement only until a run without it: refused anyway."""
    assert probe_output[3] == "7"
    assert probe_output[4].startswith("refused: --given is read with two defaults, 1 and 2")


def test_a_length_or_wait_below_zero_or_not_a_number_is_refused_naming_the_option(probe_output: list[str]) -> None:
    """`--cut-after-ms -5` would have thrown from Thread.sleep with no option named."""
    assert probe_output[5] == "120"
    assert probe_output[6] == "refused: --negative must be a whole number of 0 or more, got -5"
    assert probe_output[7] == "refused: --word must be a whole number of 0 or more, got soon"
