"""Child process for the kill tests: resume from the store, then save forever.

Usage: python _writer.py STORE COUNTER KEEP
Prints "ready <step>" once resumed; every save's content is a function of
its step, so the parent can tell a torn or mixed-up checkpoint from a good one.
"""

from __future__ import annotations

import sys

from chain.app import CheckpointStore


def payload(step: int) -> dict[str, object]:
    return {"step": step, "data": [(step * 7919 + i * 31) % 100003 for i in range(30000)]}


def shard(step: int, k: int) -> bytes:
    return bytes((step + k + i) % 251 for i in range(40000))


def write_shards(step: int):  # type: ignore[no-untyped-def]
    def write(d):  # type: ignore[no-untyped-def]
        for k in range(3):
            (d / f"shard-{k}.bin").write_bytes(shard(step, k))

    return write


def main() -> None:
    root, counter, keep = sys.argv[1], sys.argv[2], int(sys.argv[3])
    store = CheckpointStore(root, counter_path=counter, keep_last=keep, keep_best=False)
    store.cleanup_temporaries()
    restored = store.restore()
    step = restored.info.step if restored else 0
    print(f"ready {step}", flush=True)
    while True:
        step += 1
        if step % 3 == 0:
            store.save_dir(step, write_shards(step), metric=float(step))
        else:
            store.save(step, payload(step), metric=float(step))


if __name__ == "__main__":
    main()
