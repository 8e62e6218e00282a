"""The one way the analysis gets a SparkSession.

Theory of operation. A process has at most one SparkContext, so this module
keeps the session it created and hands the same one to every caller
(`get_spark()`), which is what makes the checker, the performance analysis
and the tests share one JVM. The master comes from, in order: the argument
(`txnbench check --master`), `$TXNBENCH_SPARK_MASTER`, then `local[*]`.

The session is configured for running beside a benchmark on a shared machine:
everything binds 127.0.0.1 (or `$SPARK_LOCAL_IP` when the user sets it, for
executors of a cluster on other hosts) and the web UI is off (no stray listening ports),
Spark's and Hadoop's INFO/WARN chatter is silenced (errors still show), the
console progress bar is off (the checker prints its own progress), and times
are UTC. Shuffle partitions start small and are raised for large inputs with
`size_shuffle_partitions()`; adaptive query execution then coalesces those of
shuffles, not those of persisted frames.

Public API (stable; other analysis modules build on it):

    get_spark(master=None, *, app_name="txnbench-analysis", small_input=False, memory=None,
              whole_heap=False) -> SparkSession
    whole_heap_options(memory) -> tuple[str, ...]  (the driver JVM's options for a heap committed whole)
    driver_memory(input_bytes=0) -> str          (the driver heap for that much history)
    fills_large_heap(input_bytes) -> bool        (a history given the large heap, committed whole)
    resolve_master(master=None) -> str
    size_shuffle_partitions(spark, input_bytes) -> int
    tune_for_input(spark, input_bytes) -> int     (partitions + small-input mode)
    single_partition_mode() -> bool               (small-input mode is on in this process)
    stop_spark() -> None
    MASTER_ENV, DRIVER_MEMORY_ENV, CDS_ENV, DEFAULT_MASTER, DEFAULT_DRIVER_MEMORY
    SMALL_INPUT_BYTES, SMALL_INPUT_CODEGEN_BYTES, LARGE_INPUT_MEMORY_BYTES
"""

from __future__ import annotations

import contextlib
import hashlib
import math
import os
import re
import shutil
import sys
import tempfile
import threading
from pathlib import Path
from typing import TYPE_CHECKING

from harness.errors import EnvironmentProblem

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

MASTER_ENV = "TXNBENCH_SPARK_MASTER"
DRIVER_MEMORY_ENV = "TXNBENCH_SPARK_DRIVER_MEMORY"
DEFAULT_MASTER = "local[*]"
DEFAULT_DRIVER_MEMORY = "4g"
# Above this much history the default driver heap is LARGE_INPUT_DRIVER_MEMORY: a
# 19.8M-event history (6.7 GB of JSONL) checked with 4 GiB spent 20 min in 6,500 full
# collections (old generation 96% full) without finishing. With 8 GiB the check's
# processes peaked at 7.6-8.3 GiB resident; with 6 GiB at 6.8 GiB, 5% slower (2026-11-29,
# docs/checks.md): 6 keeps a check within 8 GiB of the machine.
LARGE_INPUT_MEMORY_BYTES = 2 * 1024 ** 3
LARGE_INPUT_DRIVER_MEMORY_GIB = 6
# Bytes of history (JSONL) per shuffle partition of a large check (at least one per core). The
# frames the checks share keep the partitions of the shuffle that made them, so this is also how
# many tasks every scan of them runs: 64 MiB made 101 at 20 million events, mostly of a MB or
# less, and coalescing them lost the partitioning joins by value reuse (docs/checks.md).
BYTES_PER_PARTITION = 512 * 1024 * 1024
MAX_SHUFFLE_PARTITIONS = 2000
# Inputs up to this size run in "small-input mode", one partition (see tune_for_input).
SMALL_INPUT_BYTES = 512 * 1024 * 1024
# No shuffle writes one file per reduce partition (get_spark: `spark.shuffle.sort.bypassMergeThreshold`).
SHUFFLE_BYPASS_MERGE_THRESHOLD = 0
# Small inputs above this size are mostly data: generated code pays back its compilation there.
SMALL_INPUT_CODEGEN_BYTES = 16 * 1024 * 1024

# Settings for small inputs, and the values large inputs get back.
_SMALL_INPUT_CONF = {
    "spark.sql.adaptive.enabled": ("false", "true"),
    "spark.sql.autoBroadcastJoinThreshold": ("-1", "10485760"),
    # Joins of single-partition inputs need no shuffle, but Spark only skips it when it
    # believes both sides are under this size, and its estimates of checkpointed frames
    # are far above their real size. The small checker's frames are single-partition leaves
    # (analysis.checks.context.single_partition_leaf): trust them whatever their estimate.
    "spark.sql.maxSinglePartitionBytes": (str(2**63 - 1), "128m"),
    # Runtime bloom filters (on by default since Spark 3.4) add, for a join whose other side
    # "looks" large, a subquery that aggregates a filter over one side first: a scan and a job
    # of its own. The checker's joins are between persisted frames whose size estimates are
    # far above their real size (a join's estimate is the product of its inputs'), so nearly
    # every join got one: 132 of the 329 exchanges of the large checks' plans, and as many
    # extra jobs, each scanning a frame the join scans again anyway. Small inputs keep the
    # default (their plans have none: the single-partition leaves' estimates are bounded).
    "spark.sql.optimizer.runtime.bloomFilter.enabled": ("true", "false"),
    # Adaptive execution coalesces a shuffle's partitions to its advisory size (64 MB) rather
    # than to keep every core's share small. It leaves persisted frames alone
    # (`spark.sql.optimizer.canChangeCachedPlanOutputPartitioning`, false, Spark's default): a
    # frame kept by value stays partitioned by value, so the checks that join two such frames,
    # or one with a frame shuffled by value, do not shuffle it again (tests/spark/test_session.py).
    # Few shuffle partitions (BYTES_PER_PARTITION) keep its scans to few tasks.
    "spark.sql.adaptive.coalescePartitions.parallelismFirst": ("true", "false"),
}
# Code generation: off (interpreted expressions) for the smallest inputs, on otherwise.
_CODEGEN_CONF = {
    "spark.sql.codegen.wholeStage": ("false", "true"),
    "spark.sql.codegen.factoryMode": ("NO_CODEGEN", "FALLBACK"),
}

# Driver JVM options for a session that only sees small inputs. A check of a few thousand
# events is mostly Spark analysing and planning queries once: code the JVM runs for a few
# seconds, where the optimising compiler's work never pays back. C1 alone halved the wall
# time of `txnbench check` on the golden histories (docs/checks.md).
_SMALL_INPUT_JVM = ("-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC")
# Driver JVM options for every other session: the throughput collector. A large check allocates
# fast and keeps little (its persisted frames): G1's concurrent work and write barriers cost more
# of two cores than the parallel collector's pauses. 20 million events from the cache, G1 and
# parallel alternated: 164.3 s against 178.8 s median wall, 292.0 s against 319.0 s of driver CPU,
# a lower peak resident memory (docs/checks.md, "The parallel collector").
_DRIVER_JVM = ("-XX:+UseParallelGC",)
# A size as Spark reads `spark.driver.memory`: a number of MiB, or of the unit k, m, g or t that follows.
_SPARK_SIZE = re.compile(r"^\s*(\d+)\s*([kmgt]?)b?\s*$", re.IGNORECASE)
_MIB_PER_UNIT = {"k": 1 / 1024, "": 1, "m": 1, "g": 1024, "t": 1024 ** 2}
# Metaspace the driver may fill before its first collection for it: a 20M-event check loads
# about 72 MB of class metadata, and each threshold the JVM's small default met on the way
# was a full collection (two, of about 0.1 s each, in the check's first five seconds).
_WHOLE_HEAP_METASPACE = "-XX:MetaspaceSize=160m"

# Class-data sharing for either driver JVM. Spark loads and verifies thousands of classes from
# its jars at every start; a dynamic CDS archive (JDK 13+) holds them parsed and verified,
# which roughly halved the JVM's CPU for starting a small check's session, and took a large
# session's start (tools.bench.bare_session) from 11.4 to 6.2 s (docs/checks.md). The first
# session of each kind (small-input or not) of a Spark installation writes its archive as its
# JVM exits (-XX:ArchiveClassesAtExit, published atomically once the JVM is gone); later ones
# map it (-XX:SharedArchiveFile). A stale or unreadable archive only means the JVM starts
# without it (-Xshare:auto). TXNBENCH_SPARK_CDS=0 turns this off; =map maps an archive that
# exists and never writes one (the test suite's setting, tests/conftest.py says why).
CDS_ENV = "TXNBENCH_SPARK_CDS"
CDS_MAP_ONLY = "map"
_CDS_QUIET = "-Xlog:cds*=off"
# How long an exiting process waits for its driver JVM to finish writing the archive.
_CDS_DUMP_WAIT_S = 120.0

# Root at WARN and Spark's own loggers at WARN (so PySpark does not announce a changed
# "default log level"), with the noisy start-up loggers turned down to ERROR.
_LOG4J2_PROPERTIES = """\
rootLogger.level = warn
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{yy/MM/dd HH:mm:ss} %p %c{1}: %m%n
logger.hadoop.name = org.apache.hadoop
logger.hadoop.level = error
logger.parquet.name = org.apache.parquet
logger.parquet.level = error
logger.utils.name = org.apache.spark.util.Utils
logger.utils.level = error
logger.shutdown.name = org.apache.spark.util.ShutdownHookManager
logger.shutdown.level = error
"""

_lock = threading.Lock()
_session: SparkSession | None = None  # the session this module created, if any
_session_master: str | None = None
# Set by tune_for_input: the session runs in small-input mode, where every frame the checker
# builds is one partition (see single_partition_mode).
_single_partition = False


def resolve_master(master: str | None = None) -> str:
    """The master to use: the argument, else `$TXNBENCH_SPARK_MASTER`, else `local[*]`."""
    chosen = master or os.environ.get(MASTER_ENV) or DEFAULT_MASTER
    return chosen.strip()


def _log4j_config_file() -> Path:
    """Write the quiet log4j2 configuration once per content and return its path."""
    digest = hashlib.sha256(_LOG4J2_PROPERTIES.encode()).hexdigest()[:12]
    path = Path(tempfile.gettempdir()) / f"txnbench-log4j2-{digest}.properties"
    if not path.exists():
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(_LOG4J2_PROPERTIES, encoding="utf-8")
        os.replace(tmp, path)
    return path


def _class_archive(jvm_options: tuple[str, ...]) -> Path:
    """Where the CDS archive of this Spark installation, Java and JVM options lives.

    An archive is only valid for the classpath and JVM it was made with, so the name
    carries a digest of the PySpark installation, the Java found, and the options.
    """
    import pyspark

    java_home = os.environ.get("JAVA_HOME")
    java = Path(java_home) / "bin" / "java" if java_home else shutil.which("java")
    parts = [pyspark.__version__, str(_pyspark_dir()), " ".join(jvm_options)]
    if java is not None and Path(java).exists():
        real = Path(java).resolve()
        parts += [str(real), str(real.stat().st_mtime_ns)]
    digest = hashlib.sha256("\0".join(parts).encode()).hexdigest()[:16]
    return Path(tempfile.gettempdir()) / f"txnbench-spark-cds-{digest}.jsa"


def _pyspark_dir() -> Path:
    import pyspark

    return Path(pyspark.__file__).resolve().parent


# Beside each archive, the PySpark installation it was made for: an archive whose installation
# is gone (a deleted virtual environment, a clean clone's) is never mapped again.
_OWNER_SUFFIX = ".owner"


def _remove_orphaned_archives(folder: Path) -> None:
    """Delete the archives (about 170 MB each) whose PySpark installation no longer exists.

    Only archives whose owner file says so: one without it (written before owners were
    recorded, or another tool's) is left alone."""
    for owner in folder.glob(f"txnbench-spark-cds-*{_OWNER_SUFFIX}"):
        try:
            if Path(owner.read_text(encoding="utf-8").strip()).exists():
                continue
            orphan = owner.with_suffix(".jsa")
            _remove_abandoned(orphan)   # and its partial copies, as for one's own archive
            orphan.unlink(missing_ok=True)
            owner.unlink(missing_ok=True)
        except OSError:   # another user's, or removed meanwhile
            continue


def whole_heap_options(memory: str) -> tuple[str, ...]:
    """The driver JVM's options for a heap committed whole from the start (`-Xms` at `memory`,
    Spark's form of a size), for a session that will fill it: nothing when `memory` is not a
    size the JVM can be given.

    Why: a large check keeps millions of rows in the heap. Started small (378 MB) and grown
    step by step, the parallel collector resized it in full collections on the way: 20
    million events from the cache, 12 full and 93 young pauses, 10.3 s with the program
    stopped; with the heap whole from the start, 1 full and 76-82 young, 6.2-6.9 s
    (docs/checks.md, "The heap whole from the start")."""
    match = _SPARK_SIZE.match(memory)
    if match is None:
        return ()
    mib = int(int(match.group(1)) * _MIB_PER_UNIT[match.group(2).lower()])
    return (f"-Xms{mib}m", _WHOLE_HEAP_METASPACE) if mib >= 1 else ()


def _driver_jvm_options(small_input: bool, *, write_archive: bool = True
                        ) -> tuple[tuple[str, ...], tuple[Path, Path] | None]:
    """The driver JVM's options for a session of that kind, with its class archive; and
    (being written, final) when this session writes the archive."""
    jvm = _SMALL_INPUT_JVM if small_input else _DRIVER_JVM
    cds, writing = _cds_options(jvm, write=write_archive)
    return (*jvm, *cds), writing


def _cds_options(jvm_options: tuple[str, ...], *, write: bool = True
                 ) -> tuple[tuple[str, ...], tuple[Path, Path] | None]:
    """JVM options to use (or, where `write`, write) the class archive; and (being written, final)
    when writing."""
    setting = os.environ.get(CDS_ENV, "1").strip().lower()
    if setting in ("0", "false", "no", "off"):
        return (), None
    write = write and setting != CDS_MAP_ONLY
    archive = _class_archive(jvm_options)
    # Before the archive exists too: processes that started writing it together and were then
    # killed leave their partial copies (about 170 MB each) behind a published archive.
    _remove_abandoned(archive)
    if archive.is_file() and archive.stat().st_size > 0:
        return (f"-XX:SharedArchiveFile={archive}", "-Xshare:auto", _CDS_QUIET), None
    if not write:
        return (), None
    # Writing one is rare (once per installation, Java and kind): the time to sweep the others.
    _remove_orphaned_archives(archive.parent)
    with contextlib.suppress(OSError):
        archive.with_suffix(_OWNER_SUFFIX).write_text(str(_pyspark_dir()), encoding="utf-8")
    partial = archive.with_name(f"{archive.stem}.{os.getpid()}.partial")
    return (f"-XX:ArchiveClassesAtExit={partial}", _CDS_QUIET), (partial, archive)


# A partial archive this old whose process is gone was abandoned (the process was killed).
_ABANDONED_AFTER_S = 600.0


def _remove_abandoned(archive: Path) -> None:
    """Delete partial archives of processes that died before publishing them (they are large)."""
    import time

    for partial in archive.parent.glob(f"{archive.stem}.*.partial"):
        try:
            pid = int(partial.suffixes[-2].lstrip("."))
            os.kill(pid, 0)
            continue  # its process still runs (or another user's: leave it)
        except (ValueError, IndexError, PermissionError):
            continue
        except ProcessLookupError:
            pass
        try:
            if time.time() - partial.stat().st_mtime > _ABANDONED_AFTER_S:
                partial.unlink(missing_ok=True)
        except OSError:
            pass


def _publish_archive_at_exit(session: SparkSession, partial: Path, archive: Path) -> None:
    """At interpreter exit: stop Spark, let the JVM exit and write the archive, then publish it.

    The JVM writes the archive while it exits, which PySpark otherwise leaves to happen
    after Python is gone; waiting here (bounded) lets the archive appear whole under its
    final name with one rename, so no other process ever maps a half-written file.
    """
    import atexit

    def publish() -> None:
        proc = getattr(getattr(session.sparkContext, "_gateway", None), "proc", None)
        try:
            session.stop()
            if proc is not None and proc.stdin is not None:
                proc.stdin.close()  # the gateway JVM exits when its stdin closes
            if proc is not None:
                proc.wait(timeout=_CDS_DUMP_WAIT_S)
            if partial.is_file() and partial.stat().st_size > 0 and proc is not None and proc.returncode == 0:
                os.replace(partial, archive)
        except Exception:  # best effort: without an archive the next JVM just starts slower
            pass
        finally:
            partial.unlink(missing_ok=True)

    atexit.register(publish)


def _is_alive(session: SparkSession) -> bool:
    try:
        jsc = session.sparkContext._jsc
        return jsc is not None and not jsc.sc().isStopped()
    except Exception:
        return False


def fills_large_heap(input_bytes: int) -> bool:
    """Whether a check of `input_bytes` of history gets the large driver heap (`driver_memory`),
    and fills it, so its session asks for it whole (`get_spark(whole_heap=...)`)."""
    return input_bytes > LARGE_INPUT_MEMORY_BYTES


def driver_memory(input_bytes: int = 0, physical_bytes: int | None = None) -> str:
    """The driver heap for a session that reads `input_bytes` of history.

    `$TXNBENCH_SPARK_DRIVER_MEMORY` wins. Otherwise 4g, and for more than 2 GiB of
    history 6g, but never more than half of this machine's memory (the heap is a cap
    the JVM grows to, and Spark sizes its caches from it).
    """
    chosen = os.environ.get(DRIVER_MEMORY_ENV)
    if chosen:
        return chosen
    if not fills_large_heap(input_bytes):
        return DEFAULT_DRIVER_MEMORY
    if physical_bytes is None:
        try:
            physical_bytes = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        except (OSError, ValueError):
            physical_bytes = 0
    half_gib = physical_bytes // 2 // 1024 ** 3
    return f"{max(4, min(LARGE_INPUT_DRIVER_MEMORY_GIB, half_gib))}g"


def get_spark(master: str | None = None, *, app_name: str = "txnbench-analysis",
              small_input: bool = False, memory: str | None = None, whole_heap: bool = False,
              write_class_archive: bool = True) -> SparkSession:
    """The process's SparkSession, created on first use.

    Args:
        master: a Spark master URL; None reuses whatever session is running, or
            starts one on `$TXNBENCH_SPARK_MASTER` / `local[*]`.
        app_name: the application name of a new session.
        small_input: the session will only see small inputs (the CLI checking one
            small history): its driver JVM starts with the client compiler only and
            the serial collector (_SMALL_INPUT_JVM); otherwise with the parallel
            collector (_DRIVER_JVM); either with the class archive of its kind
            (_cds_options). Ignored when a session runs.
        memory: the driver heap of a new session (`driver_memory()`); default
            `$TXNBENCH_SPARK_DRIVER_MEMORY` or 4g.
        whole_heap: a new session's driver commits its whole heap at the start
            (`whole_heap_options`): for a session that will fill it, a history above
            LARGE_INPUT_MEMORY_BYTES. Ignored when a session runs.
        write_class_archive: where no class archive of its kind exists yet, a new session's
            JVM writes one as it exits (_cds_options). False only maps one that exists: for a
            process that may end without its exit handlers, as a pytest-xdist worker does, whose
            JVM would go on writing, after the process is gone, an archive nobody publishes
            (tests/spark/conftest.py). Ignored when a session runs.

    Raises:
        EnvironmentProblem: Spark could not start (usually no Java 17+), or a
            different master was asked for than the session another component
            of this process already started.
    """
    global _session, _session_master
    with _lock:
        if _session is not None and _is_alive(_session):
            if master is None or resolve_master(master) == _session_master:
                return _session
            # An explicit, different master: restart our own session on it.
            print(f"txnbench: restarting Spark on {resolve_master(master)} "
                  f"(was {_session_master})", file=sys.stderr)
            _session.stop()
            _session = None
        from pyspark.sql import SparkSession

        from analysis.py4j_names import remember_resolved_names
        remember_resolved_names()   # a tenth of a small check's time was py4j finding names again

        active = SparkSession.getActiveSession()
        if active is not None and _is_alive(active):
            running = active.sparkContext.master
            if master is not None and resolve_master(master) != running:
                raise EnvironmentProblem(
                    f"Spark is already running on {running} in this process, so it cannot "
                    f"start on {resolve_master(master)}; call analysis.spark.stop_spark() first "
                    f"or leave --master out")
            _session, _session_master = active, running
            return active

        chosen = resolve_master(master)
        # The driver and any local executors talk over loopback only, unless the user names
        # another address of this host (executors of a cluster on other hosts must reach it).
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        driver_host = os.environ["SPARK_LOCAL_IP"]
        memory = memory or driver_memory()
        jvm, writing = _driver_jvm_options(small_input, write_archive=write_class_archive)
        builder = (
            SparkSession.builder.master(chosen).appName(app_name)
            .config("spark.driver.memory", memory)
            .config("spark.driver.host", driver_host)
            .config("spark.driver.bindAddress", driver_host)
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
            .config("spark.driver.extraJavaOptions",
                    " ".join([f"-Dlog4j2.configurationFile=file:{_log4j_config_file()}", *jvm,
                              *(whole_heap_options(memory) if whole_heap else ())]))
            .config("spark.sql.session.timeZone", "UTC")
            # PySpark's DataFrame debugging wraps every `functions.*` call in five extra py4j
            # round trips (it records the Python call site for error messages): 18,000 of the
            # 32,000 round trips of a small check, each up to a millisecond on a loaded machine.
            .config("spark.python.sql.dataFrameDebugging.enabled", "false")
            .config("spark.sql.shuffle.partitions", str(_default_parallelism_guess(chosen)))
            .config("spark.sql.adaptive.enabled", "true")
            .config("spark.sql.adaptive.coalescePartitions.enabled", "true")
            .config("spark.sql.sources.partitionOverwriteMode", "static")
            # Persisted frames are narrow and short-lived: compressing them costs more CPU than it saves.
            .config("spark.sql.inMemoryColumnarStorage.compressed", "false")
            # Every shuffle writes one sorted file per map task, never one file per reduce partition:
            # below this many partitions Spark's default writes one file each, and a large check's
            # many small shuffles (a few MB over 100 partitions, from 100 map tasks) spent most of
            # their time opening and closing 10,000 files a stage (20 million events: 237 s of task
            # CPU with them, 179 s without; docs/checks.md).
            .config("spark.shuffle.sort.bypassMergeThreshold", str(SHUFFLE_BYPASS_MERGE_THRESHOLD))
        )
        try:
            session = builder.getOrCreate()
        except Exception as err:  # py4j / launcher errors have many shapes
            raise EnvironmentProblem(
                f"Spark could not start on {chosen} ({type(err).__name__}: "
                f"{str(err).strip().splitlines()[0] if str(err).strip() else 'no detail'}); "
                f"PySpark 4 needs Java 17 or newer on PATH or in JAVA_HOME (run `make check-java`)"
            ) from err
        session.sparkContext.setLogLevel("ERROR")
        if writing is not None:
            _publish_archive_at_exit(session, *writing)
        _session, _session_master = session, chosen
        return session


def _default_parallelism_guess(master: str) -> int:
    """Initial shuffle partitions before the input size is known: the local core count."""
    if master.startswith("local"):
        inside = master[master.find("[") + 1:master.find("]")] if "[" in master else "1"
        if inside in ("*", ""):
            return max(1, os.cpu_count() or 1)
        try:
            return max(1, int(inside.split(",")[0]))
        except ValueError:
            return max(1, os.cpu_count() or 1)
    return 200


def size_shuffle_partitions(spark: SparkSession, input_bytes: int) -> int:
    """Set `spark.sql.shuffle.partitions` for an input of `input_bytes` (JSONL size).

    At least the default parallelism (every core busy), about one partition per
    BYTES_PER_PARTITION (512 MiB) of history above that, at most 2000. Returns the number set.
    """
    cores = max(1, spark.sparkContext.defaultParallelism)
    wanted = max(cores, math.ceil(max(0, input_bytes) / BYTES_PER_PARTITION))
    partitions = min(MAX_SHUFFLE_PARTITIONS, wanted)
    spark.conf.set("spark.sql.shuffle.partitions", str(partitions))
    return partitions


def tune_for_input(spark: SparkSession, input_bytes: int) -> int:
    """Size shuffle partitions for `input_bytes` and pick the execution mode; return the partitions.

    Up to SMALL_INPUT_BYTES (512 MiB of history, about 1.5 million events) Spark's
    fixed costs dominate: each adaptive query stage becomes its own job, broadcasts
    are jobs, and every shuffle is a stage. Small inputs therefore run in one
    partition (the checker's frames are single-partition leaves, so joins, windows
    and aggregations need no shuffle), with adaptive execution and broadcast joins
    off. Measured on 2 cores, this beat the large-input settings at every size up to
    2 million events (docs/checks.md): one task does the checks, but nothing waits
    for shuffles, stages or re-planning.
    Code generation is off too up to SMALL_INPUT_CODEGEN_BYTES (16 MiB), where
    compiling generated code costs more CPU than the data (interpreted expressions);
    above that the data is most of the work and generated code pays back. Larger
    inputs get the defaults back.
    """
    global _single_partition
    small = input_bytes <= SMALL_INPUT_BYTES
    _single_partition = small
    if small:
        # One partition: every stage is one task, and nothing is gained by splitting a few MB.
        spark.conf.set("spark.sql.shuffle.partitions", "1")
        partitions = 1
    else:
        partitions = size_shuffle_partitions(spark, input_bytes)
    for key, (small_value, large_value) in _SMALL_INPUT_CONF.items():
        spark.conf.set(key, small_value if small else large_value)
    interpreted = input_bytes <= SMALL_INPUT_CODEGEN_BYTES
    for key, (off, on) in _CODEGEN_CONF.items():
        spark.conf.set(key, off if interpreted else on)
    return partitions


def single_partition_mode() -> bool:
    """True while the session is in small-input mode (tune_for_input): every frame is one partition.

    Frames built in this mode keep to one partition so that no join, aggregation or
    window needs a shuffle. A union of one-partition frames has one partition per
    input, so the analysis coalesces unions in this mode (analysis.model.union_all).
    """
    return _single_partition


def stop_spark() -> None:
    """Stop the session this module created (tests and tools; the CLI lets exit do it)."""
    global _session, _session_master
    with _lock:
        if _session is not None:
            _session.stop()
        _session, _session_master = None, None
