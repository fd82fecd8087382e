"""The run config target's words: option names and schema references to try, and the oracle's rules.

The oracle is written apart from ``pipelines.run_config``: it takes the refused names and fragments from
there (they are the specification), spells names its own way (ASCII letters and digits only: no client
takes an option spelt otherwise), walks config without recursion, and the names every fsspec client or
Spark would act on (``MUST_REFUSE``, ``SPARK_MUST_REFUSE``) are checked against the lists at setup.
"""

from __future__ import annotations

import random
from typing import Any

PLANTED, DECLARED = "mds_fuzz_planted", "mds_fuzz_declared"
VARIABLES = {"ShardStore": "MDS_STORAGE_OPTIONS", "SparkResource": "MDS_SPARK_CONF"}
VARIABLES["LandingZone"] = "MDS_LANDING_STORAGE_OPTIONS"
OTHER = "MDS_FUZZ_OTHER_VARIABLE"
# Options an fsspec client (s3fs, gcsfs, adlfs, HTTP, SFTP, the Databricks SDK) would send elsewhere or
# sign with, and Spark settings that load code or open ports: whatever the lists in pipelines.run_config
# say, these must be refused (checked at setup).
MUST_REFUSE = """endpoint_url endpointUrl host proxies proxy_url use_ssl verify ssl_context cert key secret token
    profile password passwd username user account_name account_key sas_token connection_string credential tenant_id
    client_id client_secret headers config_file session_token AWS_ACCESS_KEY_ID auth google_application_credentials
    """.split()
SPARK_MUST_REFUSE = """spark.jars spark.driver.extraJavaOptions spark.executorEnv.PYTHONPATH spark.plugins spark.master
    spark.hadoop.fs.s3a.endpoint spark.sql.extensions spark.pyspark.python spark.ui.enabled spark.driver.host
    spark.submit.pyFiles spark.redaction.regex spark.sql.shuffle.partition SPARK.SQL.SHUFFLE.PARTITIONS""".split()
HARMLESS = """anon auto_mkdir skip_instance_cache use_listings_cache default_block_size requester_pays version_aware
    cache_regions region_name project requests_timeout max_concurrency timeout client_kwargs config_kwargs
    s3_additional_kwargs retries 1 None ｅｎｄｐｏｉｎｔ endpoınt İd \u212aey""".split()
HARMLESS += ["", "é" * 3, "x" * 5000, "tok\u200ben", " "]
REFS = f"""pipelines.schemas:DIGITS pipelines.schemas:NOPE pipelines.schemas pipelines.schemas: not_null NOT_NULL
    {PLANTED}:SCHEMA {PLANTED} {PLANTED}: :{PLANTED} os:system pipelines.schemas:DIGITS:{PLANTED} builtins:eval
    pipelines.schemas.{PLANTED}:X pipelines:schemas {DECLARED}:SCHEMA {DECLARED}.{PLANTED}:X importlib:import_module
    pipelines.schemаs:DIGITS ｐipelines.schemas:DIGITS""".split()
REFS += ["", " not_null", "pipelines.schemas :DIGITS", "pipelines.schemas\x00:DIGITS", f"{PLANTED}\n", "x" * 10_000]


def spellings(rng: random.Random, word: str) -> str:
    """``word`` in another case, with other separators, maybe inside a longer name."""
    parts = word.replace("-", "_").split("_")
    joined = rng.choice(("_", "-", ".", " ", "", "__")).join(
        rng.choice((p, p.upper(), p.title(), p.lower())) for p in parts
    )
    if rng.random() < 0.3:
        joined = rng.choice(("client_", "my", "x-", "aws_", "AWS_", "s3.", "")) + joined
    if rng.random() < 0.3:
        joined += rng.choice(("_url", "s", "Id", "_file", "_kwargs", "2"))
    return joined


def with_deep_value(case: dict[str, Any]) -> dict[str, Any]:
    """``case`` with a value ``depth`` levels deep (dicts and lists in turn) in its options or Spark settings."""
    where, depth = case["deep"]
    value: Any = "bottom"
    for level in range(depth):
        value = {"nested": value} if level % 2 else [value]
    if where == "spark":
        return {**case, "spark": {**case["spark"], "spark.sql.shuffle.partitions": value}}
    options = case["options"] if isinstance(case["options"], dict) else {}
    return {**case, "options": {**options, "nested": value}}


def plain_ascii(name: Any) -> str:
    """The oracle's spelling of an option name: its ASCII letters and digits, lower case."""
    return "".join(ch for ch in str(name) if ch.isascii() and ch.isalnum()).lower()


def dangerous(name: Any, names: list[str], fragments: list[str]) -> bool:
    plain = plain_ascii(name)
    return plain in {plain_ascii(n) for n in names} or any(plain_ascii(f) in plain for f in fragments)


def dangerous_anywhere(options: Any, names: list[str], fragments: list[str]) -> bool | None:
    """Whether a key at any depth is dangerous (walked without recursion); None when only a key that is not
    all ASCII makes the difference (the library refuses some of those, as ``str.lower`` maps them to ASCII)."""
    stack, unsure = [options], False
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            for key, value in node.items():
                if dangerous(key, names, fragments):
                    return True
                unsure = unsure or not str(key).isascii()
                stack.append(value)
        elif isinstance(node, (list, tuple)):
            stack.extend(node)
    return None if unsure else False
