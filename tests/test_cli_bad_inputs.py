"""Bad inputs the command fuzzers (tests/test_fuzz_commands.py) did not reach, each found by hand: the
GPU-free commands end them in one `error:` line with exit code 2 (or say what they did), never a traceback."""

from __future__ import annotations

import json
import os
from pathlib import Path
from stat import S_IFCHR

import pytest
from typer.testing import CliRunner

from graphbench.cli.main import app

runner = CliRunner()


def invoke(*args: object):
    return runner.invoke(app, [str(a) for a in args])


def assert_one_error(result, *words: str) -> None:
    assert result.exit_code == 2, result.output
    assert result.exc_info is None or result.exc_info[0] is SystemExit, result.exc_info
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    for word in words:
        assert word in lines[0], (word, lines[0])


def write_json(path: Path, data: object) -> Path:
    path.write_text(json.dumps(data))
    return path


def test_a_request_rate_too_slow_for_its_latencies_is_an_error_not_an_overflow(tmp_path):
    # request 1 at 1 / 1e-300 / 1e-300 steps: the arrival overflowed to inf in the replay (a traceback)
    trace = write_json(tmp_path / "slow.json", {"input_lens": [10, 20], "output_lens": [5, 5],
                                                "request_rate": 1e-300, "itls": [[1e-300], [1e-300]]})
    assert_one_error(invoke("tune", "--distribution", trace, "--max-graphs", 3),
                     f"{trace}: request_rate 1e-300/s", "too far apart to replay")


def test_an_output_length_past_the_engines_cap_names_the_file_and_key(tmp_path):
    # 2^24 passed the trace's check and failed in the replay as 'max_tokens must be at most 1048576'
    listing = write_json(tmp_path / "long.json", [{"input_len": 10, "output_len": 2_000_000}])
    assert_one_error(invoke("tune", "--from", listing, "--max-graphs", 3),
                     f"{listing}: item 0: output_len must be an integer in 1..1048576, got 2000000")
    bench = write_json(tmp_path / "bench.json", {"input_lens": [10], "output_lens": [1 << 24]})
    assert_one_error(invoke("tune", "--from", bench, "--max-graphs", 3),
                     f"{bench}: output_lens[0] must be an integer in 0..1048576, got 16777216")


CURVE = {"kind": "graphbench-step-curve", "schema_version": 1, "graph_ms": {str(n): 1.0 for n in range(1, 9)}}


def test_bad_step_time_curves_are_one_error_naming_the_key(tmp_path):
    cases = [
        # '²'.isdigit() is True and int('²') raised ValueError
        ({"graph_ms": {"²": 1.0}}, "graph_ms has a size '²' that is not an integer in 1..1048576"),
        # two sizes of 10^308 s overflowed the capture-time fit's fsum
        ({"capture_s": {"1": 1e308, "2": 1e308}}, "capture_s[1] must be a positive finite number (at most 1e+12), got 1e+308"),
        # '01' and '1' were one size, the later value silently kept
        ({"graph_ms": {**CURVE["graph_ms"], "01": 2.0}}, "graph_ms gives size 1 twice"),
        # a curve with gaps failed later as 'no recording of 4 (it covers 1..8)'
        ({"graph_ms": {"1": 1.0, "8": 2.0}}, "graph_ms must hold every size 1..8 (`graphbench curve` records each); "
                                            "6 missing, the first 2"),
    ]
    for change, message in cases:
        curve = write_json(tmp_path / "curve.json", {**CURVE, **change})
        result = invoke("tune", "--model", "uniform:1-8", "--top", 8, "--max-graphs", 2, "--objective", "time",
                        "--curve", curve, "--max-capture-s", 1)
        assert_one_error(result, f"{curve}: {message}")


GATE = Path(__file__).parent / "data" / "gate"


def mutated_results(tmp_path: Path, change) -> Path:
    """The gate's current fixture with `change(result)` applied to each file."""
    folder = tmp_path / "current"
    folder.mkdir(exist_ok=True)
    for source in sorted((GATE / "current" / "cpu-test").glob("*.json")):
        result = json.loads(source.read_text())
        change(result)
        (folder / source.name).write_text(json.dumps(result))
    return folder


def every_repeat(key: str, value: object, stat: str | None = None):
    def change(result):
        for workload in result["workloads"]:
            for repeat in workload["repeats"]:
                if stat is None:
                    repeat[key] = value
                else:
                    repeat[key][stat] = value
    return change


def test_impossible_measurements_are_skipped_not_compared(tmp_path):
    # negative tokens/s were compared (-110.0%, 'regressed') and planned (-25 tok/s per user)
    cases = [(every_repeat("output_tokens_per_s", -100.0), "output_tokens_per_s is -100.0, not a possible tok/s value"),
             (every_repeat("tpot_ms", 1e400, "p99"), "tpot_ms.p99 is inf, not a possible ms value"),
             (every_repeat("tpot_ms", -5.0, "p99"), "tpot_ms.p99 is -5.0, not a possible ms value"),
             (every_repeat("eager_fraction", 2.0), "eager_fraction is 2.0, not a possible fraction value"),
             (every_repeat("padding_waste_pct", 1000.0), "padding_waste_pct is 1000.0, not a possible % value")]
    for change, message in cases:
        current = mutated_results(tmp_path, change)
        first = f"{current}/0001_O0-default.json: workload 'closed-c1': repeat #1: {message}"
        assert_one_error(invoke("compare", GATE / "baseline", current), "no current results loaded", first)
        assert_one_error(invoke("gate", "--baseline", GATE / "baseline", "--current", current), first)
        assert_one_error(invoke("plan", current, "--slo", "tpot_p99_ms=50"), "2 malformed files skipped; the first, "
                         + first)
        assert_one_error(invoke("report", current, "-o", tmp_path / "report"), "2 malformed files skipped; the first, "
                         + first)


def test_a_negative_startup_is_skipped_and_a_negative_graph_memory_delta_is_kept(tmp_path):
    def startup(key, value):
        def change(result):
            for start in [result["startup"], *result["startups"]]:
                start[key] = value
        return change

    current = mutated_results(tmp_path, startup("total_s", -12.0))
    assert_one_error(invoke("compare", GATE / "baseline", current),
                     f"{current}/0001_O0-default.json: 'startup': total_s is -12.0, not a possible s value")
    # graph memory is a free-memory delta: another allocation during capture can make it negative
    current = mutated_results(tmp_path, startup("graph_memory_bytes", -1024))
    result = invoke("compare", GATE / "baseline", current, "--metric", "graph_memory_bytes", "--format", "csv")
    assert result.exit_code == 0, result.output
    assert ",graph_memory_bytes,bytes,0.0,-1024.0," in result.stdout


def test_gate_refuses_a_threshold_that_could_never_fail():
    # change < -100% never happens: output_tokens_per_s:-1000 passed a real 10% drop
    for pct in ("-100", "-1000"):
        result = invoke("gate", "--baseline", GATE / "baseline", "--current", GATE / "current",
                        "--threshold", f"output_tokens_per_s:{pct}")
        assert_one_error(result, f"threshold for output_tokens_per_s must be above -100: a drop beyond {pct}% never "
                                 "happens, so it could never fail (to stop gating it: output_tokens_per_s:off)")
    result = invoke("gate", "--baseline", GATE / "baseline", "--current", GATE / "current",
                    "--threshold", "output_tokens_per_s:-99")
    assert result.exit_code == 0, result.output


def test_gate_refuses_two_reports_to_one_file(tmp_path):
    # the JSON report silently replaced the Markdown one
    same = tmp_path / "gate.md"
    result = invoke("gate", "--baseline", GATE / "baseline", "--current", GATE / "current",
                    "--markdown", same, "--json", tmp_path / "." / "gate.md")
    assert_one_error(result, f"--markdown and --json name the same file {tmp_path}/gate.md: one report would "
                             "overwrite the other")
    assert not same.exists()


def test_a_point_whose_reruns_differ_says_so_when_compared():
    # the synthetic fixture's O3-default was run twice under two config hashes; compared with itself the
    # message read 'baseline 0000000007/0000000008 vs current 0000000007/0000000008', as if the sides differed
    synthetic = Path(__file__).parent / "data" / "report" / "synthetic"
    assert_one_error(invoke("compare", synthetic, synthetic),
                     "O3-default (graphbench): config hash differs: baseline 0000000007/0000000008 vs current "
                     "0000000007/0000000008 (the baseline and the current results of this point differ among "
                     "themselves); pass --allow-mismatch")


def test_histogram_counts_too_large_to_sum_are_one_error(tmp_path):
    # two counts of 10^308 overflowed the normalising fsum (an OverflowError traceback in ladder and tune)
    histogram = tmp_path / "h.json"
    histogram.write_text('{"4": 1e308, "8": 1e308}')
    rows = tmp_path / "h.csv"
    rows.write_text("batch_size,count\n4,1e308\n4,1e308\n")
    for command in (["ladder"], ["tune", "--max-graphs", 2]):
        assert_one_error(invoke(*command, "--distribution", histogram),
                         f"{histogram}: count of batch size 4 must be a non-negative number (at most 1e+18), got 1e+308")
        assert_one_error(invoke(*command, "--distribution", rows),
                         f"{rows}:2: count must be a non-negative number (at most 1e+18), got '1e308'")


def test_an_integer_too_large_for_a_float_is_skipped_not_a_traceback(tmp_path):
    # JSON reads 1 followed by 400 zeros as an int: math.isnan/isfinite raised OverflowError (a traceback)
    big = 10**400
    cases = [(every_repeat("tpot_ms", big, "p99"), "tpot_ms.p99 is an integer of 401 digits, not a possible ms value"),
             (every_repeat("output_tokens_per_s", big),
              "'output_tokens_per_s' is an integer of 401 digits, not a finite number")]
    for change, message in cases:
        current = mutated_results(tmp_path, change)
        first = f"{current}/0001_O0-default.json: workload 'closed-c1': repeat #1: {message}"
        assert_one_error(invoke("compare", GATE / "baseline", current), "no current results loaded", first)
        assert_one_error(invoke("report", current, "-o", tmp_path / "report"), "2 malformed files skipped; the first, "
                         + first)


def test_an_environment_field_written_as_an_object_is_compared_as_its_json(tmp_path):
    # environment.gpu as an object was unhashable: compare and gate ended in a TypeError traceback
    def gpu_object(result):
        result["environment"]["gpu"] = {"name": "H200"}

    current = mutated_results(tmp_path, gpu_object)
    result = invoke("compare", GATE / "baseline", current)
    assert result.exit_code == 0, result.output
    assert 'warning: O0-default (graphbench): environment gpu differs: baseline None vs current {"name": "H200"}' \
        in result.stderr.splitlines()
    result = invoke("gate", "--baseline", GATE / "baseline", "--current", current)
    unchanged = invoke("gate", "--baseline", GATE / "baseline", "--current", GATE / "current" / "cpu-test")
    # the fixture's drop on O2, as without the edit: one process a side, so "cannot judge" (exit 3), no traceback
    assert result.exit_code == unchanged.exit_code == 3, result.output
    assert result.stdout.startswith("gate: CANNOT JUDGE") and "Traceback" not in result.output


def test_gate_names_a_report_path_that_is_a_symbolic_link_loop(tmp_path):
    # resolving it to compare the report paths raised RuntimeError('Symlink loop ...'): a traceback
    loop = tmp_path / "loop.json"
    loop.symlink_to(loop)
    result = invoke("gate", "--baseline", GATE / "baseline", "--current", GATE / "current", "--json", loop)
    assert_one_error(result, f"cannot write --json {loop}: a symbolic link loop")


def test_an_output_folder_that_is_a_link_to_nothing_is_refused_before_the_work(tmp_path):
    # exists() is False for a link loop or a dangling link, so the check passed, and plan and report failed to
    # make the folder only after all their work (a warning line printed first)
    loop, dangling = tmp_path / "loop", tmp_path / "dangling"
    loop.symlink_to(loop)
    dangling.symlink_to(tmp_path / "gone")
    for out in (loop, dangling):
        for args in (["plan", GATE / "baseline", "--slo", "tpot_p99_ms=50", "-o", out],
                     ["report", GATE / "baseline", "--output", out]):
            assert_one_error(invoke(*args), f"output path {out} is a link that leads to no folder")


def test_convert_refuses_an_output_folder_it_cannot_write_before_converting(tmp_path):
    # the folder was made only after the conversion (tens of seconds, progress bars on stderr), then
    # 'error: Not a directory: ...' without saying which option; a failed conversion leaves no folder
    pytest.importorskip("gguf")
    source = tmp_path / "model.gguf"
    source.write_bytes(b"GGUF" + bytes(60))  # never read: the output is checked first
    (tmp_path / "file").write_text("x")
    for out, why in ((tmp_path / "file" / "ckpt", "Not a directory"), ("/proc/self/graphbench-ckpt", "")):
        assert_one_error(invoke("convert", source, out), f"cannot write the checkpoint folder {out}: {why}",
                         "name a folder you can write")
    assert_one_error(invoke("convert", source, tmp_path / "new" / "ckpt"), "is not a GGUF model")
    assert not (tmp_path / "new").exists()


def test_a_plot_folder_that_cannot_be_written_is_refused_before_the_table(tmp_path):
    # /proc/self passed the check (it is a folder): the whole table was printed, then 'cannot write plot
    # ...: [Errno 2] No such file or directory: /proc/self/.tmp-x.png-...' (the temporary file's name)
    for command in (["ladder"], ["tune", "--model", "uniform:1-64", "--max-graphs", 3]):
        result = invoke(*command, "--plot", "/proc/self/waste.png")
        assert_one_error(result, "cannot write plot /proc/self/waste.png: No such file or directory in /proc/self: "
                                 "give a --plot path in a folder you can write")
        assert result.stdout == ""
    (tmp_path / "file").write_text("x")
    assert_one_error(invoke("ladder", "--plot", tmp_path / "file" / "waste.png"),
                     f"plot directory is not a folder: {tmp_path / 'file'}")
    result = invoke("ladder", "--plot", tmp_path / "waste.png")
    assert result.exit_code == 0 and sorted(f.name for f in tmp_path.iterdir()) == ["file", "waste.png"], result.output


SYNTHETIC = Path(__file__).parent / "data" / "report" / "synthetic"


def test_an_output_folder_the_system_refuses_is_found_before_the_work(tmp_path):
    # os.access passes root in /sys (EPERM on create): plan printed its whole table, then 'cannot write the
    # plan into /sys/kernel/...: [Errno 1] Operation not permitted: ...'; report drew nothing but said it raw
    for command in (["plan", SYNTHETIC, "--slo", "tpot_p99_ms=50"], ["report", GATE / "baseline"]):
        result = invoke(*command, "-o", "/sys/kernel/graphbench-out")
        assert_one_error(result, "cannot create output folder /sys/kernel/graphbench-out: ", " in /sys/kernel: "
                         "name a folder you can write")
        assert result.stdout == ""
    result = invoke("plan", SYNTHETIC, "--slo", "tpot_p99_ms=50", "-o", tmp_path / "plan")
    assert result.exit_code == 0 and sorted(f.name for f in (tmp_path / "plan").iterdir())[:2] == ["plan.csv", "plan.json"]


def test_sweep_refuses_a_report_folder_it_cannot_write_before_any_point(tmp_path):
    # --report was first used after the last point: a whole sweep ran, then 'output path exists and is not a
    # folder' (or a raw [Errno 1] under /sys); the results folder it had made stayed behind
    (tmp_path / "file").write_text("x")
    for report, message in ((tmp_path / "file", f"output path exists and is not a folder: {tmp_path / 'file'}"),
                            ("/sys/kernel/graphbench-report", "cannot create output folder /sys/kernel/graphbench-report")):
        result = invoke("sweep", "--model", "tiny-llama", "--device", "cpu", "--levels", 0, "--ladders", "default",
                        "--concurrency", 1, "--num-requests", 1, "--repeats", 1, "--rounds", 1,
                        "--results", tmp_path / "results", "--report", report)
        assert_one_error(result, message)
        assert result.stdout == "" and not (tmp_path / "results").exists()


def test_a_run_refused_at_start_leaves_no_results_folder(tmp_path):
    # the results folder was made before the engine started: a checkpoint that failed to load left it, empty
    checkpoint = tmp_path / "checkpoint"
    checkpoint.mkdir()
    (checkpoint / "config.json").write_text(json.dumps({
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": 64, "hidden_size": 32,
        "intermediate_size": 64, "num_hidden_layers": 1, "num_attention_heads": 4, "num_key_value_heads": 2,
        "max_position_embeddings": 64}))
    (checkpoint / "model.safetensors").write_bytes(b"\x08" + bytes(7) + b"{}")  # truncated: no tensors
    results = tmp_path / "results" / "new"
    result = invoke("run", "--model", checkpoint, "-O", 0, "--device", "cpu", "--concurrency", 1, "--num-requests", 1,
                    "--prompt-len", 4, "--output-len", 2, "--repeats", 1, "--results", results, "--quiet")
    assert_one_error(result, f"cannot read {checkpoint / 'model.safetensors'}", "(corrupt or truncated")
    assert not (tmp_path / "results").exists()
    assert_one_error(invoke("run", "--device", "cpu", "--results", "/sys/kernel/graphbench-results", "--quiet"),
                     "cannot create the results folder /sys/kernel/graphbench-results: ",
                     " in /sys/kernel: name a folder you can write (--results)")


def test_gate_writes_into_a_device_or_a_links_target_never_over_them(tmp_path):
    # a character device (/dev/null, /dev/stdout on a terminal) was replaced by a regular file (write_atomic's
    # rename: as root, /dev/null itself), and a link by a file while its target kept the old text
    target = tmp_path / "target.md"
    target.write_text("old")
    (tmp_path / "link.md").symlink_to(target)
    outputs = ["--markdown", tmp_path / "link.md"]
    if os.geteuid() == 0:  # (only root makes device nodes) a null device of our own, not the system's
        os.mknod(tmp_path / "null", 0o600 | S_IFCHR, os.makedev(1, 3))
        outputs += ["--json", tmp_path / "null"]
    result = invoke("gate", "--baseline", GATE / "baseline", "--current", GATE / "current", *outputs)
    assert result.exit_code == 3, result.output  # the fixture's: one process a side
    assert (tmp_path / "link.md").is_symlink() and target.read_text().startswith("## ")
    assert os.geteuid() != 0 or (tmp_path / "null").is_char_device()


def test_gate_finds_a_report_file_it_cannot_write_before_writing_the_others(tmp_path):
    # os.access passes root under /sys: the Markdown and JUnit reports were written, then the JSON failed
    result = invoke("gate", "--baseline", GATE / "baseline", "--current", GATE / "current", "--markdown",
                    tmp_path / "gate.md", "--junit", tmp_path / "gate.xml", "--json", "/sys/kernel/gate.json")
    assert_one_error(result, "cannot write --json /sys/kernel/gate.json: ", " in /sys/kernel: name a file in a folder "
                     "you can write")
    assert list(tmp_path.iterdir()) == []


def test_gate_refuses_two_thresholds_for_one_metric():
    # the later one silently won (plan refuses an SLO given twice)
    for first, second in (("tpot_p99_ms:5", "tpot_p99_ms:10"), ("tokens_per_s:-5", "output_tokens_per_s:off")):
        metric = second.split(":")[0]
        result = invoke("gate", "--baseline", GATE / "baseline", "--current", GATE / "current",
                        "--threshold", first, "--threshold", second)
        assert_one_error(result, f"threshold for {metric} given twice ({first!r} and {second!r}): give it once")
    result = invoke("gate", "--baseline", GATE / "baseline", "--current", GATE / "current",
                    "--threshold", "tpot_p99_ms:5", "--threshold", "tpot_p99_ms:5")  # the same twice: no contradiction
    assert result.exit_code == 3, result.output


def test_a_cache_root_that_is_a_file_is_an_error_not_an_empty_cache(tmp_path, monkeypatch):
    # cache list said 'compile cache is empty: no entries under FILE/torch_compile_cache' (exit 0)
    root = tmp_path / "file"
    root.write_text("x")
    monkeypatch.setenv("GRAPHBENCH_CACHE_ROOT", str(root))
    for command in (["list"], ["clear", "--yes"], ["diff", "01", "02"]):
        assert_one_error(invoke("cache", *command), f"GRAPHBENCH_CACHE_ROOT={str(root)!r} is not a folder: give a "
                         "folder, or unset it for ~/.cache/graphbench")
    assert invoke("ladder", "--max-num-seqs", 8).exit_code == 0  # commands that use no cache run


def test_an_empty_config_or_sweep_file_is_an_error_not_the_defaults(tmp_path):
    # a zero-byte (truncated) or comment-only TOML set nothing: generate ran the defaults, sweep the default grid
    for text in ("", "# nothing set\n"):
        config = tmp_path / "config.toml"
        config.write_text(text)
        message = f"config file {config} is empty: it sets no key"
        assert_one_error(invoke("generate", "--config", config, "--device", "cpu", "-O", 0, "-p", "1"), message)
        assert_one_error(invoke("sweep", "--sweep-file", config, "--dry-run"), message)
        assert_one_error(invoke("cache", "diff", config, config), message)


def test_run_on_cuda_without_one_is_one_line_before_any_progress(tmp_path):
    import torch

    if torch.cuda.is_available():
        pytest.skip("a CUDA device is visible")
    # the run printed its start's progress line ('O2_default: warm start') before the device's error
    result = invoke("run", "--device", "cuda", "--concurrency", "1", "--results", tmp_path / "results")
    assert_one_error(result, "--device cuda was asked for but no CUDA device is available; use --device cpu")
    assert not (tmp_path / "results").exists()


def rounds_of_one_point(tmp_path: Path, name: str, change=None) -> Path:
    """The gate's current O0 point as three rounds of one sweep (three processes, so compare tests and
    bootstraps), each a little faster than the last; `change(result)` applied to each."""
    folder = tmp_path / name
    folder.mkdir()
    source = json.loads((GATE / "current" / "cpu-test" / "0001_O0-default.json").read_text())
    for index in (1, 2, 3):
        result = json.loads(json.dumps(source))
        result["sweep"] = {"identity": {"config": {"optimization_level": 0}, "system": "graphbench"},
                           "round": {"id": "0123456789ab", "index": index, "of": 3, "position": index, "seed": 1}}
        for workload in result["workloads"]:
            for repeat in workload["repeats"]:
                repeat["output_tokens_per_s"] *= 1 + 0.05 * index
        if change is not None:
            change(result)
        (folder / f"000{index}_O0-default.json").write_text(json.dumps(result))
    return folder


def test_compare_refuses_a_bootstrap_seed_numpy_cannot_take(tmp_path):
    # --seed -1 reached numpy's default_rng: 'ValueError: expected non-negative integer' (a traceback, exit 1)
    side = rounds_of_one_point(tmp_path, "side")
    for seed in ("-1", str(2**64)):
        assert_one_error(invoke("compare", side, side, "--bootstrap", 100, "--seed", seed),
                         f"the bootstrap's seed (--seed) must be an integer in 0..2**63-1, got {seed}")
    result = invoke("compare", side, side, "--bootstrap", 100, "--seed", 7)
    assert result.exit_code == 0, result.output


def test_a_rounds_startup_that_is_not_a_number_names_its_file(tmp_path):
    # the error read 'round: startup.total_s is 'x', not a number': no file to fix
    def text_startup(result):
        result["startup"]["total_s"] = "x"

    side = rounds_of_one_point(tmp_path, "side", text_startup)
    assert_one_error(invoke("compare", GATE / "baseline", side, "--allow-mismatch"),
                     f"{side}/0001_O0-default.json (round 1): startup.total_s is 'x', not a number")


def test_run_refuses_an_empty_workload_option_instead_of_the_default_traffic(tmp_path):
    # --request-rate '' (an unset shell variable) ran the whole default traffic (three levels and a rate);
    # --trace '' and --lora-share '' were dropped silently; --request-rate 1,,2 read as 1,2
    results = tmp_path / "results"
    for option in ("--request-rate", "--trace", "--lora-share"):
        for value in ("", " "):
            assert_one_error(invoke("run", "--device", "cpu", option, value, "--results", results),
                             f"{option} is empty (got {value!r}): give a value")
    assert_one_error(invoke("run", "--device", "cpu", "--request-rate", "1,,2", "--results", results),
                     "--request-rate must be numbers like 2,8.5; got '1,,2'")
    assert not results.exists()


def test_sweep_refuses_an_empty_workload_option_as_run_does(tmp_path):
    # --concurrency '' (or --prompt-len '', ...) swept the default levels; `run --concurrency ''` refuses it
    for option in ("--concurrency", "--prompt-len", "--output-len", "--prompt-kind", "--lora-share"):
        assert_one_error(invoke("sweep", "--dry-run", "--levels", 0, "--ladders", "default", "--peers", "none",
                                "--device", "cpu", option, "", "--results", tmp_path / "results"),
                         f"{option} is empty (got ''): give a value")


def test_a_lora_share_without_adapters_is_refused_before_the_start(tmp_path):
    # the run started the engine (its progress lines), then failed at the first request; a sweep planned
    # (and ran) every point to fail the same way
    result = invoke("run", "--device", "cpu", "-O", 0, "--concurrency", 1, "--lora-share", "0,0.5",
                    "--results", tmp_path / "results")
    assert_one_error(result, "--lora-share 0.5 (workload closed-c1-lora0.5) needs adapters: give --lora-modules")
    assert result.stdout == "" and not (tmp_path / "results").exists()
    assert_one_error(invoke("sweep", "--dry-run", "--levels", 0, "--ladders", "default", "--peers", "none",
                            "--device", "cpu", "--concurrency", 1, "--lora-share", "0.5"),
                     "sweep point O0_default: --lora-share 0.5 (workload closed-c1-lora0.5) needs adapters")


def test_a_tensor_parallel_size_the_model_cannot_split_is_refused_before_the_start(tmp_path):
    # the error came after the start's progress line ('O2_default: warm start'); a sweep's dry run listed it
    message = "--tensor-parallel-size 3 must divide the model's 4 attention heads"
    result = invoke("run", "--device", "cpu", "--concurrency", 1, "--tensor-parallel-size", 3,
                    "--results", tmp_path / "results")
    assert_one_error(result, message)
    assert not (tmp_path / "results").exists()
    assert_one_error(invoke("sweep", "--dry-run", "--levels", 0, "--ladders", "default", "--peers", "none",
                            "--device", "cpu", "--grid", "parallel.tensor_parallel_size=3"),
                     "sweep point O0_default_tensor_parallel_size=3: " + message)


def test_an_empty_workload_value_in_a_sweep_file_is_an_error_not_the_default_traffic(tmp_path):
    # [workload] concurrency = "" (or []) swept the default levels and rate, as if the key were absent
    for text in ('""', "[]", '" "'):
        sweep_file = tmp_path / "sweep.toml"
        sweep_file.write_text(f"[workload]\nconcurrency = {text}\n")
        assert_one_error(invoke("sweep", "--dry-run", "--device", "cpu", "--sweep-file", sweep_file),
                         f"{sweep_file}: workload.concurrency is empty (", "give a value, or leave the key out")


@pytest.mark.parametrize("args, named", [
    (["report", "{r}", "-o", ""], "-o is empty"),
    (["report", "{r}", "--output="], "--output is empty"),
    (["plan", "{r}", "--output", " "], "--output is empty"),
    (["ladder", "--max-num-seqs", "8", "--plot", ""], "--plot is empty"),
    (["tune", "--from", "", "--max-graphs", "3"], "--from is empty"),
    (["gate", "-b", "", "-c", "{r}"], "-b is empty"),
    (["report", ""], "a path argument is empty"),
    (["compare", "{r}", ""], "a path argument is empty"),
])
def test_an_empty_path_is_refused_not_read_as_the_current_folder(tmp_path, monkeypatch, args, named):
    # `-o "$OUT"` with OUT unset: the parser turns "" into ".", and the command read or wrote the folder it ran in
    monkeypatch.chdir(tmp_path)
    result = invoke(*(a.format(r=tmp_path / "results") for a in args))
    assert_one_error(result, named, "give a path")
    assert list(tmp_path.iterdir()) == []  # nothing written where it ran


def test_an_empty_value_of_an_option_that_is_no_path_is_left_to_that_option(tmp_path):
    # --title "" is a title, not a path: the report reads its results as before (here: none there)
    assert_one_error(invoke("report", "--title", "", tmp_path / "none"), "no such result file or folder")
