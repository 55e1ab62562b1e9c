"""`--registry overlay.yaml`: every command can lay an overlay (a team's own fitted laws, as
`plan calibrate --out` writes) over the shipped registry. It applies to that command (the
registry's `using` block lasts as long as the command's click context)."""

from __future__ import annotations

import click


def _activate(ctx: click.Context, param: click.Parameter, value: str | None):
    if value:
        from planner.commands.flags import in_flags, own_flag
        from pricing.errors import InputError
        from pricing.registry import read_overlay, using

        try:
            overlay = read_overlay(value)
        except InputError as err:
            raise in_flags(err, lambda field: own_flag(field, ctx)) from None
        ctx.with_resource(using(overlay))
    return value


def registry_option(f):
    return click.option("--registry", "registry_overlay", metavar="OVERLAY.yaml", expose_value=False,
                        callback=_activate, is_eager=True,
                        help="lay an overlay of registry values over the shipped registry (plan calibrate --out)")(f)
