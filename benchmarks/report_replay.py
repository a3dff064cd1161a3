"""The replay's sections of benchmarks/README.md (benchmarks/replay.py): keystroke to suggestion and
the round trips, the server threads and load varied, and the row of the goals table the replay judges."""
from __future__ import annotations

from report_format import ms, pct, table, wait_ms
from waits import goals_met, recorded_waits


def replay_section(r: dict, where: str = "") -> list[str]:
    lat, src, req = r["latency_ms"], r["latency_ms_by_source"], r["requests"]
    server = r.get("server", {})
    wait, engine = recorded_waits(r), server.get("engineMs") or {}
    rows = [["keystroke to suggestion, every keystroke", wait["count"], *(wait_ms(wait[q]) for q in ("p50", "p95", "p99"))]
            ] if wait else []
    rows.append(["round trip, requests answered before the next key", lat.get("count"),
                 *(ms(lat[q]) for q in ("p50", "p95", "p99"))])
    for name in ("engine", "cache"):
        if src[name].get("count"):
            rows.append([f"… of which from the {name}", src[name]["count"], *(ms(src[name][q]) for q in ("p50", "p95", "p99"))])
    if "p50" in engine:
        rows.append(["engine call, inside the server", engine.get("count", "-"), *(ms(engine[q]) for q in ("p50", "p95", "p99"))])
    reuse = server.get("contextReuseRate")
    compiled = {True: "compiled CPU steps", False: "eager", None: "eager"}[r.get("compiled")]
    threads = f", {r['threads']} thread{'s' if r['threads'] != 1 else ''}" if r.get("threads") else ""
    dtype = f"{r.get('dtype')}{' with int8 matmuls' if server.get('int8Matmuls') else ''}"
    load = r["machine"].get("load_average") if "machine" in r else None
    shared = (f"; 1-minute load average {load[0]:.1f} on {r['machine'].get('cpus')} CPUs as it finished, its own "
              "server and client included" if load else "")
    return [f"**End to end** ({where}`{r['command']}`, server in {dtype} with {compiled}{threads}{shared}): held-out "
            f"function bodies typed key by key through `spanfill serve` over stdio, one key every "
            f"{r['config']['interval_ms']:.0f} ms, automatic requests with `$/cancelRequest` of the outstanding one. "
            "*Keystroke to suggestion*: from a keystroke to the first answer shown for it or for a later keystroke "
            "(a keystroke whose request the next one cancelled waits on); *round trip*: the answered requests alone, "
            "as the client sees them:", "",
            table(["what", "count", "p50 ms", "p95 ms", "p99 ms"], rows), "",
            unanswered_sentence(r, wait)
            + f" {req['sent']} sent, {req['answered']} answered, {req['cancelled']} cancelled, {req['failed']} failed; "
            f"{pct(r['typing_through']['share_answered_from_cache'] or 0)} answered from the typing-through cache; "
            + (f"context-token reuse {pct(reuse)}; " if reuse is not None else "")
            + f"superseded in the server: {server.get('superseded', 'n/a')}."
            + stages_sentence(server)]


def unanswered_sentence(r: dict, wait: dict | None) -> str:
    keys, req = r.get("keystrokes"), r["requests"]
    if keys:
        missed = keys["count"] - keys["answered_before_next_key"]
        return (f"{missed} of {keys['count']} keystrokes ({pct(keys['share_unanswered_before_next_key'])}) got no "
                f"answer before the next key: {keys['waited_for_a_later_key']} waited for a later keystroke's, "
                f"{keys['never_shown']} for none; {keys['ended_on_an_empty_answer']} waits ended on an empty answer "
                "(no ghost text).")
    if wait:
        return ("Every keystroke was answered before the next one, so each wait is its own round trip (this run "
                "recorded round trips only).")
    return (f"This run recorded the round trips of answered requests alone: the {req['cancelled']} keystrokes "
            f"({pct(req['cancelled'] / req['sent'])}) whose request the next key cancelled are not in the table, and "
            "keystroke to suggestion is unknown; rerun benchmarks/replay.py for it.")


def stages_sentence(server: dict) -> str:
    """Where an engine-answered request's time went, as the server measured it (median per stage)."""
    stages, engine = server.get("engineStagesMs") or {}, server.get("engineMs") or {}
    parts = [f"{name} {ms(d['p50'])}" for name, d in stages.items() if "p50" in d]
    if not parts or "p50" not in engine:
        return ""
    return (f" Inside the server, an engine call took {ms(engine['p50'])} ms at the median; per stage (medians, ms): "
            + ", ".join(parts) + ".")


REPLAY_VARIANTS = ("replay", "replay_threads2", "replay_busy", "replay_busy_threads2")


def threads_section(runs: dict[str, dict], where: str = "") -> list[str]:
    """The replay with the server's CPU threads and the machine's other load varied."""
    def at(d: dict, q: str) -> str:
        return ms(d[q]) if q in d else "–"

    def waited(r: dict, q: str) -> str:
        wait = recorded_waits(r)
        return wait_ms(wait[q]) if wait else "not recorded"

    rows = []
    for r in runs.values():
        eng, srv = r["latency_ms_by_source"]["engine"], r["server"].get("engineMs") or {}
        req = r["requests"]
        rows.append([r.get("threads"), r["config"].get("background_load", 0), waited(r, "p50"), waited(r, "p95"),
                     f"{req['answered']} / {req['sent']}", at(eng, "p50"), at(eng, "p95"), at(eng, "p99"), at(srv, "p99")])
    return [f"**Server threads on a busy machine** ({where}the replay above with `--threads N` and "
            "`--background-load K`: K other processes spinning on the CPU while typing; one run each; "
            "`benchmarks/cpu.sh` runs all four):", "",
            table(["server threads", "busy processes", "keystroke to suggestion p50 ms", "p95 ms",
                   "answered before the next key / sent", "engine-answered round trip p50 ms", "p95 ms", "p99 ms",
                   "engine call p99 ms (server)"], rows)]


def replay_goal_row(r: dict) -> list[str] | None:
    """The goals table's row for keystroke to suggestion, judged on a replay's result file."""
    if "goals_ms" not in r:
        return None
    g, wait, req = r["goals_ms"], recorded_waits(r), r["requests"]
    goal = f"keystroke to suggestion p50 < {g['p50']} ms, p95 < {g['p95']} ms"
    if wait:
        return [goal, f"p50 {wait_ms(wait['p50'])}, p95 {wait_ms(wait['p95'])} ms over {wait['count']} "
                      f"keystrokes, {req['sent'] - req['answered']} of them unanswered before the next key (replay)",
                "yes" if goals_met(wait, g) else "no"]
    lat = r["latency_ms"]
    return [goal, f"not recorded; the answered requests alone: p50 {ms(lat['p50'])}, p95 {ms(lat['p95'])} ms "
                  f"({req['answered']} of {req['sent']}, {req['cancelled']} cancelled left out; replay)",
            "not judged"]


def protocol_rtt_section(r: dict, where: str = "") -> list[str]:
    """The protocol's share of a round trip (benchmarks/protocol_rtt.py): stdin read on the event loop
    against pygls's threaded reader."""
    readers = r["readers"]
    rows = [[reader, *(f"{ms(kinds[k]['median_ms'])} / {ms(kinds[k]['p95_ms'])}" for k in ("keystroke", "status")),
             kinds["keystroke"]["runs"]] for reader, kinds in readers.items()]
    loop, thread = readers["event loop"]["keystroke"], readers["thread"]["keystroke"]
    return [f"**The protocol's own round trip** ({where}`{r['command']}`): two servers over stdio taking turns, "
            f"{r['rounds']} rounds, completions off, model eager; *keystroke*: an incremental didChange and an "
            "Automatic inlineCompletion to its empty answer; *status*: a `spanfill/status` request:", "",
            table(["stdin read on", "keystroke p50 / p95 ms", "status p50 / p95 ms", "requests each"], rows), "",
            f"A keystroke's round trip with stdin read on the event loop: {ms(loop['median_ms'])} ms at the median "
            f"against {ms(thread['median_ms'])} on pygls's reader thread (the medians {ms(thread['median_ms'] - loop['median_ms'])} "
            "ms apart)."]
