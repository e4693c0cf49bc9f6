"""Checkpoint folders from other formats (a GGUF file), and what a checkpoint says about text: its
tokenizer, chat template and stop tokens."""
