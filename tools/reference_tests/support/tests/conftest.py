"""Fixtures the reference's test files request, and the names they import from ``tests.conftest``."""

from tests.common.utils import compressed_local_remote_dir, local_remote_dir

__all__ = ["compressed_local_remote_dir", "local_remote_dir"]

# Constants the cloud tests import; those tests are not public-API tests and do not run.
MY_BUCKET = "streaming-test-bucket"
GCS_URL = "https://storage.googleapis.com"
R2_URL = "https://r2.cloudflarestorage.com"
