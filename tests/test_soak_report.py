"""The soak's section of benchmarks/README.md (report_sections.soak_section), rendered from a small
made-up soak.json whose every figure is distinct, so a figure read from the wrong key shows up."""
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import report  # noqa: E402
import report_sections  # noqa: E402


def case(documents: int, chars: int, before: float, opened: float, asked: float, closed: float, p50: float,
         top: float) -> dict:
    return {"documents": documents, "chars": chars, "rss_mb_before": before, "rss_mb_open": opened,
            "rss_mb_after_requests": asked, "rss_mb_after_close": closed, "requests": 4, "answered": 3,
            "latency_ms": {"count": 3, "p50": p50, "p95": top - 1, "p99": top - 0.5, "mean": p50 + 1, "max": top}}


def soak_result() -> dict:
    return {
        "date": "2026-01-02", "command": "python benchmarks/soak.py --data d --minutes 12",
        "machine": {"cpu_model": "Test CPU", "cpu_fast_bf16": True, "cpus": 2, "threads": 1, "torch": "x", "platform": "y"},
        "device": "cpu", "dtype": "bfloat16", "compiled": True, "threads": 1,
        "config": {"interval_ms": 61.0, "sample_s": 31.0, "churn_s": 11.0, "churn_docs": 21, "max_open": 101},
        "requests": {"sent": 1001, "answered": 902, "cancelled": 98, "failed": 1}, "bodies_typed": 17,
        "latency_ms": {"count": 902, "p50": 3.21, "p95": 45.6, "p99": 51.2, "mean": 9.0, "max": 312.5},
        "drift": {"warm_from_s": 120.0, "rss_mb_warm_first": 800.1, "rss_mb_last": 820.4, "rss_mb_max": 830.6,
                  "rss_growth_mb": 20.3, "rss_slope_mb_per_hour": 55.5, "p50_ms_first_third": 3.11,
                  "p50_ms_last_third": 3.44, "p95_ms_first_third": 41.1, "p95_ms_last_third": 42.2},
        "samples": [{"t_s": 30.0 * i} for i in range(5)],
        "bounded": {"many_documents": case(1000, 3 * 2**20, 820.4, 840.2, 850.3, 845.4, 170.7, 220.8),
                    "big_document": case(1, 5 * 2**20, 845.4, 860.5, 870.6, 850.7, 210.9, 230.1),
                    "single_line": case(1, 2**20, 850.7, 851.8, 861.9, 862.1, 240.2, 300.3),
                    "rss_mb_end": 862.1},
        "seconds": 12 * 60 + 5.0,
    }


def test_the_soak_section_shows_the_figures_of_its_result_file():
    text = "\n".join(report_sections.soak_section(soak_result(), "today; "))
    assert text.startswith("**Soak** (today; `python benchmarks/soak.py --data d --minutes 12`, server in bfloat16 "
                           "with compiled CPU steps, 1 thread): 12 minutes")
    assert "one key every 61 ms (17 bodies), while every 11 s 21 other held-out files" in text
    assert "closed beyond 101; `spanfill/status` sampled every 31 s (5 samples). Warm from 120 s on" in text
    assert "| server RSS MB, first warm sample and last | 800.1 | 820.4 |" in text
    assert "| round trip p50 ms, first and last third | 3.11 | 3.44 |" in text
    assert "| round trip p95 ms, first and last third | 41.1 | 42.2 |" in text
    assert "RSS grew 20.3 MB (at most 830.6 MB; fitted slope **55.5 MB per hour**)" in text
    assert "1001 requests sent, 902 answered, 98 cancelled, **1 failed**" in text
    assert "p50 3.21, p95 45.6, p99 51.2, max 312.5 ms" in text
    assert "RSS at the end 862.1 MB" in text
    assert "| many documents open at once | 1000 | 3.0 | 820.4 | 840.2 | 850.3 | 845.4 | 3 / 4 | 170.7 | 220.8 |" in text
    assert "| one large document | 1 | 5.0 | 845.4 | 860.5 | 870.6 | 850.7 | 3 / 4 | 210.9 | 230.1 |" in text
    assert "| one long single line | 1 | 1.0 | 850.7 | 851.8 | 861.9 | 862.1 | 3 / 4 | 240.2 | 300.3 |" in text


def test_a_drift_figure_soak_py_could_not_measure_reads_as_a_dash():
    result = soak_result()
    result["drift"] |= {"rss_slope_mb_per_hour": None, "p95_ms_last_third": None}
    text = "\n".join(report_sections.soak_section(result))
    assert "fitted slope **- MB per hour**" in text
    assert "| round trip p95 ms, first and last third | 41.1 | - |" in text


def test_report_puts_the_soak_section_in_its_directory(tmp_path):
    (tmp_path / "soak.json").write_text(json.dumps(soak_result()))
    (tmp_path / "soak.png").write_bytes(b"")
    text = report.directory_section(tmp_path, results=tmp_path)
    assert text.startswith("## Test CPU, 2 CPUs, fast bf16: bfloat16")
    assert "**Soak** (2026-01-02, Test CPU, 2 CPUs, fast bf16; `python benchmarks/soak.py" in text
    assert "Plots: [soak.png](" in text
