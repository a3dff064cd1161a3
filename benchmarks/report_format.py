"""How report.py writes a figure: Markdown tables, percentages, milliseconds, speed ratios, and the
engine caption every section opens with."""
from __future__ import annotations


def table(header: list[str], rows: list[list]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def ms(x: float) -> str:
    return f"{x:.1f}" if x >= 10 else f"{x:.2f}"


def speed(baseline_ms: float, this_ms: float) -> str:
    """How this compares with the baseline: '1.60x faster', or '1.25x slower' where it takes longer."""
    x = baseline_ms / this_ms
    return f"{x:.2f}x faster" if x >= 1 else f"{1 / x:.2f}x slower"


def engine_line(info: dict) -> str:
    steps = "compiled steps" if info.get("compiled") else "eager"
    int8 = " with int8 matmuls" if info.get("int8_matmuls") else ""
    return (f"{info.get('params', 0) / 1e6:.1f}M-parameter model, {info.get('dtype')}{int8} on {info.get('device')}, "
            f"{steps}, L={info.get('span_length')}")


def shown(row: dict, key: str, fmt) -> str:
    return fmt(row[key]) if key in row else "-"    # a result file without the shown scores


def wait_ms(x: float | None) -> str:
    return "never" if x is None else ms(x)    # a percentile that fell on a keystroke never answered


def paired(p: dict | None) -> str:
    """A paired comparison (benchmarks/common.py `paired`): exact matches won / lost and the edit-similarity
    difference ± its standard error; "-" for the row the others are paired with."""
    return "-" if not p else f"+{p['won']} / -{p['lost']}; {p['es_diff']:+.3f} ± {p['es_diff_se']:.3f}"
