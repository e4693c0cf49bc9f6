"""What `graphbench tune` prints: the table made from its document (tuning/tune_document.py). No torch."""

from __future__ import annotations

from typing import Any

import typer

from graphbench.ladders.tune_inputs import EngineLimits

MIB = 2**20


def print_tune_table(doc: dict[str, Any]) -> None:
    say = typer.echo
    d = doc["distribution"]
    say(f"distribution: {d['source']} ({d['num_sizes']} sizes in {d['min_size']}..{d['max_size']}, "
        f"mean {d['mean']:.2f})")
    unit = {"tokens": "padding tokens per step", "waste": "padding waste %", "time": "ms per step"}[doc["objective"]]
    extra = [f"multiple of {doc['multiple_of']}"] if doc["multiple_of"] > 1 else []
    extra += [f"required {','.join(map(str, doc['required']))}"] if doc["required"] else []
    if doc["memory_budget_bytes"] is not None:
        extra.append(f"graph memory <= {doc['memory_budget_bytes'] / MIB:.1f} MiB")
    source = "" if doc["max_graphs_from"] == "--max-graphs" else f" (as many as {doc['max_graphs_from']})"
    top_source = " (the server log's largest capture size)" if doc["top_from"] == "server log" else ""
    say(f"objective: {doc['objective']} ({unit}); at most {doc['max_graphs']} graphs{source}; top {doc['top']}{top_source}"
        + "".join(f"; {e}" for e in extra))
    if (engine := doc["engine"]) is not None:
        say(f"measured engine: {EngineLimits(**engine).text()}"
            + (" (the top is its max capture size)" if doc["top_from"] == "results" else ""))
    if (mm := doc["memory_model"]) is not None:
        say(f"graph memory model: {mm.get('fixed_bytes', 0.0) / MIB:.1f} MiB fixed + {mm['per_graph_bytes'] / MIB:.3f} MiB per size + "
            f"{mm['per_token_bytes'] / 1024:.3f} KiB per token of size (fit over {mm['num_points']} result(s), "
            f"rms error {mm['rms_error_bytes'] / MIB:.3f} MiB{'; ' + mm['note'] if mm['note'] else ''})")
    timed = doc.get("curve")
    if timed is not None:
        many = f"{timed['processes']} processes' curves: " if timed["processes"] > 1 else ""
        median = " (the median over the processes; the Pareto curve below is weighed with each size's median)" \
            if timed["processes"] > 1 else ""
        say(f"step-time curve: {many}{timed['file']} ({timed['model']}, {timed['gpu']}, {timed['date']}); a ladder "
            f"with every size 1..{doc['top']}: {timed['every_size_ms']:.4f} ms per step{median}")
    say(f"tuned ladder ({doc['tuned']['num_sizes']} sizes): {' '.join(map(str, doc['tuned']['sizes']))}")
    say("")
    with_memory = doc["memory_model"] is not None
    head = f"{'ladder':<14}{'graphs':>7}{'pad tokens/step':>17}{'waste':>9}{'eager':>9}"
    judged = bool(timed and timed.get("vs_tuned"))
    head += f"{'ms/step':>10}{'vs every':>10}{'capture s':>11}" if timed else ""
    head += f"{'vs tuned':>11}" if judged else ""
    say(head + (f"{'graph MiB':>11}" if with_memory else ""))
    for row in doc["ladders"]:
        line = (f"{row['name']:<14}{row['num_sizes']:>7}{row['expected_padded_tokens']:>17.4f}"
                f"{row['expected_waste_pct']:>8.2f}%{row['eager_pct']:>8.2f}%")
        if timed and row["name"] not in timed["ms_per_step"]:
            line += f"{'-':>10}{'-':>10}{'-':>11}"
        elif timed:
            capture = row["predicted_capture_s"]
            line += (f"{timed['ms_per_step'][row['name']]:>10.4f}{timed['vs_every_size_pct'][row['name']]:>+9.2f}%"
                     + (f"{capture:>11.2f}" if capture is not None else f"{'-':>11}"))
        if judged:
            verdict = timed["vs_tuned"].get(row["name"])
            line += f"{_against(verdict) if verdict else ('-' if row['name'] != 'tuned' else ''):>11}"
        say(line + (f"{row['predicted_graph_memory_bytes'] / MIB:>11.1f}" if with_memory else ""))
    if judged:
        for name, verdict in timed["vs_tuned"].items():
            each = " / ".join(f"{x:+.1f}" for x in verdict["per_process_pct"])
            say(f"  {name} against tuned, each process's ratio of ms per step ({each}%): {_against(verdict)}, "
                f"{verdict['reason']}")
    elif timed and timed["processes"] >= 3:
        say("  no other ladder could be timed by the curves (batches above its top need eager times): no verdicts")
    elif timed:
        say(f"  ms per step from {timed['processes']} process(es)' curve: figures, not verdicts (give --curve "
            "3 or more times, each a `graphbench curve` run, to judge the ladders against their noise)")
    say("")
    say("Pareto curve: best ladder with at most n graphs (* = knee)")
    say(f"{'graphs':>7}{'pad tokens/step':>17}{'waste':>9}" + (f"{'ms/step':>10}" if timed else "") + "  sizes")
    for p in doc["pareto"]:
        mark = "*" if p["num_graphs"] == doc["knee"] else " "
        ms = f"{p['expected_step_ms']:>10.4f}" if timed else ""
        say(f"{p['num_graphs']:>6}{mark}{p['expected_padded_tokens']:>17.4f}{p['expected_waste_pct']:>8.2f}%{ms}  "
            + " ".join(map(str, p["sizes"])))
    k = next(p for p in doc["pareto"] if p["num_graphs"] == doc["knee"])
    at_knee = f"{k['expected_step_ms']:.4f} ms per step, " if timed else ""
    within = {"tokens": "padding tokens per step, as a share of the mean batch", "waste": "waste",
              "time": "ms per step, as a share of the best"}[doc["objective"]]
    say(f"knee: {doc['knee']} graphs ({at_knee}{k['expected_padded_tokens']:.4f} padding tokens per step, "
        f"{k['expected_waste_pct']:.2f}% waste): the fewest within {doc['knee_points']:g} points of the best "
        f"ladder's {within}")
    if "startup" in doc:
        _print_startup(doc["startup"])
    say("")
    say("apply the tuned ladder:")
    say(f"  graphbench: {doc['apply']['graphbench']}")
    say(f"  vLLM:       {doc['apply']['vllm']}")


def _print_startup(startup: dict[str, Any]) -> None:
    """Capture on demand per ladder: the rungs recorded at start-up, those left for first use, those unused."""
    say = typer.echo
    say("")
    say(f"capture on demand: start-up records the fewest rungs that replay {100 * startup['coverage']:g}% of the "
        "replayed steps; the others are recorded when a step first needs one (that step waits)")
    say(f"{'ladder':<14}{'at start-up':>12}{'first use':>11}{'unused':>8}{'steps from start-up':>21}"
        f"{'first use':>11}{'eager':>8}  start-up sizes")
    for name, plan in startup["plans"].items():
        say(f"{name:<14}{len(plan['sizes']):>12}{len(plan['deferred']):>11}{len(plan['unused']):>8}"
            f"{plan['covered_pct']:>20.2f}%{plan['deferred_pct']:>10.2f}%{plan['eager_pct']:>7.2f}%  "
            + " ".join(map(str, plan["sizes"])))


def _against(verdict: dict) -> str:
    """A ladder's verdict against the tuned one, in step time: slower, faster, tie or n/a."""
    return {"regressed": "slower", "improved": "faster"}.get(verdict["verdict"], verdict["verdict"])
