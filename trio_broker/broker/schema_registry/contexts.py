"""Schema contexts: Confluent's qualified subject names (``:.ctx:subject``) and the
``/contexts/{context}/...`` path forms, as plain functions over strings.

Why contexts: Schema Linking copies a registry's subjects into another one under a context of
their own, and each context numbers its schemas apart, so the copied ids stay the ids the
copied records carry. A subject in the default context ``.`` is stored and answered unqualified
(``:.:orders`` is ``orders``); any other is stored qualified, in the ``_schemas`` key and value
alike, as Confluent's ``QualifiedSubject`` writes it.

The path forms are Confluent's ``ContextFilter``: ``/contexts/.ctx/subjects/s/versions`` is
``/subjects/:.ctx:s/versions``, ``/contexts/.ctx/config`` is ``/config/:.ctx:``, and the
``subject`` / ``subjectPrefix`` queries of ``/schemas/ids/...`` and ``/subjects`` are qualified
with the context, each unless it already names one.
"""

from __future__ import annotations

from urllib.parse import unquote

from .errors import RegistryError

DEFAULT_CONTEXT = "."
#: ``:*:``: any context (Confluent's default ``subjectPrefix``)
WILDCARD = ":*:"
#: the context whose config and mode apply to every context without its own
GLOBAL_CONTEXT = ".__GLOBAL"


def split(subject: str) -> tuple[str, str]:
    """``subject`` -> (context, unqualified name); ``*`` for the wildcard context."""
    if subject.startswith(":."):
        end = subject.find(":", 2)
        if end < 0:
            return subject[1:], ""
        return subject[1:end], subject[end + 1:]
    if subject.startswith(WILDCARD):
        return "*", subject[len(WILDCARD):]
    return DEFAULT_CONTEXT, subject


def is_valid_subject(subject: str, *, config_or_mode: bool = False) -> bool:
    """Confluent's ``QualifiedSubject.isValidSubject``: no control character, not the reserved
    names ``__GLOBAL`` and ``__EMPTY``, and outside the global context except for config and
    mode (an empty name stays valid, as Confluent keeps it for compatibility)."""
    if any(ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F for c in subject):
        return False
    context, name = split(subject)
    if name in ("__GLOBAL", "__EMPTY"):
        return False
    return config_or_mode or context != GLOBAL_CONTEXT


def delimited(context: str) -> str:
    """A context as a subject prefix: ``:.ctx:``, and nothing for the default context."""
    return "" if context == DEFAULT_CONTEXT else f":{context}:"


def normalize(subject: str) -> str:
    """The stored form of ``subject``: the default context's prefix dropped."""
    context, name = split(subject)
    return subject if context == "*" else delimited(context) + name


def qualify(subject: str, parent: str) -> str:
    """A reference's ``subject`` as seen from ``parent``'s schema: in ``parent``'s context
    unless it names another."""
    context, name = split(subject)
    if context != DEFAULT_CONTEXT:
        return subject
    return delimited(context_of(parent)) + name


def context_of(subject: str) -> str:
    return split(subject)[0]


def is_context(subject: str) -> bool:
    """Whether ``subject`` names a context only (``:.ctx:``), for config and mode."""
    return split(subject)[1] == ""


def normalize_context(text: str) -> str:
    """A context as given in a path (``.ctx``, ``ctx``, ``:.ctx:``) -> its delimited form
    (Confluent's ``normalizeContext``); 400 when the name holds a colon."""
    context = text.removeprefix(":").removesuffix(":")
    if ":" in context:
        raise RegistryError(400, 400, f"Context name '{context}' cannot contain a colon")
    if not context.startswith("."):
        context = "." + context
    return delimited(context)


def _qualified(prefix: str, value: str) -> str:
    if unquote(value).startswith((":.", WILDCARD)):
        return value
    return prefix + value


def rewrite(path: str, query: list[tuple[str, str]]) -> tuple[str, list[tuple[str, str]]]:
    """``/contexts/{context}/rest`` -> the plain path and query it stands for (any other path
    is returned unchanged)."""
    segments = path.strip("/").split("/")
    if len(segments) < 2 or segments[0] != "contexts":
        return path, query
    prefix = normalize_context(segments[1])
    rest = segments[2:]
    if not rest:
        # /contexts/{context} is the context itself (DELETE /contexts/:.ctx:)
        return "/contexts/" + (prefix or DEFAULT_CONTEXT), query
    out, subject_next = [], False
    for i, segment in enumerate(rest):
        if subject_next:
            segment = _qualified(prefix, segment)
            subject_next = False
        elif segment in ("subjects", "deks") or (i == 0 and segment in ("config", "mode")):
            subject_next = True
        out.append(segment)
    if subject_next and rest[0] in ("config", "mode") and len(rest) == 1 and prefix:
        out.append(prefix)
    new_path = "/" + "/".join(out)
    if new_path.startswith("/schemas/ids"):
        names = [v for k, v in query if k == "subject"] or [""]
        query = [(k, v) for k, v in query if k != "subject"] + [
            ("subject", _qualified(prefix, names[0]))]
    elif new_path in ("/schemas", "/subjects"):
        prefixes = [v for k, v in query if k == "subjectPrefix"] or [""]
        query = [(k, v) for k, v in query if k != "subjectPrefix"] + [
            ("subjectPrefix", _qualified(prefix, p)) for p in prefixes]
    return new_path, query


__all__ = ["DEFAULT_CONTEXT", "GLOBAL_CONTEXT", "WILDCARD", "context_of", "delimited",
           "is_context", "normalize", "normalize_context", "qualify", "rewrite", "split"]
