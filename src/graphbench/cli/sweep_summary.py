"""The summary that closes `graphbench sweep`: per point and workload, then ladder against ladder."""

from pathlib import Path


def print_summary(console, results: Path) -> None:
    """The table that closes a sweep: per point and workload what it measured, then ladder against ladder."""
    from rich.markup import escape
    from rich.table import Table

    from graphbench.reports.aliases import stands_for
    from graphbench.reports.frame import graphs_recorded
    from graphbench.reports.kernel_choices_diff import round_searches_note
    from graphbench.reports.padding_table import histogram, histogram_text, padding_table
    from graphbench.reports.point_names import point_namer
    from graphbench.reports.stats import MAX_STEADY_SPREAD_PCT
    from graphbench.reports.store import load_results

    loaded = load_results([results])
    predicted = {(row["point"], row["workload"]): row["predicted padding %"]  # (the report's Padding table's)
                 for _, row in padding_table(loaded.results).iterrows()}
    ok = [r for r in loaded.results if r["status"] == "ok"]
    # a label measured on two GPU types (a mixed Ray cluster) is two points: named apart, as the report names them
    name, engine_name = point_namer(ok), point_namer([r for r in ok if r["system"] == "graphbench"])
    table = Table("point", "system", "status", "start-up s\ncold / warm", "capture s", "graph MiB", "workload",
                  "output tok/s", "spread %\nprocesses", "TPOT p50 ms", "padding %\n(of tokens)", "batch sizes (share of steps)")
    num_unsteady = num_busy = num_outliers = num_unrecorded = 0
    for r in sorted(loaded.results, key=lambda r: (r["status"] != "ok", r["label"])):
        if r["status"] != "ok":
            table.add_row(r["label"], r["system"], "[red]failed[/red]", "", "", "", "", "", "", "", "",
                          (r.get("failure") or {}).get("reason", "")[:40])
            continue
        s = r["startup"] or {}
        # what a point that recorded no CUDA graph (the CPU, mode NONE, a peer) did not measure: "-", not 0
        resolved = ((s.get("cudagraph_mode") or {}) if isinstance(s.get("cudagraph_mode"), dict) else {}).get("resolved")
        recorded = graphs_recorded(r) or (r["system"] == "graphbench" and not resolved)  # (unknown: as written)
        num_unrecorded += not recorded
        capture = f"{s.get('capture_s') or 0:.2f}" if recorded else "-"
        memory = f"{(s.get('graph_memory_bytes') or 0) / 2**20:.0f}" if recorded else "-"
        for i, w in enumerate(r["workloads"]):
            m = w.get("summary") or {}
            if "output_tokens_per_s" not in m:  # a result graphbench did not write, or an empty workload
                continue
            excluded = [x for x in w.get("round_medians") or [] if x.get("excluded")]
            num_outliers += len(excluded)
            # the spread between processes (a single process has none: its repeats' spread is not noise)
            spread = m["output_tokens_per_s"].get("spread_pct") if len(w.get("round_medians") or []) > 1 else None
            busy = w.get("busy_host_repeats") or []
            unsteady = spread is not None and spread > MAX_STEADY_SPREAD_PCT
            num_unsteady += unsteady and not busy
            num_busy += bool(busy)
            spread_cell = "-" if spread is None else f"[yellow]{spread:.1f}[/yellow]" if unsteady else f"{spread:.1f}"
            if busy:
                quiet = w.get("quiet_spread_pct")
                spread_cell = (f"[yellow]busy host[/yellow] ({len(busy)}/{len(w['repeats'])})"
                               + (f"; {quiet:.1f} without" if quiet is not None else ""))
            table.add_row(name(r) if i == 0 else "", r["system"] if i == 0 else "", "ok" if i == 0 else "",
                          _startup_cell(r) if i == 0 else "", capture if i == 0 else "", memory if i == 0 else "",
                          w["name"], f"{m['output_tokens_per_s']['median']:.0f}", spread_cell,
                          f"{m.get('tpot_p50_ms', {}).get('median', float('nan')):.2f}",
                          _padding_cell(m, recorded, predicted.get((engine_name(r), w["name"]))),
                          histogram_text(histogram(w)))
        for alias in stands_for(r):
            table.add_row(name(dict(r, label=alias)), r["system"], f"[cyan]= {name(r)}[/cyan]", "", "", "",
                          "same engine, measured once", "", "", "", "", "")
    console.print(table)
    _print_notes(console, num_unsteady, num_busy, num_outliers)
    if num_unrecorded:
        console.print("[dim]-: not measured (no CUDA graph was recorded: the CPU, cudagraph mode NONE, a peer); "
                      "predicted: the padding the point's ladder would pay for these batch sizes on a GPU (the "
                      "report's Padding table)[/dim]")
    if (note := round_searches_note([r for r in ok if r["system"] == "graphbench"], engine_name)) is not None:
        console.print(f"[dim]{escape(note)}[/dim]")
    _print_ladder_pairs(console, loaded.results)
    for path, why in loaded.skipped:
        console.print(f"[yellow]skipped malformed result {escape(str(path))}: {escape(why)}[/yellow]")


def _print_notes(console, num_unsteady: int, num_busy: int, num_outliers: int) -> None:
    """What the table's yellow cells mean, for the workloads that have them."""
    from graphbench.reports.stats import MAX_STEADY_SPREAD_PCT

    if num_unsteady:
        console.print(f"[yellow]{num_unsteady} workload(s) spread more than {MAX_STEADY_SPREAD_PCT:g}% between processes "
                      "((max - min) / median of output tok/s over the rounds): that spread is the noise floor a "
                      "difference must beat; the report's Repeats table shows which steps moved (eager and "
                      "piecewise steps follow the host's speed)[/yellow]")
    if num_busy:
        console.print(f"[yellow]{num_busy} workload(s) had a repeat on a busy host (another process held the CPU: "
                      "see each repeat's busy_host): their spread is the host's, not the engine's; the spread of "
                      "the other repeats is given beside it[/yellow]")
    if num_outliers:
        console.print(f"[yellow]{num_outliers} workload(s) had a first round that was an outlier against the others: "
                      "excluded from the statistics (the report's Rounds note gives each reason)[/yellow]")


def _padding_cell(summary: dict, recorded: bool, predicted) -> str:
    """The padding paid where graphs were recorded; else what the point's ladder would pay for these batch
    sizes (predicted, as the report's Padding table), or "-" where it asked for none."""
    if recorded:
        paid = (summary.get("padding_token_pct") or summary.get("padding_waste_pct") or {}).get("median")
        return f"{paid:.1f}" if isinstance(paid, (int, float)) else "-"
    if isinstance(predicted, (int, float)) and predicted == predicted:  # (NaN: no ladder asked)
        return f"[dim]{predicted:.1f} predicted[/dim]"
    return "-"


def _startup_cell(result: dict) -> str:
    """The point's start-ups: 'cold / warm' seconds ('-' for a start it did not make)."""
    starts = [s for s in result.get("startups") or [result.get("startup") or {}] if isinstance(s, dict)]
    cold = [s.get("total_s") for s in starts if s.get("cold")]
    warm = [s.get("total_s") for s in starts if not s.get("cold")]

    def text(values: list) -> str:
        return f"{values[-1]:.1f}" if values and isinstance(values[-1], (int, float)) else "-"

    if result.get("system") != "graphbench":  # a peer's one start: load (its compile is in the first call)
        return f"{text(warm or cold)} (load)"
    return f"{text(cold)} / {text(warm)}"


def _print_ladder_pairs(console, results: list) -> None:
    """Points that differ only in their ladder: what each pads and what that costs (reports.ladder_pairs)."""
    from rich.table import Table

    from graphbench.reports.ladder_pairs import ladder_pairs

    pairs = ladder_pairs(results)
    pairs = pairs[pairs["workload"] != "every workload"] if not pairs.empty else pairs  # one engine: rows above
    if pairs.empty:
        return

    table = Table("ladder a -> b", "workload", "padding % (of tokens)", "same recordings", "graph step ms",
                  "graph step", "TPOT p50", "output tok/s", "explained by",
                  title="Ladder against ladder: b against a, over processes (a tie unless significant, beyond the "
                        "noise between processes and beyond the minimum effect)")
    for _, row in pairs.iterrows():
        table.add_row(row["pair"], row["workload"], row["paid padding %"], row["same recordings"],
                      row["graph step ms"], row["graph step"], row["TPOT p50"], row["output tok/s"],
                      row["explained by"])
    console.print(table)
