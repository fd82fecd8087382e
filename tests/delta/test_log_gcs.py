"""On GCS the sensor's question, "which is the latest version?", lists the log from its last checkpoint on.

A log written by hand on the loopback GCS (fake-gcs-server): commit files and ``_last_checkpoint``, which is all
``latest_delta_version`` reads. The requests are counted at a proxy in front of the emulator.
"""

from __future__ import annotations

import json
from urllib.parse import unquote

import fsspec

from mds_core.convert.delta_log import commit_name, latest_delta_version
from testsupport.fault_proxy import fault_proxy_for


def test_the_latest_version_on_gcs_is_listed_from_the_last_checkpoint(gcs_server) -> None:
    table = f"{gcs_server.new_root()}/events"
    fs, path = fsspec.core.url_to_fs(table)
    for version in range(30):
        fs.pipe_file(f"{path}/_delta_log/{commit_name(version)}", b"{}")
    assert latest_delta_version(table) == 29  # no checkpoint: the whole log is listed
    fs.pipe_file(f"{path}/_delta_log/_last_checkpoint", json.dumps({"version": 20, "size": 3}).encode())
    with fault_proxy_for(gcs_server) as proxy:
        assert latest_delta_version(table) == 29
    listings = [unquote(target) for method, target in proxy.requests if method == "GET" and "/o?" in target]
    assert (
        len(listings) == 1 and f"startOffset={path.split('/', 1)[1]}/_delta_log/{commit_name(20)[:-5]}" in listings[0]
    )
