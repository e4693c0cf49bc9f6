"""Misleading-but-quiet behaviours of GPU-free commands a fuzz pass found: each now ends in one `error:`
line with exit code 2, or prints what is true (the style of tests/test_cli_bad_inputs.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.test_cli_bad_inputs import assert_one_error, invoke, write_json


def test_a_closed_loop_of_one_request_refuses_a_weight_it_cannot_spread():
    # closed:1:0.5 printed "weight 0.5 at C" while all the weight was at 1 (no size below C for the rest)
    assert_one_error(invoke("tune", "--model", "closed:1:0.5", "--max-graphs", 2),
                     "bad model 'closed:1:0.5': at C = 1 there is no size below C for the rest (1 - W) to go to, "
                     "so all the weight is at 1: give closed:1 (or W = 1)")
    result = invoke("tune", "--model", "closed:1:1", "--max-graphs", 2)
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[0] == ("distribution: model closed-loop concurrency 1, weight 1 at C "
                                             "(1 sizes in 1..1, mean 1.00)")


def test_ladders_with_no_rung_average_up_to_the_cap_not_over_size_1():
    # 1 + k = 100001 is past the cap 512: no ladder has a size, and the averages said "batch sizes 1..1"
    result = invoke("ladder", "--num-speculative-tokens", 100000, "--format", "json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["averaged_over"] == "batch sizes 1..512 equally likely"
    assert [(s["sizes"], s["eager_fraction_pct"]) for s in doc["ladders"]] == [([], 100.0), ([], 100.0)]
    result = invoke("ladder", "--num-speculative-tokens", 100000, "--max-num-batched-tokens", 300)
    assert "averages over batch sizes 1..300 equally likely (eager = no padding)" in result.stdout


TUNE_RESULTS = Path(__file__).parent / "data" / "tune" / "results"
BENCH_SERVE = Path(__file__).parent / "data" / "vllm" / "bench-serve-detailed.json"


def test_a_result_given_twice_is_read_once_and_said_so():
    # --from X --from X summed X's histograms twice ("6 result(s)")
    one = TUNE_RESULTS / "h200" / "0001_small-ladder.json"
    result = invoke("tune", "--from", TUNE_RESULTS, "--from", TUNE_RESULTS / "h200" / "..", "--from", one,
                    "--max-graphs", 3)
    assert result.exit_code == 0, result.output
    assert result.stderr.splitlines()[:2] == [
        f"warning: --from {TUNE_RESULTS / 'h200' / '..'} is given twice (as {TUNE_RESULTS}): read once",
        f"warning: --from {one} is inside --from {TUNE_RESULTS}: read once",
    ]
    assert result.stdout.splitlines()[0] == ("distribution: measured batch sizes (3 result(s)) "
                                             "(9 sizes in 1..600, mean 24.12)")
    result = invoke("tune", "--from", BENCH_SERVE, "--from", BENCH_SERVE, "--max-graphs", 3)
    assert result.exit_code == 0, result.output
    assert result.stderr.splitlines()[0] == f"warning: --from {BENCH_SERVE} is given twice: read once"
    assert "(3 requests, concurrency 2;" in result.stdout.splitlines()[0]


def test_a_bench_serve_errors_key_of_the_wrong_shape_names_the_file_and_key(tmp_path):
    # a string, or a list one entry short, was ignored: every request counted as successful
    data = json.loads(BENCH_SERVE.read_text())
    cases = [
        ("Bad Request", "key errors must be a list (one error string per request, \"\" for none), got str"),
        (["", "", "Bad Request"], "key errors has 3 entries but input_lens has 4"),
        (["", "", 1, ""], "key errors[2] must be a string or null, got 1"),
    ]
    for errors, message in cases:
        trace = write_json(tmp_path / "serve.json", {**data, "errors": errors})
        assert_one_error(invoke("tune", "--from", trace, "--max-graphs", 3), f"{trace}: {message}")
    trace = write_json(tmp_path / "serve.json", {**data, "errors": None})  # null: no request failed
    result = invoke("tune", "--from", trace, "--max-graphs", 3)
    assert result.exit_code == 0, result.output
    assert result.stderr.splitlines() == [f"warning: {trace}: 1 failed request(s) left out"]  # its output_lens 0


def test_targets_and_budgets_past_any_deployment_are_refused_with_the_bound():
    # 1e300 printed GPU counts and MiB budgets hundreds of digits long
    synthetic = Path(__file__).parent / "data" / "report" / "synthetic"
    for flag, kind in (("--target-rps", "requests/s"), ("--target-users", "concurrent users")):
        assert_one_error(invoke("plan", synthetic, "--slo", "tpot_p99_ms=50", flag, "1e300"),
                         f"target {kind} must be at most 1e+09 (past any deployment: the GPUs needed would mean "
                         "nothing), got 1e+300")
    result = invoke("plan", synthetic, "--slo", "tpot_p99_ms=50", "--target-users", "1e9", "--format", "json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["configurations"][0]["gpus_needed"] == 15_625_000
    for value, shown in (("1e300", "1e+300"), ("inf", "inf")):
        assert_one_error(invoke("tune", "--from", TUNE_RESULTS, "--max-graphs", 4, "--memory-budget-mib", value),
                         "--memory-budget-mib must be positive and at most 1048576 (1 TiB, more than any GPU "
                         f"holds), got {shown}")


def test_replay_limits_that_can_never_be_valid_are_errors_whatever_the_source():
    # with a source that is not a request trace, 0 only warned "not used" and the command exited 0
    for flag in ("--block-size", "--num-kv-blocks", "--max-num-batched-tokens"):
        for value in (0, -3):
            assert_one_error(invoke("tune", "--model", "closed:8", "--max-graphs", 3, flag, value),
                             f"{flag} must be a positive integer, got {value}")
    assert_one_error(invoke("tune", "--from", BENCH_SERVE, "--max-graphs", 3, "--num-kv-blocks", 0),
                     "--num-kv-blocks must be a positive integer, got 0")
    result = invoke("tune", "--model", "closed:8", "--max-graphs", 3, "--block-size", 32)  # valid, just unused
    assert result.exit_code == 0, result.output
    assert result.stderr.splitlines() == ["warning: --max-num-batched-tokens, --block-size and --num-kv-blocks "
                                          "shape a request trace's replay only; this source is not one, so they "
                                          "are not used"]


def test_distribution_files_read_sizes_as_ascii_digits_as_step_curves_do(tmp_path):
    # int('1_000') is 1000, but a step curve's "1_000" size is refused: the same {size: value} file kind
    cases = [
        ("sizes.txt", "1_000\n4\n", "sizes.txt:1: batch size must be a positive integer, got '1_000'"),
        ("sizes.txt", "\u0661\u0662\n", "sizes.txt:1: batch size must be a positive integer, got '\u0661\u0662'"),
        ("sizes.csv", "batch_size,count\n1_000,5\n", "sizes.csv:2: batch_size must be a positive integer, got '1_000'"),
        ("sizes.csv", "batch_size,count\n8,1_000\n", "sizes.csv:2: count must be a number, got '1_000'"),
        ("sizes.json", '{"1_000": 3}', "sizes.json: key '1_000' must be a positive integer, got '1_000'"),
        # two columns for one value: the first had been read, the other passed over
        ("sizes.csv", "batch_size,count,count\n8,1,5\n", "sizes.csv:1: the header names count and count: give one "
                                                          "column of count or weight or frequency"),
        ("sizes.csv", "batch_size,num_tokens,count\n8,9,1\n", "sizes.csv:1: the header names batch_size and "
                                                               "num_tokens: give one column of batch_size or num_tokens"),
    ]
    for name, text, message in cases:
        path = tmp_path / name
        path.write_text(text)
        assert_one_error(invoke("ladder", "--distribution", path), f"{tmp_path / message}")
    path = tmp_path / "sizes.csv"
    path.write_text("batch_size,count\n 8 ,1e3\n9,.5\n")  # spaces and float counts stay fine
    result = invoke("ladder", "--distribution", path, "--format", "json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["averaged_over"] == f"distribution {path} (2 sizes)"


def test_a_vllm_log_row_reads_ascii_digits_only(tmp_path):
    # int() took '1_000' as 1000 and the Arabic-Indic '\u0661' as 1: rows vLLM never writes were counted
    head = ("INFO 11-30 10:05:10 [cuda_graph.py:118] **CUDAGraph Stats:**\n"
            "INFO 11-30 10:05:10 [cuda_graph.py:118] | Unpadded Tokens | Padded Tokens | Num Paddings | Runtime Mode | Count |\n"
            "INFO 11-30 10:05:10 [cuda_graph.py:118] |---|---|---|---|---|\n")
    for row in ("1_000 | 1_000 | 0 | FULL | 3", "\u0661 | \u0661 | 0 | FULL | 3", "4 | 4 | 0 | FULL | \u0663"):
        log = tmp_path / "vllm.log"
        log.write_text(f"{head}INFO 11-30 10:05:10 [cuda_graph.py:118] | {row} |\nINFO 11-30 10:05:11 [x.py:1] done\n")
        assert_one_error(invoke("tune", "--from", log, "--max-graphs", 3),
                         f"{log}:4: a cudagraph-metrics row needs integer tokens, paddings and count, got ")


def test_a_bench_serve_itls_key_of_the_wrong_type_is_said(tmp_path):
    # a string or an object was taken for 'no latencies recorded' (errors and start_times were checked)
    data = json.loads(BENCH_SERVE.read_text())
    for itls, kind in (("0.004", "str"), ({"0": [0.004]}, "dict"), (0.004, "float")):
        trace = write_json(tmp_path / "serve.json", {**data, "itls": itls})
        assert_one_error(invoke("tune", "--from", trace, "--max-graphs", 3),
                         f"{trace}: key itls must be a list (one list of seconds per request), got {kind}")
    trace = write_json(tmp_path / "serve.json", {**data, "itls": None})  # null: not recorded
    assert invoke("tune", "--from", trace, "--max-graphs", 3).exit_code == 0


def test_a_run_trace_line_that_is_not_a_request_object_says_what_it_lacks(tmp_path):
    # a JSON array of the requests ended in '(list indices must be integers or slices, not str)', a line
    # without arrival_s in "('arrival_s')": Python's exception text, not what the line lacks
    cases = [('[{"arrival_s": 0, "prompt_len": 4, "output_len": 2}]',
              " as one JSON object a line (JSON Lines), got a list"),
             ('{"input_len": 4, "output_len": 2}', ": the request lacks arrival_s, prompt_len"),
             ("not json", " as one JSON object a line (JSON Lines): Expecting value: line 1 column 1 (char 0)")]
    for text, message in cases:
        trace = tmp_path / "trace.jsonl"
        trace.write_text(text + "\n")
        result = invoke("run", "--model", "tiny-llama", "-O", 0, "--device", "cpu", "--repeats", 1, "--quiet",
                        "--results", tmp_path / "results", "--trace", trace)
        assert_one_error(result, f"{trace}:1: expected arrival_s, prompt_len, output_len{message}")
    assert not (tmp_path / "results").exists()


def test_a_workload_given_twice_is_refused_not_counted_as_two_processes(tmp_path):
    # --concurrency 1,1 measured closed-c1 twice in one result; compare then counted it as 2/2 processes
    message = "is given twice (--concurrency, --request-rate and --lora-share values repeated, or equal as shown)"
    for flag, values, name in (("--concurrency", "1,1", "closed-c1"), ("--request-rate", "5,5.0000001", "poisson-r5")):
        result = invoke("run", "--model", "tiny-llama", "-O", 0, "--device", "cpu", flag, values, "--num-requests", 1,
                        "--prompt-len", 4, "--output-len", 2, "--repeats", 1, "--results", tmp_path, "--quiet")
        assert_one_error(result, f"workload {name} {message}: give each value once")
    assert_one_error(invoke("sweep", "--dry-run", "--concurrency", "4,2,4"), f"workload closed-c4 {message}")
    assert list(tmp_path.iterdir()) == []


def test_a_sweep_axis_value_given_twice_is_named(tmp_path):
    # one axis with a repeated value said 'sweep points must have distinct labels (two axes give the same label)'
    for args, message in ((["--levels", "0,0"], "sweep axis level gives 0 twice"),
                          (["--ladders", "default,interactivity,default"], "sweep axis ladder gives default twice"),
                          (["--grid", "max_num_seqs=8,16,8"], "sweep axis max_num_seqs gives 8 twice"),
                          (["--peers", "hf-eager,hf-eager"], "sweep axis peers gives hf-eager twice")):
        assert_one_error(invoke("sweep", "--dry-run", *args), f"{message}: give each value once")
    sweep_file = tmp_path / "sweep.toml"
    sweep_file.write_text("[grid]\nmax_num_seqs = [8, 8]\n")
    assert_one_error(invoke("sweep", "--dry-run", "--sweep-file", sweep_file), "sweep axis max_num_seqs gives 8 twice")


def test_a_splitting_op_that_names_no_op_is_refused():
    # 'attention' (no namespace) matched no op: the graph silently went unsplit, as with 'none'
    for ops in ("attention", "graphbench::", "bogus,graphbench::attention"):
        assert_one_error(invoke("generate", "--model", "tiny-llama", "-O", 0, "--device", "cpu", "--max-tokens", 2,
                                "-p", "1,2", "--splitting-ops", ops),
                         "splitting_ops must be a list of op names like graphbench::attention ([] or 'none': no split)")
    for ops in ("graphbench::attention", "none"):
        result = invoke("generate", "--model", "tiny-llama", "-O", 0, "--device", "cpu", "--max-tokens", 2,
                        "-p", "1,2", "--splitting-ops", ops)
        assert result.exit_code == 0, result.output


def test_a_size_given_twice_as_a_json_key_is_refused_not_overwritten(tmp_path):
    # json.loads keeps the last value: {"4": 2, "4": 3} read as 3 steps of size 4 (CSV rows, and "04" with
    # "4", are summed), and a curve's second "1" replaced the first
    histogram = tmp_path / "sizes.json"
    histogram.write_text('{"4": 2, "4": 3, "8": 1}')
    for command in (["ladder"], ["tune", "--max-graphs", 2]):
        assert_one_error(invoke(*command, "--distribution", histogram),
                         f"{histogram}: key '4' is given twice in one object (JSON keeps only the last value): give it once")
    curve = tmp_path / "curve.json"
    curve.write_text('{"kind": "graphbench-step-curve", "schema_version": 1, "graph_ms": {"1": 1.0, "1": 5.0, '
                     + ", ".join(f'"{n}": 1.0' for n in range(2, 9)) + "}}")
    assert_one_error(invoke("tune", "--model", "uniform:1-8", "--top", 8, "--max-graphs", 2, "--objective", "time",
                            "--curve", curve), f"{curve}: key '1' is given twice in one object")


def test_a_sweep_whose_lengths_pass_a_points_context_is_refused_before_it_runs(tmp_path):
    # every point's run refused them (exit 2 each), so the sweep wrote failed results and a report, exit 1
    checkpoint = tmp_path / "checkpoint"
    checkpoint.mkdir()
    write_json(checkpoint / "config.json", {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": 64, "hidden_size": 32,
        "intermediate_size": 64, "num_hidden_layers": 1, "num_attention_heads": 4, "num_key_value_heads": 2,
        "max_position_embeddings": 64})
    result = invoke("sweep", "--model", checkpoint, "--device", "cpu", "--levels", 0, "--ladders", "default",
                    "--rounds", 1, "--results", tmp_path / "results")
    assert_one_error(result, "sweep point O0_default: --prompt-len uniform:32-96 + --output-len uniform:8-24 reach "
                             "120 tokens, over max_model_len 64 (--max-model-len)")
    assert not (tmp_path / "results").exists()
    assert_one_error(invoke("sweep", "--dry-run", "--grid", "max_model_len=64,2048", "--prompt-len", 100),
                     "sweep point O0_default_max_model_len=64: --prompt-len 100 + --output-len")


def _tiny_checkpoint(folder: Path, change=None) -> Path:
    """A one-layer Llama checkpoint (config.json + model.safetensors) saved by safetensors; change(tensors)
    edits it first."""
    torch = pytest.importorskip("torch")
    from safetensors.torch import save_file

    folder.mkdir(parents=True, exist_ok=True)
    write_json(folder / "config.json", {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": 64, "hidden_size": 32,
        "intermediate_size": 64, "num_hidden_layers": 1, "num_attention_heads": 4, "num_key_value_heads": 2,
        "max_position_embeddings": 64, "tie_word_embeddings": False})
    shapes = {"embed_tokens": (64, 32), "norm": (32,), "layers.0.input_layernorm": (32,),
              "layers.0.post_attention_layernorm": (32,), "layers.0.self_attn.q_proj": (32, 32),
              "layers.0.self_attn.k_proj": (16, 32), "layers.0.self_attn.v_proj": (16, 32),
              "layers.0.self_attn.o_proj": (32, 32), "layers.0.mlp.gate_proj": (64, 32),
              "layers.0.mlp.up_proj": (64, 32), "layers.0.mlp.down_proj": (32, 64)}
    tensors = {f"model.{k}.weight": torch.full(v, 0.01) for k, v in shapes.items()}
    tensors["lm_head.weight"] = torch.full((64, 32), 0.01)
    if change is not None:
        change(tensors)
    save_file(tensors, str(folder / "model.safetensors"))
    return folder


def test_a_broken_checkpoint_is_refused_before_the_start_ups_progress(tmp_path):
    # `run` printed 'O1_default: warm start' on stderr, then the loader's error; a sweep ran each point into
    # the same error in its own process and exited 1 with failed results and a report
    def wrong_shape(tensors):
        tensors["model.layers.0.mlp.down_proj.weight"] = tensors["model.layers.0.mlp.down_proj.weight"][:, :32].contiguous()

    def missing(tensors):
        del tensors["model.layers.0.self_attn.v_proj.weight"]

    def integer(tensors):
        tensors["model.norm.weight"] = tensors["model.norm.weight"].int()

    cases = [(wrong_shape, "checkpoint weight model.layers.0.mlp.down_proj.weight has shape (32, 32), expected (32, 64)"),
             (missing, "checkpoint {checkpoint} lacks 1 weight(s), e.g. layers.0.self_attn.v_proj.weight"),
             (integer, "checkpoint weight model.norm.weight has dtype I32, not a floating-point type")]
    for i, (change, message) in enumerate(cases):
        checkpoint = _tiny_checkpoint(tmp_path / f"checkpoint{i}", change)
        message = message.format(checkpoint=checkpoint)
        result = invoke("run", "--model", checkpoint, "-O", 0, "--device", "cpu", "--concurrency", 1, "--num-requests", 1,
                        "--prompt-len", 4, "--output-len", 2, "--repeats", 1, "--results", tmp_path / "results")
        assert_one_error(result, message)
        result = invoke("sweep", "--model", checkpoint, "--device", "cpu", "--levels", 0, "--ladders", "default",
                        "--rounds", 1, "--prompt-len", 8, "--output-len", 4, "--results", tmp_path / "results")
        assert_one_error(result, f"sweep point O0_default: {message}")
    assert not (tmp_path / "results").exists()
    result = invoke("run", "--model", _tiny_checkpoint(tmp_path / "good"), "-O", 0, "--device", "cpu", "--concurrency", 1,
                    "--num-requests", 1, "--prompt-len", 4, "--output-len", 2, "--repeats", 1, "--quiet",
                    "--results", tmp_path / "results")
    assert result.exit_code == 0, result.output


def test_a_broken_lora_adapter_is_refused_before_the_start_ups_progress(tmp_path):
    # as a broken checkpoint: 'O0_default: warm start' came first, and a sweep's points each failed (exit 1)
    torch = pytest.importorskip("torch")
    from safetensors.torch import save_file

    adapter = tmp_path / "adapter"
    adapter.mkdir()
    write_json(adapter / "adapter_config.json", {"r": 4, "lora_alpha": 8, "target_modules": ["q_proj"],
                                                 "bias": "none", "peft_type": "LORA"})
    prefix = "base_model.model.model.layers.0.self_attn.q_proj"
    save_file({f"{prefix}.lora_A.weight": torch.full((4, 64), float("nan")),
               f"{prefix}.lora_B.weight": torch.zeros(64, 4)}, str(adapter / "adapter_model.safetensors"))
    message = (f"LoRA adapter a: tensor {prefix}.lora_A.weight in {adapter / 'adapter_model.safetensors'} holds NaN "
               "or infinity")
    result = invoke("run", "--model", "tiny-llama", "-O", 0, "--device", "cpu", "--concurrency", 1, "--num-requests", 1,
                    "--prompt-len", 4, "--output-len", 2, "--repeats", 1, "--results", tmp_path / "results",
                    "--lora-modules", f"a={adapter}", "--lora-share", 0.5)
    assert_one_error(result, message)
    result = invoke("sweep", "--model", "tiny-llama", "--device", "cpu", "--levels", 0, "--ladders", "default",
                    "--rounds", 1, "--prompt-len", 8, "--output-len", 4, "--results", tmp_path / "results",
                    "--grid", f"lora_modules=a={adapter}", "--lora-share", 0.5)
    assert_one_error(result, "sweep point O0_default_modules=a=", message)
    assert not (tmp_path / "results").exists()


def test_a_cache_root_a_compiling_start_would_refuse_is_refused_before_it(tmp_path, monkeypatch):
    # the engine checked the root while compiling: its mode note ('cudagraph mode PIECEWISE -> NONE ...') came
    # first on stderr, and a sweep's -O1 points each failed on it (exit 1)
    root = tmp_path / "shared"
    root.mkdir()
    root.chmod(0o777)
    monkeypatch.setenv("GRAPHBENCH_CACHE_ROOT", str(root))
    message = f"cache root {root} is owned or writable by another user"
    assert_one_error(invoke("generate", "--model", "tiny-llama", "-O", 1, "--device", "cpu", "--max-tokens", 2,
                            "-p", "1,2"), message)
    assert_one_error(invoke("sweep", "--model", "tiny-llama", "--device", "cpu", "--levels", "0,1", "--ladders", "default",
                            "--rounds", 1, "--prompt-len", 8, "--output-len", 4, "--results", tmp_path / "results"),
                     f"sweep point O1_default: {message}")
    assert not (tmp_path / "results").exists()
    result = invoke("generate", "--model", "tiny-llama", "-O", 0, "--device", "cpu", "--max-tokens", 2, "-p", "1,2")
    assert result.exit_code == 0, result.output  # -O0 compiles nothing: the root is not used


def test_emit_refuses_a_format_or_plot_it_would_drop(tmp_path):
    # --emit printed the server's configuration alone: --format json was ignored and --plot never written
    plot = tmp_path / "waste.png"
    for command in (["ladder"], ["tune", "--model", "uniform:1-64", "--max-graphs", 3]):
        assert_one_error(invoke(*command, "--emit", "vllm", "--format", "json"),
                         "--emit vllm prints only the ladder as vllm's configuration, so --format json would not be "
                         "used: give one of them")
        assert_one_error(invoke(*command, "--emit", "sglang", "--plot", plot), f"so --plot {plot} would not be used")
        assert invoke(*command, "--emit", "trtllm").exit_code == 0
    assert not plot.exists()


def test_integer_lists_on_the_command_line_are_ascii_digits_with_no_empty_item():
    # int() took '1_0' as 10 and '\u0661' as 1, and the engine options and tune dropped an empty item ('1,,2'),
    # where ladder --batches refused it
    engine = ["--model", "tiny-llama", "-O", 0, "--device", "cpu"]
    for value in ("1_0", "\u0661,2", "1,,2"):
        for command, flag in ((["generate", *engine, "--max-tokens", 2], "--prompt-token-ids"),
                              (["generate", *engine, "--max-tokens", 2, "-p", "1"], "--capture-sizes"),
                              (["run", *engine, "--quiet"], "--concurrency"),
                              (["tune", "--model", "uniform:1-64", "--max-graphs", 3], "--candidates")):
            assert_one_error(invoke(*command, flag, value),
                             f"{flag} must be comma-separated integers like 1,2,4", repr(value))
        for flag in ("--capture-sizes", "--batches"):
            assert_one_error(invoke("ladder", flag, value), f"{flag} must be comma-separated integers like 1,2,4")


def test_a_workload_seed_past_what_the_prompt_generator_takes_is_one_error(tmp_path):
    # 10^23 ended in 'ValueError: Overflow when unpacking long long' (a traceback, exit 1) in torch.Generator
    for seed in ("99999999999999999999999", "1099511627777", "-1"):
        result = invoke("run", "--model", "tiny-llama", "-O", 0, "--device", "cpu", "--concurrency", 1, "--num-requests", 1,
                        "--prompt-len", 4, "--output-len", 2, "--repeats", 1, "--quiet", "--results", tmp_path,
                        "--workload-seed", seed)
        assert_one_error(result, f"--workload-seed must be in 0..2**40, got {seed}")
    assert list(tmp_path.iterdir()) == []


def test_workload_numbers_are_ascii_without_underscores(tmp_path):
    # float() and int() took '1_0' as 10 and '\u0661' as 1 in --request-rate, --prompt-len, --lora-share
    engine = ["run", "--model", "tiny-llama", "-O", 0, "--device", "cpu", "--num-requests", 1, "--quiet",
              "--results", tmp_path]
    for args, message in ((["--request-rate", "1_0"], "--request-rate must be numbers like 2,8.5; got '1_0'"),
                          (["--request-rate", "\u0661"], "--request-rate must be numbers like 2,8.5"),
                          (["--concurrency", 1, "--prompt-len", "uniform:1-1_0"],
                           "--prompt-len must look like 128, fixed:128, uniform:64-256 or normal:128,32; got 'uniform:1-1_0'"),
                          (["--concurrency", 1, "--output-len", "\u0661"], "--output-len must look like 128"),
                          (["--concurrency", 1, "--lora-share", "0_5"], "--lora-share must be numbers in [0, 1]")):
        assert_one_error(invoke(*engine, *args), message)
    assert list(tmp_path.iterdir()) == []


def test_slo_threshold_and_grid_numbers_are_ascii_without_underscores():
    # float()/int() took '5_0' as 50 and '\u0661' as 1: an SLO, a gate threshold, a sweep axis value
    synthetic = Path(__file__).parent / "data" / "report" / "synthetic"
    gate = Path(__file__).parent / "data" / "gate"
    assert_one_error(invoke("plan", synthetic, "--slo", "tpot_p99_ms=5_0"),
                     "SLO tpot_p99_ms: limit must be a number in ms, got '5_0'")
    assert_one_error(invoke("gate", "--baseline", gate / "baseline", "--current", gate / "current", "--threshold",
                            "tpot_p99_ms:1_0"), "bad threshold 'tpot_p99_ms:1_0': '1_0' is not a percentage")
    assert_one_error(invoke("sweep", "--dry-run", "--grid", "max_num_seqs=6_4"), "max_num_seqs must be an integer, got '6_4'")
    assert_one_error(invoke("sweep", "--dry-run", "--levels", "\u0661"), "optimization level must be 0, 1, 2 or 3")


def test_a_context_past_the_models_positions_is_refused_before_the_start():
    # tiny-llama has 2048 positions: 4096 ran with rope angles the model never saw (vLLM refuses it too)
    want = ("max_model_len 4096 (--max-model-len) is above the max_position_embeddings 2048 of tiny-llama: use at "
            "most 2048")
    assert_one_error(invoke("generate", "--device", "cpu", "-p", "1,2", "--max-tokens", 2, "--max-model-len", 4096),
                     want)
    assert_one_error(invoke("run", "--device", "cpu", "--concurrency", 1, "--max-model-len", 4096), want)


def test_ladder_batches_are_tabulated_once_each_in_order():
    assert_one_error(invoke("ladder", "--batches", "8,4,4"), "--batches gives 4 twice; give each batch size once")
    result = invoke("ladder", "--batches", "8,2,4", "--format", "csv")
    assert result.exit_code == 0, result.output
    rows = [line.split(",") for line in result.stdout.splitlines()[1:]]
    assert [int(r[1]) for r in rows if r[0] == rows[0][0]] == [2, 4, 8]
