"""benchmarks/decode.py --rounds (a system run in several processes: the median of their medians) and its host launch
column, the cProfile writer of benchmarks/startup.py and benchmarks/profile_step.py, and benchmarks/lora.py's step
overheads."""

from __future__ import annotations

from tests.bench_scripts import load_bench_script


def _decode_script():
    return load_bench_script("decode")


def _run(system: str, *steps: tuple[int, float]) -> dict:
    return {"system": system, "results": [{"batch": b, "step_ms": ms, "tokens_per_s": b * 1e3 / ms} for b, ms in steps]}


def test_rounds_merge_to_the_median_of_each_batch_and_keep_every_process():
    decode = _decode_script()
    results = [{"system": "bandwidth", "copy_gbs": 4200.0, "results": []},
               _run("graphbench-O2", (1, 0.90), (64, 1.20)), _run("graphbench-O2+x", (1, 0.88), (64, 1.19)),
               _run("gpt-fast", (1, 1.4), (64, 5.3)),
               _run("graphbench-O2", (1, 0.93), (64, 1.17)), _run("graphbench-O2+x", (1, 0.87), (64, 1.18)),
               _run("graphbench-O2", (1, 0.91), (64, 1.25)), _run("graphbench-O2+x", (1, 0.89), (64, 1.16))]
    merged = {r["system"]: r for r in decode.merge_rounds(results)}
    assert list(merged) == ["bandwidth", "graphbench-O2", "graphbench-O2+x", "gpt-fast"]
    base = {x["batch"]: x for x in merged["graphbench-O2"]["results"]}
    assert base[1]["step_ms"] == 0.91 and base[64]["step_ms"] == 1.20
    assert base[1]["round_step_ms"] == [0.90, 0.93, 0.91] and base[64]["tokens_per_s"] == 64e3 / 1.20
    assert [x["step_ms"] for x in merged["graphbench-O2+x"]["results"]] == [0.88, 1.18]
    assert len(merged["graphbench-O2"]["rounds"]) == 3
    assert merged["gpt-fast"]["results"][0]["step_ms"] == 1.4 and "rounds" not in merged["gpt-fast"]



def test_a_peers_note_is_printed_under_the_table(capsys):
    """A peer that runs the shape with less (gpt-fast has no q/k/v bias for Qwen2) says so under the table."""
    import argparse

    decode = _decode_script()
    peer = dict(_run("gpt-fast", (1, 1.4)), note="gpt-fast's model has no q/k/v bias: it runs this shape without one")
    results = [{"system": "bandwidth", "copy_gbs": 4200.0, "results": []},
               dict(_run("graphbench-O2", (1, 0.9)), weights_bytes=10**9), dict(peer, weights_bytes=10**9)]
    decode.report(results, argparse.Namespace(model="qwen2.5-0.5b", prompt_len=128, rounds=1, out=None))
    assert capsys.readouterr().out.strip().splitlines()[-1] == (
        "gpt-fast: gpt-fast's model has no q/k/v bias: it runs this shape without one")

def test_a_cprofile_is_written_as_pstats_and_text(tmp_path):
    import cProfile
    import pstats

    from benchmarks.cprofile_report import write_cprofile

    def busy_function_for_the_profile():
        return sum(i * i for i in range(20000))

    profiler = cProfile.Profile()
    profiler.enable()
    busy_function_for_the_profile()
    profiler.disable()
    write_cprofile(profiler, str(tmp_path / "start.prof"), limit=5)
    text = (tmp_path / "start.prof.txt").read_text()
    assert text.count("busy_function_for_the_profile") == 2  # in the own-time and the cumulative lists
    assert any("busy_function_for_the_profile" in name for _, _, name in pstats.Stats(str(tmp_path / "start.prof")).stats)


def test_the_table_names_gpt_fasts_sdpa_and_the_faster_is_its_figure(capsys):
    import argparse

    decode = _decode_script()
    fast = {"batch": 64, "step_ms": 3.6, "tokens_per_s": 64e3 / 3.6, "sdpa": "default",
            "sdpa_step_ms": {"math": 5.3, "default": 3.6}}
    results = [{"system": "bandwidth", "copy_gbs": 4200.0, "results": []},
               dict(_run("graphbench-O2", (64, 1.1)), weights_bytes=2_470_000_000),
               {"system": "gpt-fast", "results": [fast], "weights_bytes": 2_470_000_000}]
    decode.report(results, argparse.Namespace(model="llama-3.2-1b", prompt_len=128, rounds=1, out=None))
    row = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("gpt-fast"))
    assert "3.600" in row and row.endswith("SDPA math 5.300, default 3.600")


def test_each_processes_host_launch_is_printed_beside_its_step(capsys):
    """A step whose host launch is about the step was host-bound: the table shows every process's launch."""
    import argparse

    decode = _decode_script()

    def process(step_ms: float, launch_ms: float) -> dict:
        return {"system": "graphbench-O2", "weights_bytes": 10**9, "results": [
            {"batch": 1, "step_ms": step_ms, "tokens_per_s": 1e3 / step_ms, "launch_ms": launch_ms}]}

    results = [{"system": "bandwidth", "copy_gbs": 4200.0, "results": []},
               process(0.38, 0.12), process(0.59, 0.51), process(0.39, 0.13)]
    (merged,) = [r for r in decode.merge_rounds(results) if r["system"] == "graphbench-O2"]
    assert merged["results"][0]["round_launch_ms"] == [0.12, 0.51, 0.13] and merged["results"][0]["launch_ms"] == 0.13
    decode.report(results, argparse.Namespace(model="smollm2-135m", prompt_len=128, rounds=3, out=None))
    row = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("graphbench-O2"))
    assert row.endswith("3: 0.380-0.590  host launch 0.120/0.510/0.130")


def test_loras_step_overhead_is_each_setups_tpot_at_share_1_over_no_adapters():
    lora = load_bench_script("lora")

    def row(setup: str, *tpots: tuple[float, float]) -> dict:
        return {"setup": setup, "workloads": [{"share": share, "tpot_p50_ms": ms} for share, ms in tpots]}

    rows = [row("no adapters", (0.0, 1.0)), row("1 adapter", (0.0, 1.01), (0.5, 1.1), (1.0, 1.15)),
            row("4 adapters", (0.0, 1.02), (0.5, 1.2), (1.0, 1.3))]
    got = lora.step_overheads(rows)
    assert list(got) == ["1 adapter", "4 adapters"] and abs(got["1 adapter"] - 0.15) < 1e-9
    assert abs(got["4 adapters"] - 0.30) < 1e-9


def test_loras_ab_runs_each_side_in_processes_of_its_own_interleaved(monkeypatch, capsys, tmp_path):
    """benchmarks/lora.py --variant/--rounds: a worker process per side and round, in turn, with the variant's
    environment; each setup's TPOT is the median over a side's processes, a variant's set against this tree's."""
    import argparse
    import json
    import subprocess

    from tests.bench_scripts import ROOT

    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))  # its variants module (as when run as a script)
    lora = load_bench_script("lora")
    tpots = iter([(1.00, 1.30), (2.00, 2.50), (1.02, 1.26), (2.02, 2.60), (0.98, 1.28), (1.98, 2.40)])
    calls = []

    def fake_run(cmd, env, capture_output, text):
        calls.append((env.get("GB_SIDE"), cmd[cmd.index("--setups") + 1], "--no-replay-check" in cmd))
        base, four = next(tpots)
        rows = [{"setup": "no adapters", "workloads": [{"share": 0.0, "tpot_p50_ms": base}]},
                {"setup": "4 adapters", "workloads": [{"share": 0.0, "tpot_p50_ms": base},
                                                      {"share": 1.0, "tpot_p50_ms": four}]}]
        out = cmd[cmd.index("--out") + 1]
        checked = None if "--no-replay-check" in cmd else env.get("GB_SIDE") is None  # base's replay differs
        with open(out, "w") as f:
            json.dump({"rows": rows, "step_overheads": lora.step_overheads(rows), "replay_equals_uncaptured": checked},
                      f)
        return subprocess.CompletedProcess(cmd, 0, "", "")

    monkeypatch.setattr(subprocess, "run", fake_run)
    args = argparse.Namespace(model="llama-3.2-1b", rank=16, concurrency=16, repeats=3, setups="none,4", rounds=3,
                              variant=["base=GB_SIDE=base"], out=str(tmp_path / "ab.json"), no_replay_check=False)
    result = lora.run_sides(args)
    partial = json.loads((tmp_path / "ab.json").read_text())  # written after every process: a time limit keeps it
    assert partial["partial"] and partial["processes"] == result["processes"]
    # each side's last process runs the replay check, the others skip it
    assert calls == [(None, "none,4", True), ("base", "none,4", True)] * 2 + [(None, "none,4", False),
                                                                             ("base", "none,4", False)]
    assert result["replay_equals_uncaptured"] == {"this tree": True, "base": False}
    assert result["tpot_ms"] == {"this tree": {"no adapters": 1.00, "4 adapters": 1.28},
                                 "base": {"no adapters": 2.00, "4 adapters": 2.50}}
    assert len(result["processes"]["base"]) == 3
    out = capsys.readouterr().out
    assert "round 2 base        : 4 adapters +28.7%" in out
    assert "(against this tree: no adapters +100.0%, 4 adapters +95.3%)" in out
    # base is twice as slow in every process, far beyond the processes' spread: called, by the one rule
    assert [(v["side"], v["setup"], v["verdict"]) for v in result["verdicts"]] == [
        ("base", "no adapters", "slower"), ("base", "4 adapters", "slower")]
    assert "base, 4 adapters: slower (+95.3% vs noise" in out
    assert "base: recordings replay the un-captured run's greedy tokens (mixed batch, 4 adapters): False" in out


def test_a_decode_variant_gets_a_verdict_over_its_processes(capsys, monkeypatch):
    """benchmarks/decode.py --variant with --rounds: each variant's step against its base level's, by
    reports/verdict.py's rule: the same steps twice (an A/A) are a tie, a step 10% slower in every process is
    called, and two processes a side give no verdict."""
    import argparse

    from tests.bench_scripts import ROOT

    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))  # its variants module (as when run as a script)
    decode = _decode_script()
    base = [(1, 0.400), (1, 0.412), (1, 0.405), (1, 0.398)]
    same = [(1, 0.409), (1, 0.401), (1, 0.404), (1, 0.399)]
    slow = [(1, 0.445), (1, 0.452), (1, 0.441), (1, 0.449)]
    results = [{"system": "bandwidth", "copy_gbs": 4200.0, "results": []}]
    for i in range(4):
        results += [dict(_run(name, steps[i]), weights_bytes=10**9) for name, steps in
                    (("graphbench-O2", base), ("graphbench-O2+aa", same), ("graphbench-O2+slow", slow))]
    results += [dict(_run("graphbench-O1", (1, 0.5)), weights_bytes=10**9),
                dict(_run("graphbench-O1+two", (1, 0.9)), weights_bytes=10**9)] * 2
    decode.report(results, argparse.Namespace(model="smollm2-135m", prompt_len=128, rounds=4, out=None))
    verdicts = {v["system"]: v["verdict"] for v in decode.variant_verdicts(
        {r["system"]: {x["batch"]: x for x in r["results"]} for r in decode.merge_rounds(results)[1:]})}
    assert verdicts == {"graphbench-O2+aa": "tie", "graphbench-O2+slow": "slower", "graphbench-O1+two": "n/a"}
    from variants import time_verdict  # a side left with one process (its others failed): no verdict either

    assert time_verdict([0.40], [0.445, 0.452, 0.441], "full_step_ms")["verdict"] == "n/a"
    out = capsys.readouterr().out
    assert "graphbench-O2+slow batch 1 against graphbench-O2: slower (+" in out


def test_cold_gives_each_graphbench_process_its_own_empty_cache_root(monkeypatch):
    """decode.py --cold: a graphbench process (base or variant) gets a fresh cache root of its own, a peer's
    environment is left alone, and a variant's variables are kept."""
    import os

    decode = _decode_script()
    monkeypatch.setenv("GRAPHBENCH_CACHE_ROOT", "/shared/root")
    monkeypatch.delenv("GRAPHBENCH_PDL", raising=False)
    variants = {"x": {"GRAPHBENCH_PDL": "0"}}
    roots = []
    for system in ("graphbench-O2", "graphbench-O2+x", "graphbench-O2"):
        env, root = decode.process_env(system, variants, cold=True)
        assert root and env["GRAPHBENCH_CACHE_ROOT"] == root and os.path.isdir(root) and not os.listdir(root)
        roots.append(root)
        os.rmdir(root)
        assert env.get("GRAPHBENCH_PDL") == ("0" if system.endswith("+x") else None)
    assert len(set(roots)) == 3
    for system, cold in (("gpt-fast", True), ("graphbench-O2", False)):
        env, root = decode.process_env(system, variants, cold)
        assert root is None and env["GRAPHBENCH_CACHE_ROOT"] == "/shared/root"


def test_processes_that_chose_different_kernels_at_start_up_are_said(capsys):
    """decode.py's report: a system whose processes ran different start-up kernel choices (each its own cold
    search, --cold) says how many sets they chose; one set says nothing."""
    import argparse

    decode = _decode_script()

    def process(ms: float, blocks: list[int]) -> dict:
        choice = {"op": "norm_linear", "n": 1152, "k": 896, "rows": 1, "kernel": "norm_gemv", "blocks": blocks}
        return dict(_run("graphbench-O2", (1, ms)), weights_bytes=10**9,
                    startup={"kernel_choices": {"choices": [choice]}})

    processes = [process(0.617, [4, 1024, 4]), process(0.610, [8, 1024, 8]), process(0.618, [4, 1024, 4])]
    assert decode.choice_sets(processes) == 2 and decode.choice_sets(processes[::2]) == 1
    assert decode.choice_sets([_run("graphbench-O2", (1, 0.6))]) == 0
    bandwidth = {"system": "bandwidth", "copy_gbs": 3000.0, "results": []}
    decode.report([bandwidth, *processes], argparse.Namespace(model="qwen2.5-0.5b", prompt_len=128, rounds=3, out=None))
    assert ("graphbench-O2: its 3 processes chose 2 different sets of kernels at start-up (1 of 1 shapes apart: "
            "norm_linear 1152x896 at 1 row)") in capsys.readouterr().out
    same = dict(processes[0]["startup"]["kernel_choices"]["choices"][0], op="linear", n=896, rows=64, kernel="skinny",
                blocks=[32, 64, 4, 4, 5])
    for p in processes:  # a second shape every process chose alike: counted, not named
        p["startup"]["kernel_choices"]["choices"].append(same)
    assert decode.shapes_chosen_apart(processes) == (["norm_linear 1152x896 at 1 row"], 2)
    processes[0]["startup"]["kernel_choices"].update(source="measured", seconds=31.25)
    processes[1]["startup"]["kernel_choices"].update(source="loaded", seconds=0.01)
    assert decode.search_seconds(processes) == [31.25]  # a start that loaded its choices searched nothing
    decode.report([bandwidth, *processes], argparse.Namespace(model="qwen2.5-0.5b", prompt_len=128, rounds=3, out=None))
    assert "graphbench-O2: start-up's kernel search took 31.2 s" in capsys.readouterr().out
    decode.report([bandwidth, *processes[::2]], argparse.Namespace(model="qwen2.5-0.5b", prompt_len=128, rounds=2,
                                                                  out=None))
    assert "different sets of kernels" not in capsys.readouterr().out
