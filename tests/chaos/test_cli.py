"""``raftmeta chaos`` argument handling (the runs themselves are in test_chaos_runs.py)."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from raftmeta.cli.main import cli


def test_unknown_fault_kind_is_a_usage_error(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["chaos", "--faults", "kill,meteor", "--report-dir", str(tmp_path)])
    assert result.exit_code == 2
    assert "meteor" in result.output
    assert not (tmp_path / "data").exists()


def test_a_report_dir_with_an_earlier_run_is_refused(tmp_path: Path) -> None:
    (tmp_path / "data" / "node-1").mkdir(parents=True)
    result = CliRunner().invoke(cli, ["chaos", "--duration", "5", "--seed", "1", "--report-dir", str(tmp_path)])
    assert result.exit_code == 2
    assert "earlier run" in result.output


def test_chaos_is_listed_and_the_unsafe_flags_are_hidden() -> None:
    result = CliRunner().invoke(cli, ["chaos", "--help"])
    assert result.exit_code == 0
    assert "--report-dir" in result.output
    assert "unsafe" not in result.output
    assert "chaos" in CliRunner().invoke(cli, ["--help"]).output


def test_membership_is_a_fault_kind_with_observers() -> None:
    result = CliRunner().invoke(cli, ["chaos", "--help"])
    assert "membership" in result.output and "--observers" in result.output


def test_the_cli_default_fault_kinds_are_the_nemesis_defaults() -> None:
    from raftmeta.chaos.nemesis import DEFAULT_FAMILIES
    from raftmeta.cli.chaos import FAULT_KINDS

    assert FAULT_KINDS.split(",") == list(DEFAULT_FAMILIES)


def test_the_fleet_fault_kind_with_real_kafka_brokers_is_a_usage_error_naming_the_other_kind(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        cli, ["chaos", "--kafka-brokers", "3", "--faults", "kill,broker", "--report-dir", str(tmp_path)]
    )
    assert result.exit_code == 2
    assert "'broker'" in result.output and "kafka-broker" in result.output
    assert not (tmp_path / "data").exists()


def test_the_real_brokers_fault_kind_without_them_is_a_usage_error(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["chaos", "--faults", "kafka-broker", "--report-dir", str(tmp_path)])
    assert result.exit_code == 2
    assert "--kafka-brokers" in result.output


def test_fewer_real_brokers_than_the_replication_factor_is_a_usage_error(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["chaos", "--kafka-brokers", "2", "--report-dir", str(tmp_path)])
    assert result.exit_code == 2
    assert "--kafka-brokers" in result.output and "between 3 and 9" in result.output


def test_with_real_brokers_the_default_fault_kinds_break_them_instead_of_the_fleet() -> None:
    from raftmeta.chaos.nemesis import DEFAULT_FAMILIES, default_families

    assert default_families(0) == DEFAULT_FAMILIES
    assert default_families(3) == tuple("kafka-broker" if f == "broker" else f for f in DEFAULT_FAMILIES)
