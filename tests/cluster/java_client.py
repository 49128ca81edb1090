"""The Apache Kafka Java client for tests: see ``chaos.java_client`` (the chaos run's Java worker
uses it too)."""

from chaos.java_client import (
    CLIENTS_VERSION,
    SLF4J_VERSION,
    clients_classpath,
    compile_program,
    maven_classpath,
)

__all__ = ["CLIENTS_VERSION", "SLF4J_VERSION", "clients_classpath", "compile_program", "maven_classpath"]
