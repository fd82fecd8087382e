"""What the tests and the benchmarks share: loopback servers and the harness around them.

* ``fault_proxy``: the fault-injecting, request-counting HTTP proxy, and the environment helpers.
* ``s3``: moto's S3 server in a subprocess (counted through the proxy).
* ``emulators``: fake-gcs-server (GCS) and Azurite (Azure Blob).
* ``databricks_files``: the Databricks Files API (Unity Catalog volumes) in a thread.
* ``spark_cluster``: a Spark standalone cluster; ``spark_connect``: a Spark Connect server.
* ``daily_cost``: the per-day path of a shard set operated daily (a timing test and a benchmark).

Nothing here imports ``tests`` (tests/test_architecture.py checks it), so a benchmark never loads a test module.
"""
