"""What a checkpoint folder says about text: its tokenizer (transformers' AutoTokenizer, from the folder,
offline), its chat template, the tokens it stops at (config.json's and generation_config.json's eos,
ints or lists) and its generation defaults. A preset has dummy weights and no tokenizer: it says so."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from graphbench.config.arch import checkpoint_folder
from graphbench.errors import GraphbenchError

TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "vocab.json", "tokenizer_config.json")


@dataclass
class CheckpointText:
    tokenizer: Any
    stop_token_ids: tuple[int, ...]
    defaults: dict[str, Any] = field(default_factory=dict)  # generation_config.json's temperature, top_p

    def encode(self, prompt: str, chat: bool = False) -> list[int]:
        """The prompt's token ids: as text (the tokenizer's special tokens added as it adds them), or as a
        user message in the checkpoint's chat template with the assistant's turn opened."""
        if not isinstance(prompt, str) or not prompt:
            raise GraphbenchError("--prompt needs some text")
        if not chat:
            return list(self.tokenizer(prompt)["input_ids"])
        if not getattr(self.tokenizer, "chat_template", None):
            raise GraphbenchError("--chat: this checkpoint's tokenizer has no chat template; give the text as it is")
        try:
            ids = self.tokenizer.apply_chat_template([{"role": "user", "content": prompt}],
                                                     add_generation_prompt=True, tokenize=True)
        except Exception as exc:  # noqa: BLE001  (a broken Jinja template raises its own types)
            raise GraphbenchError(f"--chat: the checkpoint's chat template fails: {str(exc)[:200]}") from None
        ids = ids["input_ids"] if hasattr(ids, "keys") else ids
        return [int(t) for t in (ids[0] if ids and isinstance(ids[0], list) else ids)]

    def decode(self, token_ids: list[int]) -> str:
        return self.tokenizer.decode(token_ids, skip_special_tokens=True)


def _eos_ids(path: Path) -> list[int]:
    """The file's eos_token_id: none, a token id or a list of them, negative ids left out (anything else, which
    would run past the eos the checkpoint means, is an error naming the file)."""
    value = _json(path).get("eos_token_id")
    values = value if isinstance(value, list) else [] if value is None else [value]
    if not all(type(v) is int for v in values):
        raise GraphbenchError(f"{path}: eos_token_id {value!r} is not a token id or a list of them: fix it")
    return [v for v in values if v >= 0]


def _json(path: Path) -> dict:
    try:
        data = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
    except (OSError, ValueError) as exc:
        raise GraphbenchError(f"{path} is not readable JSON: {exc}") from None
    if not isinstance(data, dict):
        raise GraphbenchError(f"{path} holds a JSON {type(data).__name__}, not an object")
    return data


def stop_tokens(model: str) -> tuple[int, ...]:
    """The eos tokens a checkpoint folder's generation_config.json and config.json name (a preset: none)."""
    folder = checkpoint_folder(model)
    if folder is None:
        return ()
    stops = [*_eos_ids(folder / "generation_config.json"), *_eos_ids(folder / "config.json")]
    return tuple(dict.fromkeys(stops))


def load_text(model: str) -> CheckpointText:
    """The tokenizer, stop tokens and generation defaults of a checkpoint folder (one line when it has none)."""
    folder = checkpoint_folder(model)
    if folder is None:
        raise GraphbenchError(f"{model} is a preset with dummy weights: it has no tokenizer for text. Give a "
                              "checkpoint folder (graphbench convert makes one from a GGUF file)")
    if not any((folder / name).is_file() for name in TOKENIZER_FILES):
        raise GraphbenchError(f"{folder} has no tokenizer files ({', '.join(TOKENIZER_FILES)}): give "
                              "--prompt-token-ids, or a checkpoint saved with its tokenizer")
    from transformers import AutoTokenizer

    try:
        tokenizer = AutoTokenizer.from_pretrained(str(folder), local_files_only=True)
    except Exception as exc:  # noqa: BLE001  (a broken tokenizer file raises anything from JSON to Rust)
        raise GraphbenchError(f"the tokenizer in {folder} cannot be loaded: {str(exc)[:200]}") from None
    generation = _json(folder / "generation_config.json")
    eos = getattr(tokenizer, "eos_token_id", None)
    stops = [*stop_tokens(model), *([eos] if type(eos) is int and eos >= 0 else [])]
    for key in ("temperature", "top_p"):  # (a wrong type was dropped: the run then sampled as it should not)
        if generation.get(key) is not None and (type(generation[key]) not in (int, float)):
            raise GraphbenchError(f"{folder / 'generation_config.json'}: {key} {generation[key]!r} is not a number: "
                                  f"fix it, or give --{key.replace('_', '-')}")
    defaults = {k: generation[k] for k in ("temperature", "top_p") if generation.get(k) is not None}
    if not generation.get("do_sample"):
        defaults.pop("temperature", None)  # transformers samples only with do_sample: greedy otherwise
    else:
        defaults.setdefault("temperature", 1.0)  # transformers' default when it samples
    if not (0 <= defaults.get("temperature", 0) <= 100 and 0 < defaults.get("top_p", 1) <= 1):
        raise GraphbenchError(f"{folder / 'generation_config.json'}: temperature {defaults.get('temperature')} or "
                              f"top_p {defaults.get('top_p')} is out of range: fix it, or give --temperature/--top-p")
    return CheckpointText(tokenizer, tuple(dict.fromkeys(stops)), defaults)
