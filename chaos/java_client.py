"""The Apache Kafka Java client for tests and the chaos run: kafka-clients resolved from Maven
Central into a cache outside the repository (``$KCOORD_CACHE`` or ``~/.cache/kcoord``), programs compiled
with javac. Java 17 and Maven are on the test machine; their absence fails what needs them."""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
from pathlib import Path

CLIENTS_VERSION = "4.4.0"
SLF4J_VERSION = "2.0.20"
POM = """<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>kcoord.tests</groupId><artifactId>{name}</artifactId><version>1</version>
  <dependencies>
{dependencies}
  </dependencies>
</project>
"""


def maven_classpath(name: str, artifacts: list[tuple[str, str, str]]) -> str:
    """The jars of ``artifacts`` (group, artifact, version) and their runtime dependencies, resolved
    with Maven into ``<cache>/<name>/libs`` on first use."""
    home = Path(os.environ.get("KCOORD_CACHE") or Path.home() / ".cache" / "kcoord") / name
    libs, done = home / "libs", home / ".resolved"
    if done.exists():
        return os.pathsep.join(str(j) for j in sorted(libs.glob("*.jar")))
    home.parent.mkdir(parents=True, exist_ok=True)
    # one resolution at a time: make test's two workers may both need jars on a cold cache, and
    # two Maven runs writing one local repository (~/.m2) at once can corrupt it
    with open(home.parent / ".maven.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not done.exists():
            _resolve(name, home, libs, done, artifacts)
    return os.pathsep.join(str(j) for j in sorted(libs.glob("*.jar")))


def _resolve(name: str, home: Path, libs: Path, done: Path, artifacts: list[tuple[str, str, str]]) -> None:
    mvn = shutil.which("mvn")
    assert mvn is not None, "the Java tests need Maven (mvn)"
    home.mkdir(parents=True, exist_ok=True)
    deps = "\n".join(f"    <dependency><groupId>{g}</groupId><artifactId>{a}</artifactId><version>{v}</version>"
                      "</dependency>" for g, a, v in artifacts)
    (home / "pom.xml").write_text(POM.format(name=name, dependencies=deps))
    shutil.rmtree(libs, ignore_errors=True)
    proc = subprocess.run([mvn, "-q", "-B", "-f", str(home / "pom.xml"), "dependency:copy-dependencies",
                           f"-DoutputDirectory={libs}", "-DincludeScope=runtime"],
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    done.write_text(" ".join(":".join(x) for x in artifacts) + "\n")


def clients_classpath() -> str:
    return maven_classpath(f"kafka-clients-{CLIENTS_VERSION}", [
        ("org.apache.kafka", "kafka-clients", CLIENTS_VERSION), ("org.slf4j", "slf4j-nop", SLF4J_VERSION)])


def compile_program(source: Path, out_dir: Path, classpath: str | None = None) -> str:
    """Compile ``source`` against kafka-clients (or ``classpath``); the classpath to run it with."""
    cp = classpath or clients_classpath()
    javac = shutil.which("javac")
    assert javac is not None, "the Java client tests need a JDK (javac)"
    out_dir.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run([javac, "-cp", cp, "-d", str(out_dir), str(source)], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    return os.pathsep.join([str(out_dir), cp])
