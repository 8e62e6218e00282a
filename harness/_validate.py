"""Build frozen dataclasses from parsed YAML, with one-line errors a user can act on.

Theory of operation: a config class is a frozen dataclass whose type hints say
what each key holds (int, float, bool, str, an Enum, Optional, tuple[X, ...],
Mapping[str, X], another config dataclass, or Any). Field metadata adds
`min`/`max` bounds and a `help` text used in error messages. After the fields
are converted, a class may define `check(self) -> None` for rules that span
fields; it raises `Invalid(key, problem, fix)` and the loader adds the file and
the key prefix. Every error is a `ConfigError` naming the file, the dotted key
and the fix, so the command line can print it as one line and exit 2.
"""

from __future__ import annotations

import dataclasses
import difflib
import enum
import types
import typing
from collections.abc import Mapping
from typing import Any, TypeVar, Union

from harness.errors import ConfigError

T = TypeVar("T")


class Invalid(Exception):
    """Raised by a config class's `check()`; the loader turns it into a ConfigError."""

    def __init__(self, key: str, problem: str, fix: str = "") -> None:
        super().__init__(problem)
        self.key = key
        self.problem = problem
        self.fix = fix


def bounded(default: Any, *, min: float | None = None, max: float | None = None,
            help: str = "") -> Any:
    """A dataclass field with numeric bounds checked on load."""
    return dataclasses.field(default=default, metadata={"min": min, "max": max, "help": help})


def build(cls: type[T], data: Any, source: str, prefix: str = "", *, checked: bool = True) -> T:
    """Convert `data` (parsed YAML) into an instance of the dataclass `cls`.

    `checked=False` skips the classes' `check()` rules that span fields (each value is still
    converted and bounds-checked): for plain data this program wrote from a config it had
    already validated.
    """
    if data is None:
        data = {}
    if not isinstance(data, Mapping):
        raise ConfigError(source, prefix or "(top level)",
                          f"expected a mapping of keys, found {_describe(data)}",
                          "write it as `key: value` lines")
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    for key in data:
        if not isinstance(key, str) or key not in fields:
            close = difflib.get_close_matches(str(key), list(fields), n=1)
            fix = f"did you mean '{close[0]}'?" if close else f"valid keys: {', '.join(fields)}"
            raise ConfigError(source, _join(prefix, str(key)), "unknown key", fix)
    values: dict[str, Any] = {}
    for name, field in fields.items():
        key = _join(prefix, name)
        if name in data:
            values[name] = _convert(hints[name], data[name], source, key, checked)
            _check_bounds(field, values[name], source, key)
        elif field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING:
            raise ConfigError(source, key, "missing required key", f"add `{name}:` to {prefix or 'the file'}")
    obj = cls(**values)
    check = getattr(obj, "check", None) if checked else None
    if callable(check):
        try:
            check()
        except Invalid as err:
            raise ConfigError(source, _join(prefix, err.key), err.problem, err.fix) from None
    return obj


def to_plain(obj: Any) -> Any:
    """A config object as plain JSON-able data (for manifest.json)."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: to_plain(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, enum.Enum):
        return obj.value
    if isinstance(obj, Mapping):
        return {str(to_plain(k)): to_plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [to_plain(v) for v in obj]
    return obj


def freeze(value: Any) -> Any:
    """Make parsed YAML immutable: dicts become mapping proxies, lists tuples."""
    if isinstance(value, Mapping):
        return types.MappingProxyType({k: freeze(v) for k, v in value.items()})
    if isinstance(value, list):
        return tuple(freeze(v) for v in value)
    return value


def _join(prefix: str, name: str) -> str:
    return f"{prefix}.{name}" if prefix else name


def _describe(value: Any) -> str:
    if value is None:
        return "nothing"
    if isinstance(value, bool):
        return f"the boolean {str(value).lower()}"
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    return f"{type(value).__name__} {value!r}"


def _check_bounds(field: dataclasses.Field[Any], value: Any, source: str, key: str) -> None:
    lo, hi = field.metadata.get("min"), field.metadata.get("max")
    if value is None or not isinstance(value, (int, float)) or isinstance(value, bool):
        return
    if lo is not None and value < lo:
        raise ConfigError(source, key, f"{value} is below the minimum {lo}", f"use a value >= {lo}")
    if hi is not None and value > hi:
        raise ConfigError(source, key, f"{value} is above the maximum {hi}", f"use a value <= {hi}")


def _convert(hint: Any, value: Any, source: str, key: str, checked: bool = True) -> Any:
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if hint is Any:
        return freeze(value)
    if origin in (Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        options = [a for a in args if a is not type(None)]
        errors: list[ConfigError] = []
        for option in options:
            try:
                return _convert(option, value, source, key, checked)
            except ConfigError as err:
                errors.append(err)
        raise errors[0]
    if dataclasses.is_dataclass(hint):
        return build(hint, value, source, key, checked=checked)  # type: ignore[arg-type]
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        choices = [m.value for m in hint]
        if value in choices:
            return hint(value)
        close = difflib.get_close_matches(str(value), [str(c) for c in choices], n=1)
        fix = f"did you mean '{close[0]}'?" if close else f"use one of: {', '.join(map(str, choices))}"
        raise ConfigError(source, key, f"{value!r} is not a valid choice", fix)
    if origin is tuple:
        if not isinstance(value, list):
            raise ConfigError(source, key, f"expected a list, found {_describe(value)}",
                              "write it as a YAML list (`- item` lines or `[a, b]`)")
        item_hint = args[0]
        return tuple(_convert(item_hint, v, source, f"{key}[{i}]", checked) for i, v in enumerate(value))
    if origin in (Mapping, dict, typing.Mapping) or hint in (dict, Mapping):
        if not isinstance(value, Mapping):
            raise ConfigError(source, key, f"expected a mapping, found {_describe(value)}",
                              "write it as `name: value` lines")
        key_hint, value_hint = (args or (str, Any))
        out = {}
        for k, v in value.items():
            out[_convert(key_hint, k, source, f"{key}.{k}", checked)] = _convert(value_hint, v, source, f"{key}.{k}",
                                                                      checked)
        return types.MappingProxyType(out)
    if hint is bool:
        if isinstance(value, bool):
            return value
        raise ConfigError(source, key, f"expected true or false, found {_describe(value)}", "write true or false")
    if hint is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        raise ConfigError(source, key, f"expected a whole number, found {_describe(value)}", "write an integer such as 4")
    if hint is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        raise ConfigError(source, key, f"expected a number, found {_describe(value)}", "write a number such as 2.5")
    if hint is str:
        if isinstance(value, str):
            return value
        raise ConfigError(source, key, f"expected text, found {_describe(value)}", "quote it if needed")
    raise TypeError(f"config field {key}: unsupported type hint {hint!r}")  # a bug in a config class
