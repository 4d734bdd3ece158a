#!/usr/bin/env python3
"""Seed fuzz/corpus/<target>/ from the repository's own fixtures.

Run from anywhere: `python3 fuzz/seed_corpus.py`. Existing corpus files are
kept; seeds are named by their content's hash, so running it twice adds
nothing. The inputs are the policy cases (guests/default-policy/cases,
host/tests/fixtures/contract-*/cases), the ARM templates (tests/fixtures,
sim/radius/tests/fixtures) and a few hand-written selectors, patches and
annotation values.
"""

import hashlib
import json
import pathlib

FUZZ = pathlib.Path(__file__).resolve().parent
ROOT = FUZZ.parent
CORPUS = FUZZ / "corpus"


def add(target, data):
    if isinstance(data, str):
        data = data.encode()
    folder = CORPUS / target
    folder.mkdir(parents=True, exist_ok=True)
    (folder / hashlib.sha1(data).hexdigest()).write_bytes(data)


def compact(value):
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def strings(value):
    if isinstance(value, str):
        yield value
    elif isinstance(value, list):
        for item in value:
            yield from strings(item)
    elif isinstance(value, dict):
        for key, item in value.items():
            yield key
            yield from strings(item)


def cases():
    for folder in [ROOT / "guests/default-policy/cases", ROOT / "host/tests/fixtures"]:
        for path in sorted(folder.rglob("*.json")):
            try:
                case = json.loads(path.read_text())
            except ValueError:
                continue
            if isinstance(case, dict) and "observation" in case:
                yield case


def templates():
    for folder in [ROOT / "tests/fixtures/arm-templates", ROOT / "sim/radius/tests/fixtures"]:
        for path in sorted(folder.rglob("*.json")):
            if "parameters" not in path.name:
                yield path.read_text(), "{}"
    params = ROOT / "tests/fixtures/arm-templates/cli-deploymenttemplate-parameters.json"
    template = ROOT / "tests/fixtures/arm-templates/cli-deploymenttemplate.json"
    if params.exists() and template.exists():
        parameters = json.loads(params.read_text())
        yield template.read_text(), compact(parameters.get("parameters", parameters))
    for case in cases():
        for kind in case["observation"].values():
            spec = kind.get("spec", {}) if isinstance(kind, dict) else {}
            if "template" in spec:
                template = spec["template"]
                text = template if isinstance(template, str) else compact(template)
                parameters = spec.get("parameters", {})
                if isinstance(parameters, str):
                    parameters = parameters or "{}"
                else:
                    parameters = compact(parameters)
                yield text, parameters


def main():
    scopes = set()
    for case in cases():
        observation = case["observation"]
        add("model_json", compact(observation))
        for kind, inner in observation.items():
            add("model_json", compact(inner))
            actions = case.get("expect", {}).get("actions")
            if isinstance(actions, list):
                add("model_json", compact({kind: {"actions": actions}}))
                add("model_json", compact({"actions": actions}))
            for text in strings(inner):
                if text.startswith("/planes/"):
                    scopes.add(text)

    for n, text in enumerate(sorted(scopes)):
        config = compact({"radius": {"type": "Radius", "value": {"scope": text}}})
        add("scope_ids", bytes([n % 16]) + f"{text}\0{text}/providers/A.B/t/n\0{config}".encode())

    expressions = set()
    for text, parameters in templates():
        add("arm_templates", f"{text}\0{parameters}")
        try:
            for string in strings(json.loads(text)):
                if string.startswith("[") and string.endswith("]") and not string.startswith("[["):
                    expressions.add(string[1:-1])
        except ValueError:
            pass
    for text in sorted(expressions):
        add("arm_expressions", text)
    for text in [
        "concat('a', parameters('s'), variables('v'))",
        "reference('env').properties.compute.namespace",
        "resourceId('Applications.Core/containers', 'c')",
        "ns.f(string(copyIndex(1)))",
        "if(equals(parameters('n'), 3), createObject('a', range(0, 3)), json('null'))",
        "format('{0,-5}|{1:D3}', 'x', 7)",
        "substring(padLeft('a', 10, '0'), 2, 3)",
        "union(parameters('o'), createObject('k', split('a,b', ',')))",
        "variables('w').a[2].b",
    ]:
        add("arm_expressions", text)

    for value in [
        b"\x00skip\0true\x0030s\0report\0app, db,,app",
        b"\x1f\0\0\0\0",
        b"\x00 Detach-On-Delete \0 FALSE \0 2M \0 Redeploy \0a",
        b"\x00manage\0yes\0never\0x\0" + b"a," * 50,
    ]:
        add("annotations", value)

    for text in [
        "app=web,tier!=db\0app=web\ntier=front",
        "app in (web, api),!legacy\0app=api",
        "tier notin (a,b),env\0env=prod\ntier=c",
        "metadata.name=a\0name=a",
        "metadata.namespace==default,reason=Started\0reason=Started",
        "involvedObject.kind=Pod,type!=Warning\0type=Normal",
        "status.phase=Active\0",
    ]:
        add("selectors", text)

    document = compact({"metadata": {"name": "a", "finalizers": ["a", "b"],
                                     "ownerReferences": [{"uid": "1", "name": "o"}],
                                     "labels": {"app": "web"}},
                        "spec": {"x": [1, 2, {"y": None}], "z": "text"}})
    for mode, body in [
        (0, [{"op": "add", "path": "/spec/w", "value": 1},
             {"op": "copy", "from": "/spec", "path": "/spec/x/-"},
             {"op": "move", "from": "/spec/z", "path": "/metadata/z"},
             {"op": "test", "path": "/metadata/name", "value": "a"},
             {"op": "replace", "path": "/spec/x/0", "value": {"a~b": 2}},
             {"op": "remove", "path": "/metadata/labels/app"}]),
        (1, {"spec": {"x": None, "new": {"a": 1}}, "metadata": {"labels": {"app": None}}}),
        (2, {"metadata": {"finalizers": ["c"], "$deleteFromPrimitiveList/finalizers": ["a"],
                          "$setElementOrder/finalizers": ["b"],
                          "ownerReferences": [{"uid": "1", "$patch": "delete"}, {"uid": "2"}]},
             "$retainKeys": ["metadata", "spec"], "spec": {"$patch": "replace", "q": 1}}),
        (3, {"spec": {"x": [3]}}),
    ]:
        add("patch_bodies", bytes([mode]) + f"{document}\0{compact(body)}".encode())
    add("patch_bodies", b"\x05" + document.encode() + b"\0spec:\n  z: null\n  a: &x [1, 2]\n  b: *x\n")
    add("patch_bodies", b"\x04" + document.encode() + b"\0- op: add\n  path: /spec/y\n  value: {a: 1}\n")


if __name__ == "__main__":
    main()
