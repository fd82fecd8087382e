"""One rank of a multi-process test (started by tests/test_distributed.py with torchrun-style env vars).

Usage: python tests/streaming/distributed_worker.py CONFIG_JSON OUT_JSON
CONFIG: {"streams": [names], "dataset_kwargs": {...}, "batch_size": B, "num_workers": W,
         "remote": URL (or [[name, URL], ...]) and "local": cache dir (instead of "streams"),
         "job_root": path, "stop_after": k or null, "state": state dict or null}
"local" and "job_root" may contain "{node}", replaced by this rank's node (RANK // LOCAL_WORLD_SIZE), so
that simulated nodes keep separate caches as real ones do.
Writes {"batches": [[ids...], ...], "state": state_dict after stop_after batches (or null)}.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

from mds_core import Stream, StreamingDataLoader, StreamingDataset

ORDER = Path(__file__).resolve().parents[1] / "fixtures" / "order-golden"


def main() -> None:
    node = int(os.environ.get("RANK", "0")) // int(os.environ.get("LOCAL_WORLD_SIZE", "1"))
    config: dict[str, Any] = {
        key: value.replace("{node}", str(node)) if isinstance(value, str) else value
        for key, value in json.loads(Path(sys.argv[1]).read_text()).items()
    }
    if isinstance(config.get("remote"), list):  # named streams, each downloaded into its own node-local cache
        streams = [Stream(remote=url, local=f"{config['local']}/{name}", name=name) for name, url in config["remote"]]
    elif config.get("remote"):  # one stream downloaded from a remote store into a node-local cache
        streams = [Stream(remote=config["remote"], local=config["local"])]
    else:
        streams = [
            Stream(local=str(ORDER / "datasets" / name), name=name, **weights) for name, weights in config["streams"]
        ]
    dataset = StreamingDataset(
        streams=streams, batch_size=config["batch_size"], job_root=config["job_root"], **config["dataset_kwargs"]
    )
    loader = StreamingDataLoader(dataset, batch_size=config["batch_size"], num_workers=config["num_workers"])
    if config.get("state"):
        loader.load_state_dict(config["state"])
    batches, state = [], None
    for batch in loader:
        batches.append(batch["id"].tolist())
        if config.get("stop_after") and len(batches) == config["stop_after"]:
            state = loader.state_dict()
            break
    Path(sys.argv[2]).write_text(json.dumps({"batches": batches, "state": state}))


if __name__ == "__main__":
    main()
