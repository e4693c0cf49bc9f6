"""LoRA adapters in the batch: loading (PEFT layout or seeded dummies), static slot buffers, the batched delta."""
