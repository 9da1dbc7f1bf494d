"""``hwgen build``: refusals before any tool runs."""

import argparse

import pytest


def test_cli_refuses_unreachable_clock(capsys):
    from hwgen.cli import UsageError
    from hwgen.cli.build import register

    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())
    args = parser.parse_args(["build", "--board", "icebreaker", "--clock-hz", "40000000"])
    with pytest.raises(UsageError, match="cannot make 40 MHz"):
        args.func(args)
    args = parser.parse_args(["build", "--board", "icebreaker", "--rows", "6", "--cols", "4"])
    with pytest.raises(UsageError, match="SB_MAC16"):
        args.func(args)
