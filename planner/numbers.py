"""One style for every number the tool prints (text, tables, markdown, chart labels). Use these,
never an f-string of your own, for a figure a reviewer reads:

    size(82_258_362_368)   '76.61 GiB'      GiB (2^30) to two decimals from 1 GiB up,
    size(671_088_640)      '640.0 MiB'      MiB (2^20) to one decimal under 1 GiB,
    size(4_096)            '4,096 bytes'    bytes under 1 MiB
    exact_size(84_986_036_224)  '79.15 GiB (84,986,036,224 bytes)'  a stored byte count, exactly too
    exact(47022.62)        '47,022.62'      a stored figure exactly, with thousands separators
    count(14344)           '14,344'         thousands separators, always
    percent(0.562)         '56.2%'          a fraction as percent, no space before %
    percent_value(20)      '20%'            a percentage as given (--headroom 20)
    change(0.123)          '+12.3%'         a change against a base, signed
    duration(3642.7)       '3,642.7 ms'     ms under 10 s, seconds from 10 s up ('17.2 s', '448 s')
    durations([120, 560])  '120.0/560.0 ms' several in one unit, the largest's
    money(18.16)           '$18.16'         USD; money(18.16, estimate=True) '$18.16*' (* = an estimate)
    money(13257, cents=False)  '$13,257'
    per_million_tokens(4.983)  '$4.983'    USD per million tokens, to a tenth of a cent
    tokens(8192)           '8,192-token'    with_article(tokens(8192)) 'an 8,192-token'
    tokens_label(32768)    '32k'            a context length as people say it (2^10 = k, 2^20 = M): '1M', '9,000'
    ratio(217.1)           '217.10×'
    given(2.5)             '2.5'            a figure the user gave (a rate, a target), as given: '40', '1,000'

Bytes are integers until here (pricing/units.py names the units). The figures are rounded only
in the strings these return, never in the data they come from."""

from __future__ import annotations

import math

from pricing.units import GiB, MiB, tokens_label  # noqa: F401  (tokens_label: one of this module's styles)

ESTIMATE_MARK = "*"  # beside every price that is the catalogue's estimate, not a quote
TEN_SECONDS_MS = 10_000.0


def size(n: int) -> str:
    """Bytes for people: '76.61 GiB', '640.0 MiB', '4,096 bytes'."""
    if abs(n) >= GiB:
        return f"{n / GiB:,.2f} GiB"
    if abs(n) >= MiB:
        return f"{n / MiB:,.1f} MiB"
    return f"{n:,} bytes"


def exact_size(n: int) -> str:
    """A stored byte count for people and exactly: '79.15 GiB (84,986,036,224 bytes)'; under 1 MiB
    `size` is already exact ('4,096 bytes')."""
    if abs(n) < MiB:
        return "1 byte" if n == 1 else size(n)
    return f"{size(n)} ({n:,} bytes)"


def exact(x: float) -> str:
    """A stored figure exactly as stored, with thousands separators: '84,986,036,224', '47,022.62',
    '0.038' (never rounded: a registry value read back)."""
    return f"{x:,}"


def block_unit(values) -> tuple[int, str]:
    """The one unit a block of figures prints in: GiB when any of them reaches 1 GiB, else MiB."""
    return (GiB, "GiB") if any(abs(v) >= GiB for v in values) else (MiB, "MiB")


def in_unit(n: int, unit: tuple[int, str]) -> str:
    """Bytes in a block's unit, with `size`'s decimals for that unit ('0.25 GiB' beside '76.61 GiB')."""
    digits = 2 if unit[0] == GiB else 1
    return f"{n / unit[0]:,.{digits}f} {unit[1]}"


def count(n: int | float) -> str:
    """A whole count with thousands separators ('14,344'); a float is rounded to the nearest."""
    return f"{round(n):,}"


def number(x: float, digits: int = 2) -> str:
    """A measured quantity to `digits` decimals with thousands separators ('1,234.57')."""
    return f"{x:,.{digits}f}"


def given(x: float) -> str:
    """A figure the user gave (a rate, a bound), as given, with thousands separators: '40', '2.5',
    '1,000', '0.125'; never in exponent form."""
    return f"{x:,.3f}".rstrip("0").rstrip(".")


def percent(fraction: float, digits: int = 1) -> str:
    """A fraction as a percentage ('56.2%'); no space before the sign."""
    return f"{fraction * 100:,.{digits}f}%"


def change(fraction: float, digits: int = 1) -> str:
    """A change against a base, signed: '+12.3%', '-4.0%'."""
    return f"{fraction * 100:+,.{digits}f}%"


def percent_value(value: float) -> str:
    """A percentage the user gave, as given ('20%', '12.5%')."""
    return f"{value:,g}%"


def duration(ms: float) -> str:
    """A time: '3,642.7 ms' under 10 s, '17.2 s' to 100 s, '448 s' above."""
    if not math.isfinite(ms):
        return "∞"
    if ms < TEN_SECONDS_MS:
        return f"{ms:,.1f} ms"
    seconds = ms / 1000
    return f"{seconds:,.1f} s" if seconds < 100 else f"{seconds:,.0f} s"


def durations(ms: list[float]) -> str:
    """Several times in the unit `duration` gives the largest: '120.3/340.0/560.1 ms', '8.2/12.4/17.9 s'."""
    if not all(math.isfinite(v) for v in ms):
        return "/".join(duration(v) for v in ms)
    if max(ms) < TEN_SECONDS_MS:
        return "/".join(f"{v:,.1f}" for v in ms) + " ms"
    return "/".join(f"{v / 1000:,.1f}" for v in ms) + " s"


def money(usd: float, estimate: bool = False, cents: bool = True) -> str:
    """USD: '$18.16', '$13,257' (cents=False), with the estimate mark when the price is one."""
    text = f"${usd:,.2f}" if cents else f"${usd:,.0f}"
    return text + (ESTIMATE_MARK if estimate else "")


def per_million_tokens(usd: float, estimate: bool = False) -> str:
    """USD per million tokens, to a tenth of a cent as the plan prints it: '$4.983', '$4.983*'."""
    return f"${usd:,.3f}" + (ESTIMATE_MARK if estimate else "")


def amount(usd: float, estimate: bool = False, cents: bool = True) -> str:
    """USD without the sign, for a column headed '$/hour': '18.16*', '13,257'."""
    text = f"{usd:,.2f}" if cents else f"{usd:,.0f}"
    return text + (ESTIMATE_MARK if estimate else "")


def tokens(n: int) -> str:
    """A length as an adjective: '8,192-token'."""
    return f"{n:,}-token"


def with_article(phrase: str) -> str:
    """'a' or 'an' before a phrase that starts with a number or a word, as it is spoken: 'an
    8,192-token prompt', 'an 11-token prompt', 'a 1,048,576-token prompt', 'an idle pool'."""
    head = phrase.split(",")[0].split("-")[0].split(" ")[0].split(".")[0]
    if head.isdigit():
        # eight..., eleven, eighteen (also as the leading group: 'eleven thousand', 'eighteen million')
        spoken_an = head.startswith("8") or head in ("11", "18")
        return ("an " if spoken_an else "a ") + phrase
    return ("an " if head[:1].lower() in "aeiou" and head else "a ") + phrase


def ratio(x: float) -> str:
    """A multiple, as vLLM prints its maximum concurrency: '217.10×'."""
    return f"{x:,.2f}×"


def requests(n: int) -> str:
    """'1 request', '14,344 requests'."""
    return f"{n:,} request" + ("" if n == 1 else "s")


def plural(n: int, word: str, words: str | None = None) -> str:
    """'1 GPU', '4 GPUs', '1 replica', '2 replicas' (thousands separators)."""
    return f"{n:,} " + (word if n == 1 else (words or word + "s"))
