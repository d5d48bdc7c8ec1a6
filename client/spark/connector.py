"""Spark's own Kafka connector (``org.apache.spark:spark-sql-kafka-0-10_2.13``) for a PySpark session: its
jars gathered through Maven, for ``spark.jars``.

    from kbroker.client.spark.connector import connector_jars
    spark = SparkSession.builder.config("spark.jars", ",".join(connector_jars())).getOrCreate()
    spark.readStream.format("kafka")...

Spark looks a format up on the classpath its JVM started with: the jars must be in the first session's
configuration of a Python process (a later session's ``spark.jars`` is too late for ``format("kafka")``).

``connector_jars()`` gathers them with Maven once per version (``client.maven``) into a cache
(``$XDG_CACHE_HOME/kbroker``, else ``~/.cache/kbroker``) and returns the jars PySpark does not ship itself
(the connector, its token provider, kafka-clients, commons-pool2). The version defaults to the newest the
Maven registry serves that runs on the PySpark installed here (``KBROKER_SPARK_KAFKA_VERSION`` overrides it):
4.2.0, tested with PySpark 4.3.0, for which no connector was published to the registry yet.
"""

from __future__ import annotations

import glob
import os
import re

from kbroker.client.maven import gather_once

VERSION = os.environ.get("KBROKER_SPARK_KAFKA_VERSION", "4.2.0")

_POM = """<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>io.kbroker</groupId><artifactId>spark-kafka-connector</artifactId><version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency>
      <groupId>org.apache.spark</groupId><artifactId>spark-sql-kafka-0-10_2.13</artifactId>
      <version>{version}</version>
    </dependency>
  </dependencies>
</project>
"""


def _artifact(jar: str) -> str:
    """A jar's artifact name without its version: ``kafka-clients-3.9.2.jar`` -> ``kafka-clients``."""
    return re.sub(r"-\d+(\.\d+)+[\w.\-]*\.jar$", "", os.path.basename(jar))


def _pyspark_jars() -> set[str]:
    import pyspark
    return {_artifact(j) for j in glob.glob(os.path.join(os.path.dirname(pyspark.__file__), "jars", "*.jar"))}


def cache_dir(version: str = VERSION) -> str:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "kbroker", f"spark-sql-kafka-{version}")


def connector_jars(version: str = VERSION) -> list[str]:
    """The jars to add to ``spark.jars``, fetched through Maven on first use (``client.maven``)."""
    cache = cache_dir(version)
    os.makedirs(cache, exist_ok=True)
    pom = os.path.join(cache, "pom.xml")
    with open(pom + f".{os.getpid()}", "w") as f:   # (written whole, then renamed: another process may read it)
        f.write(_POM.format(version=version))
    os.replace(pom + f".{os.getpid()}", pom)
    libs = gather_once(pom, cache, f"Spark's Kafka connector {version}")
    shipped = _pyspark_jars()
    return sorted(j for j in glob.glob(os.path.join(libs, "*.jar")) if _artifact(j) not in shipped)
