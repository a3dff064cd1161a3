"""How a replay's result reads: the console summary benchmarks/replay.py prints at the end of a run,
and the plot it writes beside the result file (the keystrokes' waits by what ended them, and their
distribution against the round trips and the goals)."""
from __future__ import annotations

from pathlib import Path

from waits import GOALS_MS


def show(result: dict) -> None:
    req, lat, tt, srv = result["requests"], result["latency_ms"], result["typing_through"], result["server"]
    wait, keys = result["keystroke_to_suggestion_ms"], result["keystrokes"]
    slat, seng = srv.get("latencyMs", {}), srv.get("engineMs", {})

    def pct(d: dict) -> str:
        return "  ".join(f"{q} " + ("  never" if d[q] is None else f"{d[q]:7.1f}") for q in ("p50", "p95", "p99")
                         if q in d) or "no samples"

    def share(part, whole) -> str:
        return f"{part} ({100 * part / whole:.0f}%)" if whole else str(part)

    print(f"\nspanfill replay: {len(result['regions'])} bodies in {result['config']['files']} held-out files, "
          f"{req['sent']} keystrokes at {result['config']['interval_ms']:g} ms; model {result['model']} on "
          f"{result['device']} ({result['dtype']}, {result['threads']} thread{'' if result['threads'] == 1 else 's'}), "
          f"{result['seconds']} s" + (f", {busy} busy processes beside it" if (busy := result['config']['background_load']) else ""))
    print(f"  keystroke to suggestion (ms)  {pct(wait)}   (n={wait['count']}; goal p50 < {GOALS_MS['p50']}, "
          f"p95 < {GOALS_MS['p95']}: {'met' if result['goals_met'] else 'not met'})")
    print(f"    answered before the next key {share(keys['answered_before_next_key'], keys['count'])}; waited for a "
          f"later key's answer {keys['waited_for_a_later_key']}; never shown {keys['never_shown']}; "
          f"ended on an empty answer {keys['ended_on_an_empty_answer']}")
    print(f"  requests            sent {req['sent']}   answered {share(req['answered'], req['sent'])}   "
          f"cancelled by the next key {req['cancelled']} ({req['cancelled_but_answered']} answered first)   "
          f"failed {req['failed']}   empty answers {req['answered_empty']}")
    print(f"  round trip (ms)     {pct(lat)}   (n={lat['count']}: the answered requests alone)")
    for source, d in result["latency_ms_by_source"].items():
        print(f"    from {source:<6}       {pct(d)}   (n={d['count']})")
    print(f"  typing-through      {share(tt['answered_from_cache'], req['answered'])} answers from the cache "
          f"(server: {srv.get('cacheHits')} hits, hit rate {srv.get('cacheHitRate')}); "
          f"{tt['next_key_matches']} of {tt['suggestions']} suggestions began with the next keystroke, "
          f"{tt['whole_suggestion_correct']} were exactly right")
    reuse = srv.get("contextReuseRate")
    print(f"  server              {srv.get('requests')} requests, {srv.get('engineCalls')} engine calls, "
          f"superseded {srv.get('superseded')}, cancelled {srv.get('cancelled')}, context tokens reused "
          f"{'n/a' if reuse is None else f'{100 * reuse:.0f}%'}")
    print(f"    server latency    {pct(slat)}   engine {pct(seng)}")
    for name, d in (srv.get("engineStagesMs") or {}).items():
        print(f"      engine {name:<10} {pct(d)}")
    fallbacks = srv.get("compiledFallbacks")
    if fallbacks is not None:
        print("    compiled steps    calls that ran eagerly (guards rejected them): "
              + ", ".join(f"{k} {v}" for k, v in fallbacks.items()))
    print(f"  keystroke lag (ms)  {pct(result['key_lag_ms'])}   (how late the client sent keys; large = busy machine)")


def plot(result: dict, path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    waits, ended_by = result["wait_samples_ms"], result["wait_ended_by"]
    fig, (hist, cdf) = plt.subplots(1, 2, figsize=(11, 4.2))
    kinds = {"cache": "its own answer, typing-through cache", "engine": "its own answer, engine",
             "later": "a later keystroke's answer"}
    hist.hist([[v for v, by in zip(waits, ended_by) if by == kind] for kind in kinds], bins=40, stacked=True,
              label=list(kinds.values()))
    hist.set_xlabel("keystroke to suggestion (ms), ended by")
    hist.set_ylabel("keystrokes")
    hist.legend(fontsize=8)
    for samples, style, label in ((waits, "k-", "keystroke to suggestion"),
                                  (result["latency_samples_ms"], "k:", "round trip, answered requests alone")):
        shown = sorted(v for v in samples if v is not None)    # never shown: the curve stops short of 1
        cdf.plot(shown, [(i + 1) / len(samples) for i in range(len(shown))], style, drawstyle="steps-post", label=label)
    for q, colour in (("p50", "tab:blue"), ("p95", "tab:orange"), ("p99", "tab:red")):
        value = result["keystroke_to_suggestion_ms"][q]
        if value is not None:
            cdf.axvline(value, color=colour, label=f"{q} {value:.1f} ms")
    for q, goal in GOALS_MS.items():
        cdf.axvline(goal, color="grey", linestyle=":", label=f"goal {q} < {goal} ms")
    cdf.set_xlabel("ms")
    cdf.set_ylabel("fraction")
    cdf.legend(fontsize=8)
    for ax in (hist, cdf):
        ax.grid(alpha=0.3)
    keys = result["keystrokes"]
    fig.suptitle(f"spanfill replay: {keys['count']} keystrokes, {keys['answered_before_next_key']} answered before "
                 f"the next key; {result['model']} on {result['device']} ({result['dtype']})", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
