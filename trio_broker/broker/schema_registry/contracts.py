"""Confluent's data contracts as the registry holds them: a schema's ``metadata`` and
``ruleSet``, the config-level defaults and overrides, and Confluent's merge rules.

Why defaults and overrides in the config: a platform team sets, once per subject, context or
registry, the metadata and rules every schema must carry (an owner, a PII tag, a CEL check)
without each producer sending them. At registration (Confluent's ``maybeSetMetadataRuleSet``)
the schema's own metadata, else the previous version's, is merged over the config's
``defaultMetadata``, and the config's ``overrideMetadata`` over the result; rule sets alike.

The merge (Confluent's ``Metadata.mergeMetadata`` and ``RuleSet.mergeRuleSets``): a side that
is absent gives the other whole; otherwise ``tags`` and ``properties`` are maps where the newer
side's key wins, ``sensitive`` is the union, and each rule list keeps the older rules whose
name the newer list does not use, followed by the newer list; ``enableAt`` is the newer's if
it has one.
"""

from __future__ import annotations

from typing import Any

from . import errors as e
from .store import SchemaVersion

#: (metadata, ruleSet) of a schema, None where it has none
Contract = tuple["dict[str, Any] | None", "dict[str, Any] | None"]

#: the config's data-contract fields, as Confluent's ``ConfigValue`` names them
CONFIG_FIELDS = ("defaultMetadata", "overrideMetadata", "defaultRuleSet", "overrideRuleSet")
RULE_LISTS = {"migrationRules": ("UPGRADE", "DOWNGRADE", "UPDOWN"),
              "domainRules": ("WRITE", "READ", "WRITEREAD"),
              "encodingRules": ("WRITE", "READ", "WRITEREAD")}
RULE_NAME_MAX_LENGTH = 256
#: Confluent's other config fields: refused, never stored without effect
UNSERVED_CONFIG_FIELDS = ("alias", "aliasForDeks", "normalize", "validateFields",
                          "validateNewSchemas", "validateRules", "compatibilityPolicy",
                          "compatibilityGroup")


def invalid_rule_set(message: str) -> e.RegistryError:
    return e.RegistryError(422, 42210, message)


def check_rule_set(rule_set: Any, field: str = "ruleSet") -> None:
    """Confluent's ``RuleSet.validate``: named rules, each name once, with a type, and the
    modes each list allows (42210 otherwise)."""
    if not isinstance(rule_set, dict):
        raise e.invalid_schema(f"{field}: expected an object")
    names: set[str] = set()
    for kind, modes in RULE_LISTS.items():
        rules = rule_set.get(kind) or []
        if not isinstance(rules, list) or not all(isinstance(r, dict) for r in rules):
            raise invalid_rule_set(f"{field}.{kind}: expected a list of rules")
        for rule in rules:
            name = rule.get("name")
            if name in names:
                raise invalid_rule_set(f"Found rule with duplicate name '{name}'")
            _check_rule(rule, name)
            names.add(name)
            if rule.get("mode") not in modes:
                what = kind.removesuffix("Rules").capitalize()
                raise invalid_rule_set(f"{what} rules can only be {', '.join(modes)}")


def _check_rule(rule: dict[str, Any], name: Any) -> None:
    if not isinstance(name, str):
        raise invalid_rule_set("Missing rule name")
    if not name:
        raise invalid_rule_set("Empty rule name")
    if len(name) > RULE_NAME_MAX_LENGTH:
        raise invalid_rule_set("Rule name too long")
    if not (name[0].isalpha() or name[0] == "_"):
        raise invalid_rule_set(f"Illegal initial character in rule name: {name}")
    if not all(c.isalnum() or c in "_-" for c in name[1:]):
        raise invalid_rule_set(f"Illegal character in rule name: {name}")
    if not rule.get("type"):
        raise invalid_rule_set("Missing rule type")
    if rule.get("mode") not in ("WRITEREAD", "UPDOWN"):
        for action in ("onSuccess", "onFailure"):
            if "," in str(rule.get(action) or ""):
                raise invalid_rule_set("Multiple actions only valid with WRITEREAD and UPDOWN")


def contract_of(body: dict[str, Any]) -> Contract:
    """The ``metadata`` and ``ruleSet`` of a request body; each an object or absent."""
    metadata, rule_set = body.get("metadata"), body.get("ruleSet")
    if metadata is not None and not isinstance(metadata, dict):
        raise e.invalid_schema("metadata: expected an object")
    if rule_set is not None:
        check_rule_set(rule_set)
    return metadata, rule_set


def _merge_map(old: Any, new: Any) -> Any:
    if not old:
        return new
    if not new:
        return old
    return dict(sorted({**old, **new}.items()))


def merge_metadata(old: dict[str, Any] | None, new: dict[str, Any] | None,
                   ) -> dict[str, Any] | None:
    if old is None or new is None:
        return new if old is None else old
    out = {"tags": _merge_map(old.get("tags"), new.get("tags")),
           "properties": _merge_map(old.get("properties"), new.get("properties"))}
    old_sensitive, new_sensitive = old.get("sensitive"), new.get("sensitive")
    out["sensitive"] = (sorted({*old_sensitive, *new_sensitive})
                        if old_sensitive and new_sensitive else old_sensitive or new_sensitive)
    return {k: v for k, v in out.items() if v}


def _merge_rules(old: Any, new: Any) -> Any:
    if not old:
        return new
    if not new:
        return old
    newer = {rule.get("name") for rule in new}
    return [rule for rule in old if rule.get("name") not in newer] + list(new)


def merge_rule_set(old: dict[str, Any] | None, new: dict[str, Any] | None,
                   ) -> dict[str, Any] | None:
    if old is None or new is None:
        return new if old is None else old
    out = {kind: _merge_rules(old.get(kind), new.get(kind)) for kind in RULE_LISTS}
    out["enableAt"] = new.get("enableAt") or old.get("enableAt")
    return {k: v for k, v in out.items() if v}


def with_config(config: dict[str, Any] | None, contract: Contract) -> Contract:
    """``contract`` (the schema's own, else the previous version's) with the config's defaults
    under it and its overrides over it."""
    config = config or {}
    metadata, rule_set = contract
    return (merge_metadata(merge_metadata(config.get("defaultMetadata"), metadata),
                           config.get("overrideMetadata")),
            merge_rule_set(merge_rule_set(config.get("defaultRuleSet"), rule_set),
                           config.get("overrideRuleSet")))


def updated_config(old: dict[str, Any] | None, body: dict[str, Any]) -> dict[str, Any]:
    """Confluent's ``ConfigValue.update`` for the contract fields: a field left out keeps its
    value, one sent as null is removed."""
    unserved = [f for f in UNSERVED_CONFIG_FIELDS if body.get(f) is not None]
    if unserved:
        raise e.operation_not_permitted(f"Config field {unserved[0]} is not supported by "
                                        "this registry")
    out = dict(old or {})
    for field in CONFIG_FIELDS:
        if field not in body:
            continue
        value = body[field]
        if value is None:
            out.pop(field, None)
            continue
        if not isinstance(value, dict):
            raise e.RegistryError(422, 422, f"{field}: expected an object")
        if field.endswith("RuleSet"):
            check_rule_set(value, field)
        out[field] = value
    return out


def with_metadata(versions: list[SchemaVersion], wanted: dict[str, str]) -> SchemaVersion:
    """The latest of ``versions`` whose metadata properties hold every pair of ``wanted``
    (``GET /subjects/{subject}/metadata``)."""
    for sv in reversed(versions):
        properties = (sv.metadata or {}).get("properties") or {}
        if all(properties.get(k) == v for k, v in wanted.items()):
            return sv
    raise e.schema_not_found()


__all__ = ["CONFIG_FIELDS", "Contract", "check_rule_set", "contract_of", "merge_metadata",
           "merge_rule_set", "updated_config", "with_config", "with_metadata"]
