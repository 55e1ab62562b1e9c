"""`--registry overlay.yaml`: every command can lay an overlay (a team's own fitted laws, as
`plan calibrate --out` writes) over the shipped registry. It applies to that command: the overlay
is read once, kept on the command's click context (`command_registry`), and handed to the use
cases it calls (planner/app/api.py: each takes `registry`), never set aside for code below to find."""

from __future__ import annotations

import click

from pricing.registry import Registry

KEY = "planner.registry"  # where the command's context keeps its overlay (click's Context.meta)


def _activate(ctx: click.Context, param: click.Parameter, value: str | None):
    if value:
        from planner.commands.flags import in_flags, own_flag
        from pricing.errors import InputError
        from pricing.registry import read_overlay

        try:
            overlay = read_overlay(value)
        except InputError as err:
            raise in_flags(err, lambda field: own_flag(field, ctx)) from None
        ctx.meta[KEY] = overlay
    return value


def command_registry(ctx: click.Context) -> Registry | None:
    """The command's `--registry` overlay (None: none given, the shipped registry applies)."""
    return ctx.meta.get(KEY)


def registry_option(f):
    return click.option("--registry", "registry_overlay", metavar="OVERLAY.yaml", expose_value=False,
                        callback=_activate, is_eager=True,
                        help="lay an overlay of registry values over the shipped registry (plan calibrate --out)")(f)
