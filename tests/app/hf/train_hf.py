"""A Hugging Face Trainer script as a user writes one, with the two lines
chain's adapter asks for: a tiny GPT-2 built from a config (no download),
random token data, CPU. It logs each step's loss to LOSS_LOG (one JSON line
per step) so a test can compare a chained run with an uninterrupted one."""

from __future__ import annotations

import json
import os
import sys
import time

import torch
from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainerCallback, TrainingArguments

from chain.app.hf import ChainTrainerCallback, rank_order_gradients


class Tokens(torch.utils.data.Dataset):  # type: ignore[type-arg]
    def __init__(self, n: int, length: int, vocab: int) -> None:
        g = torch.Generator().manual_seed(1234)
        self.data = torch.randint(0, vocab, (n, length), generator=g)

    def __len__(self) -> int:
        return len(self.data)

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        return {"input_ids": self.data[i], "labels": self.data[i]}


class LossLog(TrainerCallback):  # the user's own logging
    def __init__(self, path: str, pause: float) -> None:
        self.path, self.pause = path, pause

    def on_log(self, args, state, control, logs=None, **kwargs):  # type: ignore[no-untyped-def]
        if logs and "loss" in logs:
            with open(self.path, "a") as fh:
                fh.write(json.dumps({"step": state.global_step, "loss": logs["loss"], "pid": os.getpid()}) + "\n")

    def on_step_end(self, args, state, control, **kwargs):  # type: ignore[no-untyped-def]
        time.sleep(self.pause)  # a step of real work takes time


def main() -> int:
    max_steps = int(os.environ["MAX_ITER"])
    torch.manual_seed(0)
    config = GPT2Config(vocab_size=64, n_positions=16, n_embd=16, n_layer=1, n_head=2)
    model = GPT2LMHeadModel(config)
    args = TrainingArguments(
        output_dir="out",
        max_steps=max_steps,
        per_device_train_batch_size=4,
        learning_rate=1e-3,
        lr_scheduler_type="linear",
        warmup_steps=5,
        logging_steps=1,
        save_strategy="no",
        report_to="none",
        use_cpu=True,
        seed=0,
        dataloader_num_workers=0,
        disable_tqdm=True,
    )
    chain_cb = ChainTrainerCallback()
    trainer = Trainer(
        model=model,
        args=args,
        train_dataset=Tokens(40, 16, 64),
        callbacks=[
            chain_cb,
            LossLog(os.environ.get("LOSS_LOG", "loss.jsonl"), float(os.environ.get("STEP_SECONDS", "0"))),
        ],
    )
    rank_order_gradients(trainer)  # three processes or more: a resume as exact as with two
    trainer.train(resume_from_checkpoint=chain_cb.resume_path())
    return chain_cb.exit_code


if __name__ == "__main__":
    sys.exit(main())
