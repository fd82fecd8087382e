"""The JVM's stderr reaches ours whole, less the incubator-module notice (pipelines/jvm.py)."""

from __future__ import annotations

import io
import os

from hypothesis import given
from hypothesis import strategies as st

from pipelines.jvm import INCUBATOR_NOTICE, pass_on

LINES = st.lists(
    st.one_of(
        st.just(INCUBATOR_NOTICE + b"\n"),
        st.just(INCUBATOR_NOTICE + b"\r\n"),
        st.binary(max_size=40).map(lambda b: b.replace(b"\n", b"") + b"\n"),
        st.just(b"WARNING: Using incubator modules: jdk.incubator.vector, jdk.incubator.foreign\n"),
    ),
    max_size=12,
)


def passed_on(data: bytes) -> bytes:
    read, write = os.pipe()
    pass_on(io.BytesIO(data), fd=write)
    os.close(write)
    with os.fdopen(read, "rb") as out:
        return out.read()


@given(LINES, st.binary(max_size=20).map(lambda b: b.replace(b"\n", b"")))
def test_every_line_but_the_notice_passes_byte_for_byte(lines: list[bytes], unterminated: bytes) -> None:
    expected = b"".join(line for line in lines if line.rstrip(b"\r\n") != INCUBATOR_NOTICE) + unterminated
    assert passed_on(b"".join(lines) + unterminated) == expected


def test_the_notice_goes_and_the_jvms_other_warnings_stay() -> None:
    log4j = b"26/12/02 16:20:01 WARN NativeCodeLoader: Unable to load native-hadoop library\n"
    assert passed_on(INCUBATOR_NOTICE + b"\n" + log4j) == log4j


def test_the_jvm_is_drained_when_our_stderr_is_gone() -> None:
    read, write = os.pipe()
    os.close(read)  # writing to it now fails (EPIPE), as when the terminal that ran us is closed
    stream = io.BytesIO(b"line\n" * 100_000)  # more than any pipe buffer holds
    pass_on(stream, fd=write)
    os.close(write)
    assert stream.closed  # read to the end and closed: the JVM never blocks on a full pipe
