"""The webhook's log: every record one JSON line, in order, written off the request path and all of
it on close (which the server's exit runs), whatever the text holds."""

from __future__ import annotations

import io
import json
import logging
import os
import threading
import weakref
from collections.abc import Iterator

import pytest

from gpufleet.webhook.telemetry import LOGGER, LineWriter, configure_logging


@pytest.fixture
def logged() -> Iterator[tuple[logging.Logger, io.StringIO]]:
    """The webhook's logger configured as ``gpufleet webhook serve`` does, put back as it was after."""
    loggers = [logging.getLogger(name) for name in (LOGGER, "_granian")]
    saved = [(lg.handlers, lg.level, lg.propagate) for lg in loggers]
    stream = io.StringIO()
    configure_logging("info", stream)
    yield loggers[0], stream
    writer = loggers[0].handlers[0]
    assert isinstance(writer, LineWriter)
    writer.stop()
    for lg, (handlers, level, propagate) in zip(loggers, saved, strict=True):
        lg.handlers, lg.level, lg.propagate = handlers, level, propagate


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        (
            {"uid": "u", "details": ["MissingLabel", "WrongTeam"], "ms": 0.25},
            {"details": ["MissingLabel", "WrongTeam"]},
        ),
        ({"name": "träin-ü"}, {"name": "träin-ü"}),  # not ASCII: written as UTF-8 text
        ({"name": "a\ud800b"}, {"name": "a\ud800b"}),  # a lone surrogate (from a JSON escape): the fallback
        ({"path": threading}, {"path": str(threading)}),  # no JSON type: its text
    ],
    ids=["lists-and-floats", "unicode", "lone-surrogate", "no-json-type"],
)
def test_each_record_is_one_json_line(
    logged: tuple[logging.Logger, io.StringIO], fields: dict[str, object], expected: dict[str, object]
) -> None:
    log, stream = logged
    log.info("review", extra={"fields": fields})
    log.handlers[0].close()
    (line,) = stream.getvalue().splitlines()
    entry = json.loads(line)
    assert entry["msg"] == "review" and entry["level"] == "info" and entry["ts"].endswith("Z")
    assert expected.items() <= entry.items()


def test_every_record_is_written_in_order_by_close(logged: tuple[logging.Logger, io.StringIO]) -> None:
    log, stream = logged
    for i in range(3000):
        log.info("review", extra={"fields": {"i": i}})
    log.handlers[0].close()
    assert [json.loads(line)["i"] for line in stream.getvalue().splitlines()] == list(range(3000))


def test_lines_logged_after_logging_closed_every_handler_are_still_written(
    logged: tuple[logging.Logger, io.StringIO],
) -> None:
    """granian's start reconfigures logging, which closes every handler: the writer must go on."""
    log, stream = logged
    logging.shutdown([weakref.ref(log.handlers[0])])  # what logging.config.dictConfig does to every handler
    log.info("review", extra={"fields": {"uid": "after"}})
    log.handlers[0].flush()
    assert [json.loads(line)["uid"] for line in stream.getvalue().splitlines()] == ["after"]


def test_reconfiguring_closes_the_old_writer_with_its_lines(logged: tuple[logging.Logger, io.StringIO]) -> None:
    log, first = logged
    old = log.handlers[0]
    assert isinstance(old, LineWriter)
    log.warning("before", extra={"fields": {}})
    second = io.StringIO()
    configure_logging("info", second)
    log.warning("after", extra={"fields": {}})
    log.handlers[0].close()
    assert [json.loads(line)["msg"] for line in first.getvalue().splitlines()] == ["before"]
    assert [json.loads(line)["msg"] for line in second.getvalue().splitlines()] == ["after"]


@pytest.mark.parametrize(
    ("sizes", "writes"),
    [
        ([100] * 10, 1),  # 1,000 bytes: one write
        ([1000] * 9, 3),  # 9,000 bytes: writes of four, four and one line, each within PIPE_BUF
        ([5000, 10, 10], 2),  # a line longer than PIPE_BUF goes whole, alone
    ],
)
def test_several_workers_lines_never_share_a_write_beyond_pipe_buf(sizes: list[int], writes: int) -> None:
    """Writes of at most PIPE_BUF (4,096 bytes on Linux) bytes to a pipe are atomic, so two worker
    processes' lines on one stderr never interleave within a line."""
    import select

    from gpufleet.webhook.telemetry import _chunks

    lines = [f"{'x' * (n - 1)}\n" for n in sizes]
    chunks = _chunks(lines)
    assert "".join(chunks) == "".join(lines)
    assert len(chunks) == writes
    assert all(len(c.encode()) <= select.PIPE_BUF or c.count("\n") == 1 for c in chunks)


def test_a_worker_line_says_which_process_wrote_it() -> None:
    stream = io.StringIO()
    logger = logging.getLogger(LOGGER)
    saved = (logger.handlers, logger.level, logger.propagate)
    configure_logging("info", stream, pid=True)
    try:
        logger.info("review", extra={"fields": {"uid": "u"}})
        writer = logger.handlers[0]
        assert isinstance(writer, LineWriter)
        writer.flush()
    finally:
        writer.stop()
        logger.handlers, logger.level, logger.propagate = saved
    (line,) = [json.loads(x) for x in stream.getvalue().splitlines()]
    assert line["pid"] == os.getpid() and line["uid"] == "u"


def test_multiprocess_metrics_refuse_a_prometheus_client_imported_without_its_directory() -> None:
    """Here prometheus_client was imported with no PROMETHEUS_MULTIPROC_DIR: a worker's counts would
    stay in its own process, so building a worker's metrics fails loudly instead."""
    from gpufleet.webhook.telemetry import Metrics

    with pytest.raises(RuntimeError, match="PROMETHEUS_MULTIPROC_DIR"):
        Metrics(multiprocess_dir="/nonexistent")
