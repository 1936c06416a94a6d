"""A Hugging Face transformers model built from its config with random weights, greedy
``generate()`` in a loop; l2persist nowhere in it, nothing downloaded.

A tiny GPT-2 (``GPT2Config(n_layer=4, n_embd=256, n_head=4, vocab_size=8192)``,
``GPT2LMHeadModel(config)``: weights drawn from a seeded generator on the host, then moved to
the GPU), evaluated in inference mode. Each iteration draws a batch of 4 prompts of 32 tokens
(a seeded host generator) and calls ``model.generate(..., do_sample=False,
max_new_tokens=32)``: greedy decoding, no end-of-sequence token (every call generates the
same number of tokens). The program never synchronizes by itself: ``generate()`` reads its
stopping criteria back on the host every token, and the tokens are copied to the host after
each call.

It writes a digest of every generated token to OUT, the same for the same seed and iteration
count whatever the timing. It prints one line to stderr, ``loop: N iterations in S s``
(N ``generate()`` calls): the live study reads its throughput there.

usage: hf_generate.py OUT [--iters N] [--seed S]
"""
import argparse
import hashlib
import json
import sys
import time

import torch
from transformers import GPT2Config, GPT2LMHeadModel

VOCAB, PROMPT, NEW, BATCH = 8192, 32, 32, 4


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--iters", type=int, default=40, help="generate() calls")
    ap.add_argument("--seed", type=int, default=17)
    a = ap.parse_args()
    torch.manual_seed(a.seed)
    config = GPT2Config(n_layer=4, n_embd=256, n_head=4, vocab_size=VOCAB,
                        n_positions=PROMPT + NEW, bos_token_id=0, eos_token_id=None,
                        pad_token_id=0)
    model = GPT2LMHeadModel(config).to("cuda").eval()
    gc = model.generation_config
    gc.eos_token_id, gc.pad_token_id, gc.bos_token_id = None, 0, 0
    gen = torch.Generator()                # host generator: prompts drawn on the host
    gen.manual_seed(a.seed + 1)
    h = hashlib.sha256()
    counts = [0] * VOCAB
    with torch.inference_mode():
        t0 = time.perf_counter()
        for _ in range(a.iters):
            ids = torch.randint(1, VOCAB, (BATCH, PROMPT), generator=gen).to("cuda")
            out = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids),
                                 do_sample=False, max_new_tokens=NEW)
            new = out[:, PROMPT:].cpu()
            h.update(new.numpy().tobytes())
            for t in new.flatten().tolist():
                counts[t] += 1
        print(f"loop: {a.iters} iterations in {time.perf_counter() - t0:.4f} s",
              file=sys.stderr)
    digest = {"tokens": h.hexdigest(), "generated": sum(counts),
              "distinct": sum(1 for c in counts if c)}
    with open(a.out, "w") as f:
        json.dump(digest, f)


if __name__ == "__main__":
    main()
