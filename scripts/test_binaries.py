#!/usr/bin/env python3
"""Every test binary of the workspace was built, listed and run: none dropped in silence.

cargo skips a test target whose `required-features` the build does not enable, without a
word; a test file whose tests are all compiled out builds a binary with no test. This script
compares what `cargo metadata` says the workspace has with what cargo-nextest listed and ran,
and fails naming each binary that is missing. Used by scripts/tests.sh:

  test_binaries.py listed LIST.json         every test target of every workspace member (the
                                            library's, proc-macro's and binaries' unit tests,
                                            each tests/*.rs) is in nextest's list; each
                                            tests/*.rs has at least one test
  test_binaries.py ran LIST.json JUNIT.xml  each listed binary ran all of its listed tests,
                                            no more, no fewer (nextest's JUnit report); the
                                            slowest tests, for the time limits
  test_binaries.py subset LIST.json SUBSET.json
                                            a feature subset's run lists tests the full run
                                            does not (its `cfg(not(feature = ..))` tests)

LIST.json is `cargo nextest list --message-format json` of the same arguments as the run.
"""

import json
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections import Counter

# cargo metadata's target kinds that are one test binary each, as nextest names the kind.
KINDS = {
    "lib": "lib",
    "rlib": "lib",
    "dylib": "lib",
    "cdylib": "lib",
    "staticlib": "lib",
    "proc-macro": "proc-macro",
    "bin": "bin",
    "test": "test",
    "example": "example",
    "bench": "bench",
}


def binary_id(package, kind, name):
    """nextest's binary id: `pkg` (library), `pkg::name` (tests/), `pkg::kind/name`."""
    if kind in ("lib", "proc-macro"):
        return package
    if kind == "test":
        return f"{package}::{name}"
    return f"{package}::{kind}/{name}"


def expected():
    """The test binaries of the workspace members: each target cargo tests (`test = true`)."""
    out = subprocess.run(
        ["cargo", "metadata", "--format-version", "1", "--no-deps", "--locked"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    metadata = json.loads(out)
    members = set(metadata["workspace_members"])
    found = {}
    for package in metadata["packages"]:
        if package["id"] not in members:
            continue
        for target in package["targets"]:
            if not target.get("test", False):
                continue
            kind = KINDS.get(target["kind"][0])
            if kind is None:
                continue
            why = target.get("required-features")
            found[binary_id(package["name"], kind, target["name"])] = (kind, why)
    return found


def suites(path):
    with open(path) as f:
        return json.load(f)["rust-suites"]


def listed(list_path):
    want = expected()
    have = suites(list_path)
    problems = []
    for binary, (kind, required) in sorted(want.items()):
        if binary not in have:
            because = f" (it requires the features {', '.join(required)})" if required else ""
            problems.append(f"test binary {binary} was not built or listed{because}")
        elif kind == "test" and not have[binary]["testcases"]:
            problems.append(f"test binary {binary} has no test: all of them compiled out?")
    for problem in problems:
        print(f"error: {problem}", file=sys.stderr)
    if problems:
        print(
            f"error: {len(problems)} of the {len(want)} test binaries of the workspace "
            "would not run; a feature of the root manifest's mcp-tasks dependency removed?",
            file=sys.stderr,
        )
        sys.exit(1)
    tests = sum(len(s["testcases"]) for s in have.values())
    print(f"test binaries: all {len(want)} of the workspace listed, {tests} tests")


def ran(list_path, junit_path):
    have = suites(list_path)
    want = Counter()
    for binary, suite in have.items():
        for name, case in suite["testcases"].items():
            if not case.get("ignored") and case["filter-match"]["status"] == "matches":
                want[binary] += 1
    ran = Counter()
    times = []
    for suite in ET.parse(junit_path).getroot().iter("testsuite"):
        for case in suite.iter("testcase"):
            ran[suite.get("name")] += 1
            times.append((float(case.get("time", 0)), f"{suite.get('name')} {case.get('name')}"))
    problems = [
        f"test binary {binary}: {want[binary]} tests listed, {ran[binary]} ran"
        for binary in sorted(set(want) | set(ran))
        if want[binary] != ran[binary]
    ]
    for problem in problems:
        print(f"error: {problem}", file=sys.stderr)
    if problems:
        sys.exit(1)
    print(f"test binaries: {len(have)} listed, {sum(ran.values())} tests ran, as listed")
    print("slowest tests (seconds):")
    for seconds, name in sorted(times, reverse=True)[:12]:
        print(f"  {seconds:7.2f}  {name}")


def subset(full_path, subset_path):
    names = lambda path: {
        (binary, name) for binary, s in suites(path).items() for name in s["testcases"]
    }
    only = sorted(names(subset_path) - names(full_path))
    if not only:
        print(
            "error: the feature subset lists no test the full run lacks: "
            "its `cfg(not(feature))` tests are gone, or the subset is the full set",
            file=sys.stderr,
        )
        sys.exit(1)
    print(f"feature subset: {len(only)} tests the all-features run does not have, e.g.")
    for binary, name in only[:5]:
        print(f"  {binary} {name}")


if __name__ == "__main__":
    mode, *args = sys.argv[1:] or ["?"]
    if mode == "listed" and len(args) == 1:
        listed(*args)
    elif mode == "ran" and len(args) == 2:
        ran(*args)
    elif mode == "subset" and len(args) == 2:
        subset(*args)
    else:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
