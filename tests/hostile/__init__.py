"""Hostile conditions: fuzzing, floods, disk faults, crash safety, TLS and SASL."""
