# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""A tiny randomly initialized Llama with a word-level tokenizer (`w0` .. `w63`), built on the
spot in the model venv (no download) for the trainer programs' tests. Token ids are the words'
numbers: 1 bos, 2 eos, 3 pad."""

from __future__ import annotations


def save_tiny_llama(directory: str, *, seed: int = 0) -> None:
    import torch
    from tokenizers import Tokenizer, models
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    words = Tokenizer(models.WordLevel({f"w{i}": i for i in range(64)}, unk_token="w0"))
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=words, unk_token="w0", eos_token="w2", pad_token="w3"
    )
    tokenizer.save_pretrained(directory)
    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=64,
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=3,
    )
    LlamaForCausalLM(config).save_pretrained(directory)
