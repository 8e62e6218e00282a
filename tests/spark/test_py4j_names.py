"""py4j keeps the classes and static methods it resolved in a session's JVM view (analysis.py4j_names)."""

from __future__ import annotations

import pytest
from py4j import java_gateway
from py4j.protocol import Py4JError
from pyspark.sql import SparkSession

from analysis.py4j_names import remember_resolved_names


def test_a_class_found_through_the_views_imports_is_resolved_once(spark: SparkSession) -> None:
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    utils = jvm.PythonUtils
    assert jvm.PythonUtils is utils and vars(jvm)["PythonUtils"] is utils
    to_seq = utils.toSeq
    assert utils.toSeq is to_seq and isinstance(to_seq, java_gateway.JavaMember)
    assert list(jvm.PythonUtils.toSeq(["a", "b"]).toList().mkString(",").split(",")) == ["a", "b"]


def test_a_static_field_is_read_every_time_and_what_is_no_class_or_method_is_not_kept(spark: SparkSession) -> None:
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    integer = getattr(jvm, "java.lang.Integer")
    assert integer.MAX_VALUE == 2 ** 31 - 1 and "MAX_VALUE" not in vars(integer)
    # py4j takes a name that is no class for a package (a class of that name may appear later)
    assert isinstance(jvm.NoSuchClassAnywhere, java_gateway.JavaPackage)
    assert "NoSuchClassAnywhere" not in vars(jvm)
    with pytest.raises(Py4JError, match="does not exist"):
        _ = integer.noSuchMember
    assert "noSuchMember" not in vars(integer)


def test_installing_twice_wraps_py4j_once(spark: SparkSession) -> None:
    once = java_gateway.JVMView.__getattr__
    remember_resolved_names()
    assert java_gateway.JVMView.__getattr__ is once
    assert not hasattr(once.__wrapped__, "__wrapped__")
