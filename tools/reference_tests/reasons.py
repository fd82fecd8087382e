"""Why each reference test that fails against mds_core fails: (pattern on the test id, reason).

Every entry is a difference docs/differences.md lists under "The reference's own tests"; the first
pattern that matches (``re.search``) wins. A failure no pattern matches is reported as unexplained,
and ``run.py`` exits 1.
"""

KNOWN: list[tuple[str, str]] = [
    (
        r"test_encodings\.py::.*(_encode_invalid_data|test_mds_encode_invalid_data)",
        "a value of the wrong type for its encoding raises EncodeError (a ValueError); the tests expect the "
        "AttributeError or TypeError the reference's code happens to hit",
    ),
    (r"test_encodings\.py::.*test_json_invalid_data", "calls a private method of the reference's JSON encoding"),
    (
        r"test_encodings\.py::.*test_png_encode_decode\[I\]",
        "fails against the reference too: Pillow 13 cannot save a mode-I image as PNG",
    ),
    (
        r"test_eviction\.py::.*\[manual_shard_eviction\]",
        "uses StreamingDataset.num_shards, prepare_shard and evict_shard, which mds_core does not offer",
    ),
    (
        r"test_eviction\.py::test_eviction_",
        "local/ also holds the cache's locks and ledger (local/.mds-cache/), which the test's comparison of "
        "local with remote counts as a file; and cache_limit bounds the shard files only (the reference "
        "counts index.json too, so its 100 KB limit over 69 KB of shards evicts)",
    ),
    (
        r"test_reader\.py::test_accidental_shard_delete",
        "a cached shard deleted during an epoch is fetched again when next needed, checked at most every "
        "half second; the test's epoch ends sooner",
    ),
    (
        r"test_reader\.py::test_invalid_index_json_exception",
        "an empty index.json raises InvalidIndexError (a ValueError naming the file), not json's JSONDecodeError",
    ),
    (
        r"test_shared\.py::test_load_get_state_dict",
        "the state dict carries a fingerprint of the data and settings; a state with every value changed "
        "is refused (ResumeError), and a string cannot have 1 added",
    ),
    (
        r"test_shared\.py::test_state_dict_too_large",
        "a state dict with unknown keys is refused for its keys (ResumeError); there is no shared-memory "
        "buffer for it to overflow",
    ),
    (
        r"test_stream\.py::test_existing_local_raises_exception",
        "Stream() with neither remote nor local raises ConfigurationError at once",
    ),
    (
        r"test_stream\.py::test_missing_index_json_local",
        "a local-only stream without index.json raises InvalidIndexError (a ValueError naming the "
        "directory), not RuntimeError",
    ),
    (
        r"test_streaming\.py::test_same_local_diff_remote",
        "a dataset with remote= fetches index.json from it once per job, so the first dataset (whose remote "
        "does not exist) already raises StoreFileNotFoundError; there is no shared-memory check of reused "
        "local directories",
    ),
]
