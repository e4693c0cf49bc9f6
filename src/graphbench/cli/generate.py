"""`graphbench generate`: a smoke test of a model through the engine."""

import json
from contextlib import contextmanager
from typing import Annotated, Optional

import typer

from graphbench.cli.engine_options import parse_int_list, with_engine_options
from graphbench.cli.engine_report import runtime_modes_line, startup_lines
from graphbench.cli.output import console as make_console
from graphbench.config import EngineConfig


@with_engine_options
def generate(
    engine_config: EngineConfig,
    prompt: Annotated[Optional[list[str]], typer.Option(
        "--prompt", help="Text through the checkpoint's tokenizer; repeat for more prompts.")] = None,
    chat: Annotated[bool, typer.Option(
        "--chat", help="Each --prompt is a user message in the checkpoint's chat template.")] = False,
    prompt_token_ids: Annotated[
        Optional[list[str]],
        typer.Option("--prompt-token-ids", "-p", help="Comma-separated token ids (NAME:1,2,3 with LoRA adapter NAME); repeat for more prompts."),
    ] = None,
    max_tokens: Annotated[int, typer.Option(help="Most tokens to generate per prompt.")] = 16,
    ignore_eos: Annotated[bool, typer.Option(
        "--ignore-eos", help="Generate max_tokens even past the checkpoint's eos tokens.")] = False,
    temperature: Annotated[Optional[float], typer.Option(
        help="0 = greedy (default: the checkpoint's generation_config, else greedy).")] = None,
    top_p: Annotated[Optional[float], typer.Option(help="Nucleus sampling mass (default: as temperature).")] = None,
    output_format: Annotated[str, typer.Option("--format", help="table or json.")] = "table",
) -> None:
    """Generate text (or token ids) for one or more prompts and print it."""
    from graphbench.errors import GraphbenchError
    from graphbench.runner.generate import run_generate  # imports torch

    if output_format not in ("table", "json"):
        raise GraphbenchError(f"--format must be table or json, got {output_format!r}")
    if prompt and prompt_token_ids:
        raise GraphbenchError("give --prompt (text) or --prompt-token-ids, not both")
    texts = prompt_token_ids or ([] if prompt else ["1,2,3"])
    # NAME:1,2,3 runs the prompt with LoRA adapter NAME
    loras = [t.split(":", 1)[0].strip() if ":" in t else None for t in texts] or None
    ids = [parse_int_list(t.split(":", 1)[1] if ":" in t else t, "--prompt-token-ids") for t in texts]
    with _status(make_console(stderr=True)) as progress:  # stderr: --format json's stdout stays the JSON
        result = run_generate(engine_config, ids or None, max_tokens=max_tokens, temperature=temperature,
                              top_p=top_p, progress=progress, loras=loras, texts=prompt, chat=chat,
                              ignore_eos=ignore_eos)
    if output_format == "json":
        typer.echo(json.dumps({"outputs": result.outputs, "startup": result.startup,
                               "runtime_modes": result.runtime_modes, "steps": result.steps}))
        return
    _print_outputs(make_console(), result)


def _print_outputs(console, result) -> None:
    from rich.markup import escape  # (text like "[/]" or "[red]" is the model's, not markup)
    from rich.table import Table

    console.print(f"[bold]{result.summary}[/bold]")
    with_lora = any(item.get("lora") for item in result.outputs)
    as_text = any("text" in item for item in result.outputs)
    table = Table("prompt", *(["adapter"] if with_lora else []), "generated text" if as_text else "generated token ids",
                  "ended")
    for item in result.outputs:
        prompt = item["prompt"] if as_text else ",".join(map(str, item["prompt_token_ids"]))
        out = item["text"] if as_text else ",".join(map(str, item["token_ids"]))
        ended = {"stop": "eos", "length": "max tokens"}.get(item.get("finish_reason"), "-")
        table.add_row(escape(prompt), *([escape(item.get("lora") or "-")] if with_lora else []), escape(out), ended)
    console.print(table)
    for line in [*result.notes, *startup_lines(result.startup), runtime_modes_line(result.runtime_modes)]:
        console.print(line, style="dim", markup=False, highlight=False)


PHASE_LINE_DELAY_S = 1.0


@contextmanager
def _status(console):
    """A spinner naming the phase on a terminal; elsewhere (CI logs) one line per phase that lasts
    over PHASE_LINE_DELAY_S, so a start that fails at once (a bad checkpoint) prints its error alone."""
    if not console.is_terminal:
        import threading

        timer: list[threading.Timer] = []

        def phase_line(phase: str) -> None:
            if timer:
                timer.pop().cancel()
            if PHASE_LINE_DELAY_S <= 0:
                console.print(f"{phase}...", style="dim", markup=False)
                return
            timer.append(threading.Timer(PHASE_LINE_DELAY_S, console.print, (f"{phase}...",),
                                         {"style": "dim", "markup": False}))
            timer[0].daemon = True
            timer[0].start()

        try:
            yield phase_line
        finally:
            if timer:
                timer.pop().cancel()
        return
    with console.status("starting the engine...") as status:
        yield lambda phase: status.update(f"{phase}...")
