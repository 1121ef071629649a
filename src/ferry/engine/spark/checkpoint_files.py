"""A Spark checkpoint's files wherever Spark can read them: a local directory by plain file
I/O, any other URI (hdfs://, s3a://, abfss://, ...) through Hadoop's FileSystem in the
session's JVM, with the session's Hadoop configuration (as Spark itself opens it)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ferry.config.model import FerryConfig
from ferry.engine.spark.internals import hadoop_configuration, jvm
from ferry.locations import is_local
from ferry.offsets.spark_checkpoint_io import CheckpointStorage, LocalStorage

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["HadoopStorage", "checkpoint_storage", "session_for"]


class HadoopStorage:
    """A directory through `org.apache.hadoop.fs.FileSystem` (over py4j).

    A file is replaced by writing a temporary file beside it and renaming it over (after
    deleting the old one: HDFS's rename does not overwrite)."""

    def __init__(self, spark: SparkSession, location: str) -> None:
        self._jvm = jvm(spark)  # py4j's JVMView (untyped), never None while the session runs
        self._root = self._jvm.org.apache.hadoop.fs.Path(location.rstrip("/") or "/")
        self._fs = self._root.getFileSystem(hadoop_configuration(spark))
        self._location = location.rstrip("/")

    def _path(self, path: str) -> Any:  # a py4j JavaObject (py4j is untyped)
        return self._jvm.org.apache.hadoop.fs.Path(self._root, path) if path else self._root

    def where(self, path: str) -> str:
        return f"{self._location}/{path}" if path else self._location

    def exists(self, path: str) -> bool:
        return bool(self._fs.exists(self._path(path)))

    def read(self, path: str) -> bytes | None:
        target = self._path(path)
        if not self._fs.exists(target) or self._fs.getFileStatus(target).isDirectory():
            return None
        stream = self._fs.open(target)
        try:
            return bytes(self._jvm.org.apache.commons.io.IOUtils.toByteArray(stream))
        finally:
            stream.close()

    def names(self, path: str) -> list[str]:
        target = self._path(path)
        if not self._fs.exists(target):
            return []
        return sorted(str(s.getPath().getName()) for s in self._fs.listStatus(target))

    def write(self, path: str, data: bytes) -> None:
        target = self._path(path)
        tmp = self._jvm.org.apache.hadoop.fs.Path(target.getParent(), f".{target.getName()}.tmp")
        stream = self._fs.create(tmp, True)
        try:
            stream.write(bytearray(data))
        finally:
            stream.close()
        if self._fs.exists(target):
            self._fs.delete(target, False)
        if not self._fs.rename(tmp, target):
            raise OSError(f"{self.where(path)}: could not rename {tmp} over it")

    def delete(self, path: str) -> None:
        self._fs.delete(self._path(path), False)


def checkpoint_storage(location: str, spark: Callable[[], SparkSession]) -> CheckpointStorage:
    """Local files for a path or file: URI; Hadoop's FileSystem otherwise (`spark()` gives
    the session, started only then)."""
    if is_local(location):
        return LocalStorage(location)
    return HadoopStorage(spark(), location)


def session_for(config: FerryConfig) -> Callable[[], SparkSession]:
    """The running Spark session if there is one, else one from the config's `spark.*` keys
    (`spark.hadoop.*` for the filesystem's settings), started when first asked for."""

    def get() -> SparkSession:
        from pyspark.sql import SparkSession

        from ferry.engine.spark.session import spark_session

        return SparkSession.getActiveSession() or spark_session(config)

    return get
