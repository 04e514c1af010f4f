"""kafka-configs.sh's --add-config syntax: commas inside brackets belong to a list value."""

from __future__ import annotations

import click
import pytest

from raftmeta.cli.configs import parse_add_config


def test_pairs_and_bracketed_lists() -> None:
    assert parse_add_config("retention.ms=1000, cleanup.policy=[compact,delete]") == [
        ("retention.ms", "1000"),
        ("cleanup.policy", "compact,delete"),
    ]


@pytest.mark.parametrize(("text", "names"), [("a", "not key=value"), ("a=[1,2", "unbalanced"), ("a=1,a=2", "twice")])
def test_malformed_input_is_a_usage_error_naming_the_flag(text: str, names: str) -> None:
    with pytest.raises(click.BadParameter, match=names) as caught:
        parse_add_config(text)
    assert caught.value.param_hint == "--add-config"
