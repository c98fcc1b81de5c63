"""The registry's operations, in Confluent's order of checks, over the ``_schemas`` state.

Why one lock: a registration reads the state (the next id, the next version, the subject's
versions for compatibility), parses in a worker thread and then writes; two registrations
interleaving there could give one id two schemas. Writes are few and small, so they take turns;
reads need no lock (the state changes only on the event loop, between awaits).

Parsing runs off the event loop in a worker thread, at most ``PARSE_THREADS`` at a time, so a
big or hostile schema costs a thread, never the broker's loop (the body size bounds its input).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

import trio

from ..offload import mock_clock
from . import contexts as ctx
from . import errors as e
from .compat import LEVELS, check
from .contracts import CONFIG_FIELDS, Contract, contract_of, updated_config, with_config
from .guids import parse_guid
from .schemas import SCHEMA_TYPES, ParsedSchema, parse_schema, unknown_type
from .store import KafkaStore, RegistryState, SchemaVersion, context_record, setting_key

T = TypeVar("T")
PARSE_THREADS = 2
#: how deep references may chain (a deeper chain is refused as a likely cycle)
MAX_REFERENCE_DEPTH = 32
MODES = ("READWRITE", "READONLY", "READONLY_OVERRIDE", "IMPORT")
DEFAULT_COMPATIBILITY = "BACKWARD"
MAX_VERSION = 2**31 - 1


def parse_version(text: str) -> int | None:
    """A version path segment -> the number, or None for latest (``latest`` or -1)."""
    if text in ("latest", "-1"):
        return None
    try:
        version = int(text)
    except ValueError:
        raise e.invalid_version(text) from None
    if not 1 <= version <= MAX_VERSION:
        raise e.invalid_version(text)
    return version


class SchemaRegistry:
    def __init__(self, store: KafkaStore) -> None:
        self.store = store
        self._lock = trio.Lock()
        self._limiter = trio.CapacityLimiter(PARSE_THREADS)
        #: (context, id) -> the schema parsed without normalizing (stored schemas never change
        #: under an id)
        self._parsed: dict[tuple[str, int], ParsedSchema] = {}

    @property
    def state(self) -> RegistryState:
        return self.store.state

    async def _off_loop(self, fn: Callable[..., T], *args: Any) -> T:
        if mock_clock() is not None:
            await trio.lowlevel.checkpoint()
            return fn(*args)
        return await trio.to_thread.run_sync(fn, *args, limiter=self._limiter)

    # --- reads -----------------------------------------------------------------------------

    def live(self, subject: str, *, deleted: bool = False) -> list[SchemaVersion]:
        versions = self.state.subjects.get(subject, {})
        return [versions[v] for v in sorted(versions) if deleted or not versions[v].deleted]

    def subjects(self, *, deleted: bool = False, prefix: str = ctx.WILDCARD) -> list[str]:
        """Subjects starting with ``prefix`` in its context (``:*:``: in any context)."""
        context, name = ctx.split(prefix)
        return sorted(s for s in self.state.subjects if self.live(s, deleted=deleted)
                      and context in ("*", ctx.context_of(s)) and ctx.split(s)[1].startswith(name))

    def contexts(self) -> list[str]:
        return [ctx.DEFAULT_CONTEXT, *sorted(self.state.contexts)]

    async def delete_context(self, text: str) -> None:
        """Forget an empty context (``DELETE /contexts/{context}``)."""
        async with self._lock:
            prefix = ctx.normalize_context(text)
            if not prefix:
                raise e.RegistryError(404, 404, "HTTP 404 Not Found")
            if self.subjects(deleted=True, prefix=prefix):
                raise e.RegistryError(422, 42211,
                                      f"The specified context '{prefix}' is not empty.")
            await self.store.write([context_record(ctx.context_of(prefix), delete=True)])

    def versions(self, subject: str, *, deleted: bool = False) -> list[int]:
        found = self.live(subject, deleted=deleted)
        if not found:
            raise e.subject_not_found(subject)
        return [sv.version for sv in found]

    def version(self, subject: str, text: str, *, deleted: bool = False) -> SchemaVersion:
        number = parse_version(text)
        found = self.live(subject, deleted=deleted)
        if not found:
            raise e.subject_not_found(subject)
        if number is None:
            return found[-1]
        for sv in found:
            if sv.version == number:
                return sv
        raise e.version_not_found(number)

    def by_id(self, schema_id: int, subject: str | None = None) -> SchemaVersion:
        """The schema with ``schema_id`` in ``subject``'s context (Confluent's
        ``getSchemaKeyUsingContexts``): a qualified subject's context, else the default
        context's id when it is ``subject``'s, else the id of ``subject`` under another
        context, else the default context's id."""
        context, name = ctx.split(ctx.normalize(subject or ""))
        users = self.state.ids.get((context, schema_id), set())
        mine = sorted(u for u in users if u[0] == ctx.delimited(context) + name)
        if name and not mine and context == ctx.DEFAULT_CONTEXT:
            for other in sorted(self.state.contexts):
                mine = sorted(u for u in self.state.ids.get((other, schema_id), ())
                              if u[0] == ctx.delimited(other) + name)
                if mine:
                    break
        if not mine and not (name and context != ctx.DEFAULT_CONTEXT):
            mine = sorted(users)
        if not mine:
            raise e.schema_not_found(f"Schema {schema_id} not found")
        subject, version = mine[0]
        return self.state.subjects[subject][version]

    def guid_ids(self, text: str) -> list[tuple[str, int]]:
        """The (context, id)s of the schema with GUID ``text``: the default context's first,
        then the others by name, as Confluent's ``listIdsForGuid``."""
        guid = parse_guid(text)
        found = []
        for context in [ctx.DEFAULT_CONTEXT, *sorted(self.state.contexts)]:
            schema_id = self.state.guids.get(context, {}).get(guid or "")
            if schema_id is not None and (context, schema_id) in self.state.ids:
                found.append((context, schema_id))
        return found

    def by_guid(self, text: str) -> SchemaVersion:
        found = self.guid_ids(text)
        if not found:
            raise e.schema_not_found(f"Schema {text} not found")
        subject, version = min(self.state.ids[found[0]])
        return self.state.subjects[subject][version]

    def id_versions(self, schema_id: int, subject: str | None = None, *,
                    deleted: bool = False) -> list[SchemaVersion]:
        found = self.by_id(schema_id, subject)
        out = []
        for subject, version in sorted(self.state.ids[(ctx.context_of(found.subject),
                                                       schema_id)]):
            sv = self.state.subjects[subject][version]
            if deleted or not sv.deleted:
                out.append(sv)
        return out

    def referenced_by(self, subject: str, text: str) -> list[int]:
        target = self.version(subject, text)
        return sorted({sv.id for versions in self.state.subjects.values()
                       for sv in versions.values() if not sv.deleted and any(
                           ctx.qualify(str(r.get("subject")), sv.subject) == subject
                           and r.get("version") == target.version
                           for r in sv.references)})

    # --- parsing -----------------------------------------------------------------------------

    async def parsed(self, sv: SchemaVersion) -> ParsedSchema:
        found = self._parsed.get(_cache_key(sv))
        if found is None:
            refs = await self._references(sv.references, 0, sv.subject)
            found = await self._off_loop(parse_schema, sv.schema_type, sv.schema, refs)
            self._parsed[_cache_key(sv)] = found
        return found

    async def _references(self, references: list[dict[str, Any]], depth: int, parent: str,
                          ) -> list[ParsedSchema]:
        """The schemas ``references`` name; a reference's subject is in ``parent``'s context
        unless it names its own (Confluent's ``qualifySubjectWithParent``)."""
        if depth > MAX_REFERENCE_DEPTH:
            raise e.invalid_schema("with references nested too deep (a reference cycle?)")
        out = []
        for ref in references:
            if not isinstance(ref, dict) or not {"name", "subject", "version"} <= ref.keys():
                raise e.invalid_schema(f"reference {ref!r}: a reference has a name, a subject "
                                       "and a version")
            try:
                sv = self.version(ctx.qualify(str(ref["subject"]), parent), str(ref["version"]))
            except e.RegistryError:
                raise e.invalid_schema(f"reference {ref['name']!r}: could not find subject "
                                       f"{ref['subject']!r} version {ref['version']}") from None
            if _cache_key(sv) not in self._parsed:
                nested = await self._references(sv.references, depth + 1, sv.subject)
                self._parsed[_cache_key(sv)] = await self._off_loop(parse_schema, sv.schema_type,
                                                           sv.schema, nested)
            out.append(self._parsed[_cache_key(sv)])
        return out

    async def parse_request(self, body: dict[str, Any], subject: str = "", *,
                            normalize: bool = False,
                            ) -> tuple[ParsedSchema, list[dict[str, Any]]]:
        schema_type = body.get("schemaType") or "AVRO"
        if not isinstance(schema_type, str) or schema_type not in SCHEMA_TYPES:
            raise unknown_type(str(schema_type))
        text = body.get("schema")
        if not isinstance(text, str) or not text.strip():
            raise e.RegistryError(422, 42201, "Empty schema")
        references = body.get("references") or []
        if not isinstance(references, list):
            raise e.invalid_schema("references: expected a list")
        refs = await self._references(references, 1, subject)
        # resolve "latest" to the number it names, as Confluent stores it
        stored = [{"name": r["name"], "subject": r["subject"], "version": self.version(
                      ctx.qualify(str(r["subject"]), subject), str(r["version"])).version}
                  for r in references]
        parsed = await self._off_loop(
            functools.partial(parse_schema, normalize=normalize), schema_type, text, refs)
        return parsed, stored

    # --- register and look up ------------------------------------------------------------------

    def _same(self, sv: SchemaVersion, parsed: ParsedSchema, refs: list[dict[str, Any]],
              contract: Contract | None = None) -> bool:
        """Same type, text and references; with ``contract``, the same metadata and rule set
        too (a schema with another contract is another schema, with an id of its own)."""
        return (sv.schema_type == parsed.schema_type and sv.references == refs
                and sv.schema == parsed.canonical
                and (contract is None or (sv.metadata, sv.rule_set) == contract))

    async def lookup(self, subject: str, body: dict[str, Any], *, normalize: bool = False,
                     deleted: bool = False) -> SchemaVersion:
        if not self.live(subject, deleted=deleted):
            raise e.subject_not_found(subject)
        parsed, refs = await self.parse_request(body, subject, normalize=normalize)
        given = contract_of(body)
        versions = self.live(subject, deleted=deleted)
        # as Confluent's lookup: the contract sent, else the one registering it would store
        latest = versions[-1]
        populated = with_config(self.config(subject), (
            latest.metadata if given[0] is None else given[0],
            latest.rule_set if given[1] is None else given[1]))
        contracts = [given, populated] if given != (None, None) else None
        for sv in reversed(versions):
            if contracts is not None and (sv.metadata, sv.rule_set) not in contracts:
                continue
            if self._same(sv, parsed, refs) or (not normalize and sv.schema_type == "AVRO"
                                               and await self._equal_parsed(sv, parsed)):
                return sv
        raise e.schema_not_found()

    async def _equal_parsed(self, sv: SchemaVersion, parsed: ParsedSchema) -> bool:
        return bool((await self.parsed(sv)).parsed == parsed.parsed)

    async def register(self, subject: str, body: dict[str, Any], *,
                       normalize: bool = False) -> SchemaVersion:
        if not ctx.is_valid_subject(subject):
            raise e.invalid_subject(subject)
        async with self._lock:
            mode = self.mode(subject)
            if mode in ("READONLY", "READONLY_OVERRIDE"):
                raise e.operation_not_permitted(f"Subject {subject} is in read-only mode")
            context = ctx.context_of(subject)
            given_id = body.get("id")
            given_version = body.get("version")
            if (given_id not in (None, -1, 0)) and mode != "IMPORT":
                raise e.operation_not_permitted(f"Subject {subject} is not in import mode")
            parsed, refs = await self.parse_request(body, subject, normalize=normalize)
            everything = self.live(subject, deleted=True)
            live = [sv for sv in everything if not sv.deleted]
            metadata, rule_set = contract_of(body)
            if mode != "IMPORT":
                # Confluent's data contracts: what a new version leaves out, it inherits; the
                # config's defaults go under that and its overrides over it
                if live:
                    metadata = live[-1].metadata if metadata is None else metadata
                    rule_set = live[-1].rule_set if rule_set is None else rule_set
                metadata, rule_set = with_config(self.config(subject), (metadata, rule_set))
            contract = (metadata, rule_set)
            for sv in live:
                if self._same(sv, parsed, refs, contract) and given_id in (None, -1, 0, sv.id):
                    return sv
            if mode != "IMPORT":
                level = self.compatibility(subject)
                previous = [await self.parsed(sv) for sv in live]
                problems = check(level, parsed, previous)
                if problems:
                    raise e.incompatible([f'"{subject}", details: [{", ".join(problems)}]'])
            schema_id = self._id_for(context, parsed, refs, given_id, contract)
            version = (everything[-1].version + 1) if everything else 1
            if mode == "IMPORT" and isinstance(given_version, int) and given_version > 0:
                version = given_version
            sv = SchemaVersion(subject, version, schema_id, parsed.schema_type, refs,
                               parsed.canonical, metadata=metadata, rule_set=rule_set)
            records: list[tuple[dict[str, Any], dict[str, Any] | None]] = [
                (sv.key(), sv.value())]
            if context != ctx.DEFAULT_CONTEXT and context not in self.state.contexts:
                records.insert(0, context_record(context))
            await self.store.write(records)
            self._parsed.setdefault((context, schema_id), parsed)
            return self.state.subjects[subject][version]

    def _id_for(self, context: str, parsed: ParsedSchema, refs: list[dict[str, Any]],
                given: Any, contract: Contract) -> int:
        for (in_context, schema_id), users in self.state.ids.items():
            if in_context != context:
                continue
            s, v = min(users)
            if self._same(self.state.subjects[s][v], parsed, refs, contract):
                if given not in (None, -1, 0) and given != schema_id:
                    break
                return schema_id
        if given in (None, -1, 0):
            return self.state.max_ids.get(context, 0) + 1
        if not isinstance(given, int) or given < 1:
            raise e.bad_request(f"Invalid id {given!r}")
        if (context, given) in self.state.ids:
            raise e.operation_not_permitted(
                f"Overwrite new schema with id {given} in context {ctx.delimited(context)} "
                "is not permitted.")
        return given

    # --- deletes -------------------------------------------------------------------------------

    def _refused_if_referenced(self, subject: str, versions: list[int]) -> None:
        for version in versions:
            if self.referenced_by(subject, str(version)):
                raise e.reference_exists(f"One or more references exist to the schema "
                                         f"{{subject={subject},version={version}}}.")

    async def delete_subject(self, subject: str, *, permanent: bool = False) -> list[int]:
        async with self._lock:
            everything = self.live(subject, deleted=True)
            if not everything:
                raise e.subject_not_found(subject)
            live = [sv.version for sv in everything if not sv.deleted]
            self._check_writable(subject)
            if permanent:
                if live:
                    raise e.subject_not_soft_deleted(subject)
                await self.store.write([(sv.key(), None) for sv in everything])
                return [sv.version for sv in everything]
            if not live:
                raise e.subject_soft_deleted(subject)
            self._refused_if_referenced(subject, live)
            records: list[tuple[dict[str, Any], dict[str, Any] | None]] = [
                (setting_key("DELETE_SUBJECT", subject),
                 {"subject": subject, "version": live[-1]})]
            for sv in everything:
                if not sv.deleted:
                    value = sv.value()
                    value["deleted"] = True
                    records.append((sv.key(), value))
            await self.store.write(records)
            return live

    async def delete_version(self, subject: str, text: str, *, permanent: bool = False) -> int:
        async with self._lock:
            number = parse_version(text)
            everything = self.live(subject, deleted=True)
            if not everything:
                raise e.subject_not_found(subject)
            self._check_writable(subject)
            if number is None:
                live = [sv for sv in everything if not sv.deleted]
                if not live and not permanent:
                    raise e.subject_not_found(subject)
                sv = (live or everything)[-1]
            else:
                found = [sv for sv in everything if sv.version == number]
                if not found:
                    raise e.version_not_found(number)
                sv = found[0]
            if permanent:
                if not sv.deleted:
                    raise e.version_not_soft_deleted(subject, sv.version)
                await self.store.write([(sv.key(), None)])
                return sv.version
            if sv.deleted:
                raise e.version_soft_deleted(subject, sv.version)
            self._refused_if_referenced(subject, [sv.version])
            value = sv.value()
            value["deleted"] = True
            await self.store.write([(sv.key(), value)])
            return sv.version

    def _check_writable(self, subject: str) -> None:
        if self.mode(subject) in ("READONLY", "READONLY_OVERRIDE"):
            raise e.operation_not_permitted(f"Subject {subject} is in read-only mode")

    # --- compatibility ----------------------------------------------------------------------------

    async def test_compatibility(self, subject: str, version: str | None,
                                 body: dict[str, Any], *, normalize: bool = False) -> list[str]:
        """Why ``body``'s schema may not be registered under ``subject`` (empty: it may)."""
        level = self.compatibility(subject)
        if version is None:
            previous = [await self.parsed(sv) for sv in self.live(subject)]
        else:
            previous = [await self.parsed(self.version(subject, version))]
            level = level.removesuffix("_TRANSITIVE")
        parsed, _refs = await self.parse_request(body, subject, normalize=normalize)
        return check(level, parsed, previous)

    # --- config and mode -----------------------------------------------------------------------

    def config(self, subject: str | None) -> dict[str, Any] | None:
        """The config in scope for ``subject`` (the whole first one found, as Confluent's
        ``getConfigInScope``: a subject's own config holds its contract defaults alone)."""
        return in_scope(self.state.configs, subject)

    def compatibility(self, subject: str | None) -> str:
        return str((self.config(subject) or {}).get("compatibilityLevel")
                   or DEFAULT_COMPATIBILITY)

    def config_json(self, subject: str | None, *, in_scope: bool = True) -> dict[str, Any]:
        """Confluent's ``Config`` of ``subject`` (its own only unless ``in_scope``), the level
        filled in with the default; 40408 when the subject has none of its own."""
        found = self.config(subject) if in_scope else self.state.configs.get(subject)
        if found is None and subject is not None and not in_scope:
            raise e.subject_compatibility_not_configured(subject)
        found = found or {}
        out = {"compatibilityLevel": found.get("compatibilityLevel") or DEFAULT_COMPATIBILITY}
        out.update((k, found[k]) for k in CONFIG_FIELDS if found.get(k) is not None)
        return out

    async def set_config(self, subject: str | None, body: dict[str, Any]) -> dict[str, Any]:
        """Confluent's ``ConfigValue.update``: what the body leaves out is kept."""
        level = body.get("compatibility", body.get("compatibilityLevel"))
        if level is not None and (not isinstance(level, str) or level.upper() not in LEVELS):
            raise e.invalid_compatibility(level)
        value = updated_config(self.state.configs.get(subject), body)
        if level is not None:
            value["compatibilityLevel"] = level.upper()
        if subject is not None:
            value["subject"] = subject
        await self.store.write([(setting_key("CONFIG", subject), value)])
        answer = {k: value[k] for k in CONFIG_FIELDS if k in value}
        if "compatibilityLevel" in value:
            answer = {"compatibility": value["compatibilityLevel"], **answer}
        return answer

    async def delete_config(self, subject: str | None) -> dict[str, Any]:
        if subject is not None and not self.live(subject, deleted=True) and (
                subject not in self.state.configs):
            raise e.subject_not_found(subject)
        previous = self.config_json(subject, in_scope=subject is None)
        await self.store.write([(setting_key("CONFIG", subject), None)])
        return previous

    def mode(self, subject: str | None) -> str:
        return in_scope(self.state.modes, subject) or "READWRITE"

    def subject_mode(self, subject: str, *, default_to_global: bool) -> str:
        found = self.state.modes.get(subject)
        if found is None:
            if not default_to_global:
                raise e.subject_mode_not_configured(subject)
            return self.mode(subject)
        return str(found)

    async def set_mode(self, subject: str | None, body: dict[str, Any], *, force: bool) -> str:
        mode = body.get("mode")
        if not isinstance(mode, str) or mode.upper() not in MODES:
            raise e.invalid_mode(mode)
        mode = mode.upper()
        if mode == "IMPORT" and not force:
            in_context = bool(subject) and ctx.is_context(str(subject))
            has = (self.subjects(deleted=True, prefix=str(subject)) if in_context
                   else self.live(subject, deleted=True) if subject else self.state.subjects)
            if has:
                raise e.operation_not_permitted(
                    "Cannot import since found existing subjects")
        await self.store.write([(setting_key("MODE", subject), {"mode": mode})])
        return mode

    async def delete_mode(self, subject: str) -> str:
        previous = self.mode(subject)
        await self.store.write([(setting_key("MODE", subject), None)])
        return previous


def in_scope(table: dict[str | None, T], subject: str | None) -> T | None:
    """The setting that applies to ``subject`` (Confluent's ``getConfigInScope``): its own,
    else its context's (the global one for the default context), else the ``:.__GLOBAL:``
    context's."""
    context = ctx.context_of(subject or "")
    for key in (subject, ctx.delimited(context) or None, ctx.delimited(ctx.GLOBAL_CONTEXT)):
        if key in table:
            return table[key]
    return None


def _cache_key(sv: SchemaVersion) -> tuple[str, int]:
    return ctx.context_of(sv.subject), sv.id


def schema_json(sv: SchemaVersion, *, with_subject: bool = True) -> dict[str, Any]:
    """Confluent's JSON of a registered schema (no ``schemaType`` for Avro, no empty
    ``references``)."""
    out: dict[str, Any] = {"subject": sv.subject, "version": sv.version, "id": sv.id} if (
        with_subject) else {}
    out["guid"] = sv.guid
    if sv.schema_type != "AVRO":
        out["schemaType"] = sv.schema_type
    if sv.references:
        out["references"] = sv.references
    if sv.metadata is not None:
        out["metadata"] = sv.metadata
    if sv.rule_set is not None:
        out["ruleSet"] = sv.rule_set
    out["schema"] = sv.schema
    return out


__all__ = ["SchemaRegistry", "in_scope", "parse_version", "schema_json"]
