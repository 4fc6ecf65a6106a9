"""Command-line flags of algorithm configs: one ``--field-name`` flag per config field.

The configs themselves (`common.config`) know nothing of argparse; each field's ``check`` and
``help`` metadata is all this module reads.
"""

from __future__ import annotations

import argparse
import dataclasses

from ..common.envs import parse_env_options

__all__ = ["ConfigHelpFormatter", "add_config_flags"]


def _key_value_parser(flag: str):
    """Argparse type of a repeatable KEY=VALUE flag: one (key, value) pair, VALUE as JSON."""
    def parse(item: str):
        try:
            return next(iter(parse_env_options([item], flag=flag).items()))
        except ValueError as e:
            raise argparse.ArgumentTypeError(str(e)) from e
    return parse


class ConfigHelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Shows defaults, except for flags whose default is None.

    Config flags default to None so that only typed values override the config, and their help
    already names the config's default.
    """

    def _get_help_string(self, action):
        if action.default is None:
            return action.help
        return super()._get_help_string(action)


def add_config_flags(group, cfg_cls, *, skip=(), activation_choices=None) -> None:
    """Add one ``--field-name`` flag per field of a config dataclass to an argparse group.

    Flags default to None (dest ``cfg_<field>``) so that only what the user typed overrides the
    config; the field's ``check`` metadata picks the flag type.

    Args:
        group: an argparse parser or argument group.
        cfg_cls: a dataclass whose fields were declared with ``cfg_field``.
        skip: field names that are run options elsewhere on the command line.
        activation_choices: restrict ``activation`` fields to these names (None: validated later).
    """
    for f in dataclasses.fields(cfg_cls):
        if f.name in skip:
            continue
        check, help_ = f.metadata["check"], f.metadata["help"]
        flag = "--" + f.name.replace("_", "-")
        # A field whose default is None says what None means in its own help.
        default = "" if f.default is None else f" (default: {f.default})"
        kw = {"default": None, "dest": f"cfg_{f.name}", "help": f"{help_}{default}"}
        if check == "bool":
            group.add_argument(flag, action=argparse.BooleanOptionalAction, **kw)
        elif check in ("hidden", "hidden_or_none"):
            group.add_argument(flag, type=int, nargs="+", metavar="W", **kw)
        elif check == "activation":
            group.add_argument(flag, choices=activation_choices, **kw)
        elif check == "network":
            group.add_argument(flag, metavar="MODULE:FACTORY", **kw)
        elif check == "options":  # --network-option KEY=VALUE, repeatable, as --env-option
            kw["help"] = f"{help_}: KEY=VALUE, repeatable, VALUE parsed as JSON"
            group.add_argument(flag[:-1], action="append", metavar="KEY=VALUE",
                               type=_key_value_parser(flag[:-1]), **kw)
        elif check.endswith("int"):
            group.add_argument(flag, type=int, **kw)
        else:
            group.add_argument(flag, type=float, **kw)
