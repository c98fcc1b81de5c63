"""Confluent's REST error answers, shared by the Schema Registry and the REST proxy.

Why one class: both of Confluent's services answer a refusal with an HTTP status and the same
body, ``{"error_code": 40401, "message": "..."}``; each service raises its own subclass where
its rule is checked and turns it into that body at its HTTP entry point.
"""

from __future__ import annotations


class ConfluentError(Exception):
    """An answer other than success: the HTTP status and Confluent's error body."""

    def __init__(self, status: int, error_code: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.error_code = error_code
        self.message = message

    def body(self) -> dict[str, object]:
        return {"error_code": self.error_code, "message": self.message}

