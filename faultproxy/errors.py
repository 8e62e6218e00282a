"""Errors the Toxiproxy API answers with, with Toxiproxy's messages and status codes.

Toxiproxy answers every failed request with `{"error": message, "status": code}`;
clients (ours, toxiproxy-python, the Go and Ruby clients) branch on the status code,
so the codes here follow Toxiproxy's `api.go`: 400 bad input, 404 unknown proxy or
toxic, 409 an existing name, 500 anything the server could not do (e.g. a port taken).
"""

from __future__ import annotations

from http import HTTPStatus
from typing import Any


class ApiError(Exception):
    """A request the API refuses; carries the HTTP status Toxiproxy would send."""

    def __init__(self, message: str, status: HTTPStatus) -> None:
        super().__init__(message)
        self.message = message
        self.status = status

    def to_json(self) -> dict[str, Any]:
        return {"error": self.message, "status": int(self.status)}


def bad_request(detail: str) -> ApiError:
    return ApiError(f"bad request body: {detail}", HTTPStatus.BAD_REQUEST)


def missing_field(field: str) -> ApiError:
    return ApiError(f"missing required field: {field}", HTTPStatus.BAD_REQUEST)


def proxy_not_found(name: str) -> ApiError:
    return ApiError(f"proxy not found: {name}", HTTPStatus.NOT_FOUND)


def proxy_exists(name: str) -> ApiError:
    return ApiError(f"proxy already exists: {name}", HTTPStatus.CONFLICT)


def toxic_not_found(name: str) -> ApiError:
    return ApiError(f"toxic not found: {name}", HTTPStatus.NOT_FOUND)


def toxic_exists(name: str) -> ApiError:
    return ApiError(f"toxic already exists: {name}", HTTPStatus.CONFLICT)


def invalid_stream(value: object) -> ApiError:
    return ApiError(f"stream was invalid, can be either upstream or downstream (got {value!r})",
                    HTTPStatus.BAD_REQUEST)


def invalid_toxic_type(value: object, known: list[str]) -> ApiError:
    return ApiError(f"invalid toxic type: {value!r}; known types: {', '.join(known)}",
                    HTTPStatus.BAD_REQUEST)


def server_error(message: str) -> ApiError:
    return ApiError(message, HTTPStatus.INTERNAL_SERVER_ERROR)
