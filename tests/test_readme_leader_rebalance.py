"""What the README promises about a recovered broker's leaderships matches the defaults (issue 46,
item 7): Kafka's default check interval (300 s) is kept, so the README says how long that takes by
default and how to make it faster, and the demo says that it runs with a shorter interval."""

from __future__ import annotations

import re
from pathlib import Path

from click.testing import CliRunner

from raftmeta.cli.main import cli
from raftmeta.controller.result import ControllerConfig

ROOT = Path(__file__).resolve().parent.parent
KAFKA_DEFAULT_S = 300  # leader.imbalance.check.interval.seconds, Kafka's ReplicationConfigs default


def test_the_controller_and_node_keep_kafkas_default_interval() -> None:
    assert ControllerConfig().leader_imbalance_check_interval_ms == KAFKA_DEFAULT_S * 1000
    help_text = CliRunner().invoke(cli, ["node", "--help"], terminal_width=200).output
    assert re.search(r"--leader-imbalance-check-interval-seconds\s+INTEGER.*\[default: 300;", help_text, re.S)


def test_the_readme_says_when_a_recovered_broker_leads_again_and_how_to_hurry_it() -> None:
    readme = (ROOT / "README.md").read_text()
    recovery = readme[readme.index("# Break a broker") : readme.index("raftmeta brokers recover")]
    assert "by itself" not in recovery or "within" in recovery, "no promise without its delay"
    assert f"leader.imbalance.check.interval.seconds, default {KAFKA_DEFAULT_S} s" in recovery
    assert "--leader-imbalance-check-interval-seconds" in recovery, "how to make it faster"
    assert "raftmeta leader-election" in recovery, "or elect now"


def test_the_demo_says_it_shortens_the_interval() -> None:
    demo = (ROOT / "raftmeta" / "cli" / "demo.py").read_text()
    assert '"--leader-imbalance-check-interval-seconds", "2"' in demo
    assert "preferred leaders are checked every 2 s here; Kafka's default, " in demo
    assert "and raftmeta's, is 300 s" in demo
    assert "Healed by itself" not in demo
