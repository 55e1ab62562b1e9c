"""`plan check-log` (a vLLM start-up log against the kernel) and `plan calibrate` (fit the
registry's fixed-memory laws to start-up records or logs, written as an overlay)."""

from __future__ import annotations

import sys

import click

from planner.commands import ranges
from planner.commands.flags import InputErrors, names_flags, own_flag
from planner.commands.registry_option import command_console, command_defaults, command_registry, registry_option
from pricing.errors import named_all


def _read(path: str) -> tuple[str, str]:
    """A start-up log (or - for standard input) as text: a regular file within the registry's cap
    (pricing/files.py), bytes that are not UTF-8 read as U+FFFD (the log is only searched)."""
    from pricing.files import read_stream, read_text
    from pricing.registry import shipped

    cap = shipped().value("input_limits.file_bytes")
    if path == "-":
        return read_stream(sys.stdin, "FILE", cap, "start-up log, or - for stdin"), "<stdin>"
    return read_text(path, "FILE", cap, "start-up log, or - for stdin", lenient=True), path


def check_out(out_path: str) -> None:
    """`--out`, before any fitting: a file to write in a folder that exists, not a folder."""
    from pathlib import Path

    from pricing.errors import InputError

    target = Path(out_path)
    if target.is_dir():
        raise InputError("--out", f"{out_path} is a folder", "name the overlay file to write, e.g. ours.yaml")
    folder = target.parent if str(target.parent) else Path(".")
    if not folder.is_dir():
        raise InputError("--out", f"folder {folder} does not exist", "create it first, or name a file in an "
                         "existing folder")
    if target.exists() and not target.is_file():
        raise InputError("--out", f"{out_path} is not a regular file", "name the overlay file to write")


@click.command("check-log")
@registry_option
@click.argument("file")
@click.option("--model", help="model card name or config.json path, when the log's own is not known")
@click.option("--chip", help="chip id (see `plan chips`); logs do not name the GPU")
@click.option("--vllm-version", "release", help="the release, when the log does not state it (e.g. 0.19.0)")
@click.option("--tp", type=ranges.at_least(1), help="tensor parallel size, when the log does not state it")
@click.option("--max-num-seqs", type=ranges.at_least(1), help="max_num_seqs, when the log does not state it")
@click.option("--gpu-memory-utilization", type=ranges.fraction(), help="when the log does not state it")
@click.option("--json", "as_json", is_flag=True, help="one JSON object (bytes as integers)")
@names_flags()
@click.pass_context
def check_log(ctx, file, model, chip, release, tp, max_num_seqs, gpu_memory_utilization, as_json):
    """Read a vLLM start-up log (FILE, or - for standard input) of any release from 0.6 to 0.33,
    rebuild its deployment, and print predicted against logged memory per component, with the
    error and the registry value behind each gap."""
    from planner.report.check_log import render
    from pricing.calibration.check import check, unstated
    from pricing.calibration.startup_log import parse

    text, source = _read(file)
    log = parse(text, command_registry(ctx))
    missing = unstated(log, source, model, chip, release) if log.startup_log else []
    if len(missing) > 1:  # every option the log leaves to be given, in one run
        raise InputErrors(missing)
    fill = {"tp": tp, "max_num_seqs": max_num_seqs, "gpu_memory_utilization": gpu_memory_utilization}
    report = named_all(check(log, source, model=model, chip=chip, release=release, fill=fill), own_flag)
    if as_json:
        click.echo(report.model_dump_json(indent=2))
    else:
        render(report, command_console(ctx), command_defaults(ctx).value("report.check_log_inline_width"))


@click.command("calibrate")
@registry_option
@click.argument("records", nargs=-1, required=True)
@click.option("--out", "out_path", required=True, help="overlay YAML to write (use it with --registry)")
@click.option("--chip", help="chip of the start-up logs among RECORDS (JSONL records name their own)")
@click.option("--model", help="model of the start-up logs among RECORDS, when a log's own is not known")
@names_flags()
@click.pass_context
def calibrate(ctx, records, out_path, chip, model):
    """Fit the fixed-memory laws (sampler bytes per logit, non-torch memory, CUDA-graph laws,
    engine workspace) to RECORDS: JSONL start-up records (shared/calibration's format) or vLLM
    start-up logs. Bounded least squares; each value's provenance names its records and residual."""
    from pathlib import Path

    import yaml

    from pricing.calibration.fit import fit, overlay
    from pricing.calibration.predict import predict, predict_all
    from pricing.calibration.records import load_records
    from pricing.calibration.residuals import kv_errors, stats
    from pricing.calibration.startup_log import parse
    from pricing.chips import get_chip
    from pricing.errors import InputError

    check_out(out_path)
    reg = command_registry(ctx)
    predictions = []
    for path in records:
        if path.endswith((".jsonl", ".json")):
            predictions += predict_all(load_records(path), reg)
            continue
        text, source = _read(path)
        log = parse(text, reg)
        if log.empty:
            raise InputError("RECORDS", f"{source} is neither JSONL records nor a vLLM start-up log",
                             "give .jsonl records or start-up logs")
        if chip is None:
            raise InputError("--chip", f"{source} is a log and logs do not name the GPU", "give --chip")
        from pricing.calibration.check import _resolve_model

        predictions.append(predict(log.record(Path(source).name, gpu=chip), reg,
                                   checkpoint=_resolve_model(log, model, source), chip=get_chip(chip, reg)))
    values = fit(predictions, reg)
    if not values:
        raise InputError("RECORDS", "no record informs any law (none has logged components the laws use)",
                         "give start-up records with weights, activation, non-torch or graph figures")
    from pricing.calibration.fit import margin_value
    from pricing.registry import overlay_from

    refit = predict_all([p.record for p in predictions if p.usable], overlay_from(overlay(values), reg))
    values.append(margin_value(refit))
    from planner.report.atomic import write_file

    text = ("# written by plan calibrate; use with --registry\n"
            + yaml.safe_dump(overlay(values), sort_keys=False, allow_unicode=True, width=1000))
    write_file(out_path, lambda out: out.write(text.encode("utf-8")), "out_path")
    usable = [p for p in predictions if p.usable]
    click.echo(f"fitted {len(values)} values on {len(usable)} of {len(predictions)} records -> {out_path}")
    for v in values:
        click.echo(f"  {v.name} = {v.value}  ({len(v.records)} records, era {v.era}, residual rms "
                   f"{v.residual_rms / 2**30:.3f} GiB)")
    from pricing.registry import read_overlay

    s = stats([e for _, e in kv_errors(predict_all([p.record for p in predictions if p.usable],
                                                   read_overlay(out_path, reg)))])
    del read_overlay
    click.echo(f"available KV memory with the overlay: {s.count} records, median |error| {s.median_abs:.2%}, "
               f"{s.within_3:.0%} within 3 %, mean {s.mean_signed:+.2%}")
