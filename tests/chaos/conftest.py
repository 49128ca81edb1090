"""One local[1] SparkSession for every checker test in tests/chaos (test_checker*.py and the checks
of the bounded chaos runs), stopped after the package's last test: a Spark JVM costs seconds to
start and tens of seconds to warm up (its JIT), and the checker's jobs on small histories are all
per-query overhead."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest


@pytest.fixture(scope="package")
def spark() -> Iterator[Any]:
    pytest.importorskip("pyspark")
    if os.system("java -version >/dev/null 2>&1") != 0:
        pytest.skip("no Java runtime for Spark")
    from pyspark.sql import SparkSession

    s = (SparkSession.builder.master("local[1]").appName("test-chaos-check")
         .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
         .config("spark.sql.shuffle.partitions", "1")
         .config("spark.default.parallelism", "1").config("spark.sql.adaptive.enabled", "false")
         .config("spark.sql.session.timeZone", "UTC")  # as the checker's own session (chaos/check/tables.py)
         # tiny inputs: interpreting beats compiling generated code for every stage
         .config("spark.sql.codegen.wholeStage", "false").config("spark.sql.codegen.factoryMode", "NO_CODEGEN")
         .getOrCreate())
    s.sparkContext.setLogLevel("ERROR")
    yield s
    s.stop()


BOUNDED_RUNS = ("test_chaos_eos.py", "test_chaos_run.py")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The bounded chaos runs go last among this package's tests: their checks then run on a
    Spark JVM the checker tests have warmed up (a cold one took 48 s for the EOS run's check, a
    warm one 21 s). Nothing else moves."""
    here = os.path.dirname(os.path.abspath(__file__))
    mine = [i for i, item in enumerate(items) if os.path.dirname(str(item.path)) == here]
    if not mine:
        return
    block = items[mine[0]:mine[-1] + 1]
    runs = [item for item in block if item.path.name in BOUNDED_RUNS]
    items[mine[0]:mine[-1] + 1] = [item for item in block if item.path.name not in BOUNDED_RUNS] + runs
