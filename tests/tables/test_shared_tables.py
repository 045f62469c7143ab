"""The one source of the shared tables (tables/loopwarden.toml), the shapes read from the proto,
and their generated copies.

The freshness check (`python3 -m tables.gen --check`) must pass on the repository as committed,
and must name a copy as stale whenever the source changes under it, or the copy is edited by
hand. Both are tried on a temporary copy of the repository, one generated copy at a time.
"""
from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import loopwarden_core
from loopwarden_server.config import tables as config_tables
from tables.gen.__main__ import COPIES, stale, write
from tables.gen.proto_source import PROTO
from tables.gen.source import SOURCE, SourceError, camel, load

ROOT = Path(__file__).resolve().parents[2]
COPY_PATHS = [copy.path for copy in COPIES  # the copies of the TOML's settings, detectors, errors, messages
              if copy.build is None and not copy.of_shapes and not copy.of_limits and not copy.of_settings]
# The copies of the resolved settings' fields alone: how they cross into the core.
SETTINGS_FACE_PATHS = [copy.path for copy in COPIES if copy.of_settings]
# The copies of the TOML's input limits ([[limit]]), and the docs page whose flag table is one.
LIMIT_PATHS = [copy.path for copy in COPIES if copy.of_limits] + ["docs/configuration.md"]
# The copies that carry only the limits the core enforces (`core = true`).
CORE_LIMIT_PATHS = ["core/src/service/limits_gen.rs", "core/src/python/limits_gen.rs", "core/loopwarden_core.pyi",
                    "server/loopwarden_server/core.py"]
SHAPE_PATHS = [copy.path for copy in COPIES if copy.of_shapes]  # the copies of the proto's shapes
HOSTS_RS = "core/hook/src/hosts.rs"  # built from the hook host modules, not the TOML
CLIENT = "client/python/loopwarden"


def checkout(tmp_path: Path) -> Path:
    """The source and every generated copy, as committed, under a temporary root, with the Python
    client the hook host table is built from."""
    for relative in [str(SOURCE), *(copy.path for copy in COPIES)]:
        target = tmp_path / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(ROOT / relative, target)
    shutil.copytree(ROOT / CLIENT, tmp_path / CLIENT, ignore=shutil.ignore_patterns("__pycache__"), dirs_exist_ok=True)
    return tmp_path


def edit_source(root: Path, old: str, new: str) -> None:
    source = root / SOURCE
    text = source.read_text(encoding="utf-8")
    assert text.count(old) == 1, old
    source.write_text(text.replace(old, new), encoding="utf-8")


def check(root: Path) -> subprocess.CompletedProcess:
    """`python -m tables.gen --check` against the checkout at `root`."""
    return subprocess.run([sys.executable, "-m", "tables.gen", "--check", "--root", str(root)], cwd=ROOT,
                          capture_output=True, text=True, check=False)


def assert_checked_stale(root: Path, path: str) -> None:
    """The check exits 1 and names `path` stale."""
    result = check(root)
    assert result.returncode == 1
    assert f"stale: {path} " in result.stderr


def assert_refused(root: Path, problem: str) -> None:
    """The check refuses the source (exit 2), saying `problem`."""
    result = check(root)
    assert result.returncode == 2 and problem in result.stderr, result.stderr


def test_the_committed_copies_are_fresh() -> None:
    result = subprocess.run([sys.executable, "-m", "tables.gen", "--check"], cwd=ROOT, capture_output=True,
                            text=True, check=False)
    assert (result.returncode, result.stderr) == (0, "")


@pytest.mark.parametrize("path", COPY_PATHS)
def test_a_changed_source_flags_the_copy_as_stale(tmp_path: Path, path: str) -> None:
    """A setting's doc and default and a detector's doc change: every copy carries one of them."""
    root = checkout(tmp_path)
    assert stale(root) == []
    edit_source(root, 'default = 30\nfield = "history_size"', 'default = 31\nfield = "history_size"')
    edit_source(root, 'doc = "Recent tool calls remembered per run."', 'doc = "Recent calls kept per run."')
    edit_source(root, "Any no-progress streak that grows too long", "Any no-progress streak grown too long")

    assert path in stale(root)
    assert_checked_stale(root, path)

    # Regenerating makes it fresh again, and the change is in it.
    assert path in write(root)
    assert stale(root) == []
    text = (root / path).read_text(encoding="utf-8")
    assert "Recent calls kept per run" in text or "streak grown too long" in text


@pytest.mark.parametrize("path", COPY_PATHS)
def test_a_hand_edited_copy_is_flagged(tmp_path: Path, path: str) -> None:
    root = checkout(tmp_path)
    target = root / path
    text = target.read_text(encoding="utf-8")
    # Inside the generated part: a line naming historySize's doc, or the breaker detector's.
    line = next(line for line in text.splitlines()
                if "remembered per run" in line or "streak that grows too long" in line)
    target.write_text(text.replace(line, line.replace("remembered", "kept").replace("grows", "grew"), 1),
                      encoding="utf-8")

    assert stale(root) == [path]


@pytest.mark.parametrize("path", SETTINGS_FACE_PATHS)
def test_a_renamed_setting_flags_the_face_copy_as_stale(tmp_path: Path, path: str) -> None:
    """A resolved field renamed: the core's Settings class, its stub and what the daemon passes
    it all name the new field, and none the old."""
    root = checkout(tmp_path)
    assert stale(root) == []
    edit_source(root, 'field = "history_size"', 'field = "history_length"')

    assert path in stale(root)
    assert_checked_stale(root, path)
    assert path in write(root)
    assert stale(root) == []
    text = (root / path).read_text(encoding="utf-8")
    assert "history_length" in text and "history_size" not in text


@pytest.mark.parametrize("path", SETTINGS_FACE_PATHS)
def test_a_hand_edited_face_copy_is_flagged(tmp_path: Path, path: str) -> None:
    root = checkout(tmp_path)
    target = root / path
    text = target.read_text(encoding="utf-8")
    line = next(line for line in text.splitlines() if "history_size" in line)  # inside the generated part
    target.write_text(text.replace(line, line.replace("history_size", "history_sizes"), 1), encoding="utf-8")

    assert stale(root) == [path]


TOY_SETTING = """
[[setting]]
path = "loopwarden.toySwitch"
kind = "bool"
default = false
field = "toy_switch"
proto_tag = 99
doc = "A toy switch."
"""


def test_a_new_setting_reaches_the_cores_typed_face(tmp_path: Path) -> None:
    """One [[setting]] row is all the core's Settings needs: a required keyword, a getter, its
    stub, and the keyword the daemon passes."""
    root = checkout(tmp_path)
    with (root / SOURCE).open("a", encoding="utf-8") as source:
        source.write(TOY_SETTING)
    written = write(root)

    assert set(SETTINGS_FACE_PATHS) <= set(written)
    assert stale(root) == []
    face = (root / "core/src/python/settings_gen.rs").read_text(encoding="utf-8")
    assert "        toy_switch: bool,\n" in face and "            toy_switch,\n" in face
    assert "    /// A toy switch.\n    #[getter]\n    fn toy_switch(&self) -> bool {\n        self.0.toy_switch\n" in face
    stub = (root / "core/loopwarden_core.pyi").read_text(encoding="utf-8")
    assert "    # A toy switch.\n    toy_switch: bool\n" in stub and "        toy_switch: bool,\n" in stub
    core = (root / "server/loopwarden_server/core.py").read_text(encoding="utf-8")
    assert "        toy_switch=settings.toy_switch,\n        # generated:core-settings:end" in core


def add_field(root: Path, message: str, last: str, line: str) -> None:
    """`line` added to the proto's `message` after its field `last`."""
    proto = root / PROTO
    text = proto.read_text(encoding="utf-8")
    anchor = f"  {last}\n}}\n"
    assert text.count(anchor) == 1 and f"message {message} {{" in text.split(anchor)[0].rsplit("\n}\n", 1)[-1]
    proto.write_text(text.replace(anchor, f"  {last}\n  {line}\n}}\n"), encoding="utf-8")


def add_tool_call_field(root: Path, line: str) -> None:
    add_field(root, "ToolCall", "string batch_id = 6;", line)


@pytest.mark.parametrize("path", SHAPE_PATHS)
def test_a_new_proto_field_flags_the_shape_copy_as_stale(tmp_path: Path, path: str) -> None:
    """A scalar field added to ToolCall and to RunRecord reaches every copy of the event's shape
    and of the record's view."""
    root = checkout(tmp_path)
    assert stale(root) == []
    add_tool_call_field(root, "uint32 priority = 7;")
    add_field(root, "RunRecord", "string unknown_tool_name = 6;", "// The call's priority.\n  uint32 priority = 7;")

    assert path in stale(root)
    assert_checked_stale(root, path)
    assert path in write(root)
    assert stale(root) == []
    assert "priority" in (root / path).read_text(encoding="utf-8").lower()


@pytest.mark.parametrize("path", SHAPE_PATHS)
def test_a_hand_edited_shape_copy_is_flagged(tmp_path: Path, path: str) -> None:
    root = checkout(tmp_path)
    target = root / path
    text = target.read_text(encoding="utf-8")
    # The first line naming a record field, else an event field: inside the generated part.
    tokens = ("unknown_tool_name", "unknownToolName", "UnknownToolName", "batch_id", '"tool_call"', "toolCallExtra",
              "toolCall(", "pub struct Carried", "message Carried")
    token = next(t for t in tokens if t in text)
    line = next(line for line in text.splitlines() if token in line)
    renamed = token[:-1] + '_x"' if token.endswith('"') else token + "_x"  # still valid code
    target.write_text(text.replace(line, line.replace(token, renamed), 1), encoding="utf-8")

    assert stale(root) == [path]


@pytest.mark.parametrize(("line", "problem"), [
    ("repeated string tags = 7;", "ToolCall.tags: a repeated field"),
    ("bytes blob = 7;", "ToolCall.blob: type bytes"),
    ("uint64 model = 7;", "Usage.model: string here, uint64 in ToolCall"),
    ("ToolClass second_class = 7;", "ToolCall.second_class: a builder cannot carry a ToolClass field"),
    ("map<string, string> labels = 7;", "is not a field of the plain form"),
])
def test_a_proto_field_without_a_shape_is_refused_naming_it(tmp_path: Path, line: str, problem: str) -> None:
    root = checkout(tmp_path)
    add_tool_call_field(root, line)
    assert_refused(root, problem)


def test_a_record_field_that_is_no_tool_call_field_is_refused(tmp_path: Path) -> None:
    """A RunRecord field is filled by hand (listed in [record_view]) or carried from ToolCall."""
    root = checkout(tmp_path)
    add_field(root, "RunRecord", "string unknown_tool_name = 6;", "string note = 7;")
    with pytest.raises(SourceError, match="RunRecord.note: not a ToolCall field of the same type"):
        write(root)


def test_the_compiled_hooks_host_table_follows_the_host_modules(tmp_path: Path) -> None:
    """hosts.rs is stale when a host's answer changes, fresh again once regenerated, and flagged
    when edited by hand."""
    root = checkout(tmp_path)
    assert stale(root) == []
    protocol = root / CLIENT / "hooks" / "protocol.py"
    text = protocol.read_text(encoding="utf-8")
    protocol.write_text(text.replace("this call ran without a loop check.", "this call ran unchecked."),
                        encoding="utf-8")
    assert stale(root) == [HOSTS_RS]
    assert HOSTS_RS in write(root)
    assert "this call ran unchecked." in (root / HOSTS_RS).read_text(encoding="utf-8")

    generated = root / HOSTS_RS
    generated.write_text(generated.read_text(encoding="utf-8").replace('"PreToolUse"', '"preToolUse"', 1),
                         encoding="utf-8")
    assert stale(root) == [HOSTS_RS]


def test_a_new_hook_host_reaches_the_compiled_hook(tmp_path: Path) -> None:
    """A host module and its registration line are all the compiled hook's table needs."""
    root = checkout(tmp_path)
    hosts = root / CLIENT / "hooks" / "hosts"
    (hosts / "toy.py").write_text(
        "from ..host import HookHost, HookInput, Reply, Stage, string\n"
        "class Toy(HookHost):\n"
        "    name = 'toy'\n"
        "    title = 'Toy'\n"
        "    stages = {'beforeCall': Stage.BEFORE_TOOL}\n"
        "    def read(self, name, payload):\n"
        "        return HookInput(Stage.BEFORE_TOOL, string(payload, 'sid'), tool_name=string(payload, 'tool'))\n"
        "    def render(self, reply: Reply, name):\n"
        "        return {'block': reply.deny} if reply.deny is not None else {}\n"
        "HOST = Toy()\n", encoding="utf-8")
    registry = hosts / "__init__.py"
    text = registry.read_text(encoding="utf-8")
    registry.write_text(re.sub(r"^MODULES = \((.*)\)$", r'MODULES = (\1, "toy")', text, count=1, flags=re.M),
                        encoding="utf-8")

    assert stale(root) == [HOSTS_RS]
    write(root)
    table = (root / HOSTS_RS).read_text(encoding="utf-8")
    assert 'name: "toy"' in table and 'event: "beforeCall"' in table
    assert 'denied: r#"{"block": "loopwarden could not check this call (@REASON@)' in table


TOY_LIMIT = """
[[limit]]
name = "max_toy_bytes"
unit = "bytes"
default = 2097152
help = "largest toy accepted"
doc = "a larger toy is rejected"
core = true
"""


@pytest.mark.parametrize("path", LIMIT_PATHS)
def test_a_changed_limit_flags_the_copy_as_stale(tmp_path: Path, path: str) -> None:
    """A core limit renamed (its field, flag and variable): every copy of the limits names it,
    and the error code json_too_deep names its new flag."""
    root = checkout(tmp_path)
    assert stale(root) == []
    edit_source(root, 'name = "max_json_depth"', 'name = "max_json_nesting"')
    edit_source(root, 'limit = "max_json_depth"', 'limit = "max_json_nesting"')  # json_too_deep's

    assert path in stale(root)
    assert_checked_stale(root, path)
    assert path in write(root)
    assert stale(root) == []
    text = (root / path).read_text(encoding="utf-8")
    assert "max_json_nesting" in text or "--max-json-nesting" in text
    assert "max_json_depth" not in text and "--max-json-depth" not in text
    if path == "docs/configuration.md":
        assert "| `json_too_deep` | REJECT | params_json or result_json nests deeper than --max-json-nesting. |" in text


@pytest.mark.parametrize("path", LIMIT_PATHS)
def test_a_hand_edited_limit_copy_is_flagged(tmp_path: Path, path: str) -> None:
    root = checkout(tmp_path)
    target = root / path
    text = target.read_text(encoding="utf-8")
    # Inside the generated part: the first line naming the JSON depth limit.
    line = next(line for line in text.splitlines() if "max_json_depth" in line or "--max-json-depth" in line)
    target.write_text(text.replace(line, line.replace("json_depth", "json_dept").replace("json-depth", "json-dept"),
                                   1), encoding="utf-8")

    assert stale(root) == [path]


def test_a_new_limit_reaches_every_copy(tmp_path: Path) -> None:
    """One [[limit]] row is all a new limit needs to be a flag, a settings field, a field of the
    core's Limits and of its Python class, a keyword the daemon passes, and a docs row."""
    root = checkout(tmp_path)
    with (root / SOURCE).open("a", encoding="utf-8") as source:
        source.write(TOY_LIMIT)
    written = write(root)

    assert sorted(written) == sorted(LIMIT_PATHS)
    assert stale(root) == []
    read = {path: (root / path).read_text(encoding="utf-8") for path in LIMIT_PATHS}
    assert "    pub max_toy_bytes: usize," in read["core/src/service/limits_gen.rs"]
    assert "            max_toy_bytes: 2 << 20," in read["core/src/service/limits_gen.rs"]
    python_core = read["core/src/python/limits_gen.rs"]
    assert "    max_toy_bytes: usize," in python_core and "max_toy_bytes: l.max_toy_bytes," in python_core
    assert "max_toy_bytes: max_toy_bytes.unwrap_or(base.max_toy_bytes)," in python_core
    assert "        max_toy_bytes = None\n" in python_core
    stub = read["core/loopwarden_core.pyi"]
    assert "    max_toy_bytes: int\n" in stub and "        max_toy_bytes: int | None = None,\n" in stub
    settings = read["server/loopwarden_server/settings.py"]
    assert "    max_toy_bytes: int = 2 * 1024 * 1024\n" in settings
    assert ('    ("--max-toy-bytes", "LOOPWARDEN_MAX_TOY_BYTES", "max_toy_bytes", _positive_int, '
            '"largest toy accepted (default 2 MiB)"),\n') in settings
    assert ("        max_toy_bytes=limits.max_toy_bytes,\n        # generated:core-limits:end"
            in read["server/loopwarden_server/core.py"])
    assert ("| `--max-toy-bytes N` | `LOOPWARDEN_MAX_TOY_BYTES` | 2 MiB | a larger toy is rejected |"
            in read["docs/configuration.md"])
    assert ('MAX_TOY_BYTES = DaemonLimit("--max-toy-bytes", 2 * 1024 * 1024, "2 MiB")\n'
            in read["client/python/loopwarden/daemon_limits.py"])
    # The chart: a value (0: the flag left out), its schema, its flag, its README row.
    meaning = "Largest toy accepted, in bytes (`--max-toy-bytes`; daemon default 2 MiB): a larger toy is rejected."
    values = read["helm/loopwarden/values.yaml"]
    assert "    maxToyBytes: 0\n    # generated:daemon-limits:end" in values
    assert "    # -- Largest toy accepted, in bytes (`--max-toy-bytes`; daemon default 2 MiB)" in values
    schema = json.loads(read["helm/loopwarden/values.schema.json"])["properties"]["daemon"]["properties"]["limits"]
    assert schema["properties"]["maxToyBytes"] == {"type": "integer", "minimum": 0,
                                                   "description": meaning + " 0: the daemon default."}
    assert schema["required"][-1] == "maxToyBytes"
    assert "\nmaxToyBytes --max-toy-bytes\n{{- end }}" in read["helm/loopwarden/templates/_helpers.tpl"]
    assert f"| `daemon.limits.maxToyBytes` | `0` | {meaning} |" in read["helm/loopwarden/README.md"]


def test_a_daemon_only_limit_stays_out_of_the_core(tmp_path: Path) -> None:
    root = checkout(tmp_path)
    with (root / SOURCE).open("a", encoding="utf-8") as source:
        source.write(TOY_LIMIT.replace("core = true", "core = false"))
    written = write(root)

    assert sorted(written) == sorted(set(LIMIT_PATHS) - set(CORE_LIMIT_PATHS))
    assert "max_toy_bytes" not in (root / "server/loopwarden_server/core.py").read_text()


@pytest.mark.parametrize(("row", "problem"), [
    (TOY_LIMIT.replace('"bytes"', '"megabytes"'), "limit max_toy_bytes: unit 'megabytes' is not one of"),
    (TOY_LIMIT.replace("2097152", "0"), "limit max_toy_bytes: the default is a positive integer"),
    (TOY_LIMIT.replace("2097152", "2.5"), "limit max_toy_bytes: the default is a positive integer"),
    (TOY_LIMIT.replace('"max_toy_bytes"', '"max_json_depth"'), "limit 'max_json_depth' is defined twice"),
    (TOY_LIMIT.replace('unit = "bytes"\ndefault = 2097152', 'unit = "seconds"\ndefault = 2.5'),
     "limit max_toy_bytes: the core's limits are counts"),
    ('[[error_code]]\ncode = "toy_too_large"\nkind = "reject"\nlimit = "max_toys"\ndoc = "Over {flag}."\n',
     "error code toy_too_large: limit 'max_toys' is not a [[limit]]"),
    ('[[error_code]]\ncode = "toy_too_large"\nkind = "reject"\ndoc = "Over {flag}."\n',
     "error code toy_too_large: a doc names its limit's flag as {flag}, and only with limit"),
])
def test_an_inconsistent_limit_is_refused_naming_it(tmp_path: Path, row: str, problem: str) -> None:
    root = checkout(tmp_path)
    with (root / SOURCE).open("a", encoding="utf-8") as source:
        source.write(row)
    assert_refused(root, problem)


def test_the_core_the_daemon_and_the_table_hold_the_same_limits() -> None:
    """The built core's defaults, the daemon's Limits and its flags are the table's, and core.py hands
    each core limit over."""
    from loopwarden_server import settings
    from loopwarden_server.core import core_limits

    tables = load(ROOT)
    daemon = settings.Limits()
    core = loopwarden_core.Limits()
    for limit in tables.limits:
        assert getattr(daemon, limit.name) == limit.default, limit.name
        if limit.core:
            assert getattr(core, limit.name) == limit.default, limit.name
    # core.py hands every core limit over by name: distinct values arrive as they were set.
    distinct = settings.Limits(**{limit.name: 1000 + i for i, limit in enumerate(tables.limits)})
    crossed = core_limits(distinct)
    assert all(getattr(crossed, limit.name) == getattr(distinct, limit.name) for limit in tables.core_limits)
    parsed = settings.parse_serve_args([arg for limit in tables.limits for arg in (limit.flag, "7")], {})
    assert all(getattr(parsed.limits, limit.name) == 7 for limit in tables.limits)


def test_the_client_and_the_chart_hold_the_tables_limits() -> None:
    """The defaults the client reduces events to and the chart's `daemon.limits` keys are the
    table's: every limit, in table order, its flag and default."""
    import yaml
    from loopwarden import daemon_limits

    tables = load(ROOT)
    for limit in tables.limits:
        client = getattr(daemon_limits, limit.name.upper())
        assert (client.flag, client.default, client.shown) == (limit.flag, limit.default, limit.shown)
    chart = yaml.safe_load((ROOT / "helm/loopwarden/values.yaml").read_text(encoding="utf-8"))
    assert chart["daemon"]["limits"] == {camel(limit.name): 0 for limit in tables.limits}
    assert list(chart["daemon"]["limits"]) == [camel(limit.name) for limit in tables.limits]


def test_a_new_detector_reaches_every_language(tmp_path: Path) -> None:
    root = checkout(tmp_path)
    number = max(d.number for d in load(root).detectors) + 1
    with (root / SOURCE).open("a", encoding="utf-8") as source:
        source.write(f'\n[[detector]]\nid = "toy_repeat"\nnumber = {number}\nrust = "ToyRepeat"\ndoc = "A toy."\n')
    written = write(root)

    assert set(written) == set(COPY_PATHS) - {path for path in COPY_PATHS if path.startswith("helm/")} \
        - {"docs/configuration.md"}
    assert f"ToyRepeat = {number}," in (root / "core/src/tables.rs").read_text()
    assert f"DETECTOR_TOY_REPEAT = {number};" in (root / "proto/loopwarden/v1/loopwarden.proto").read_text()
    assert 'const DetectorToyRepeat = "toy_repeat"' in (root / "client/go/loopwarden/tables_gen.go").read_text()
    assert '"toy_repeat"' in (root / "client/node/src/tables.js").read_text()
    assert f"| `toy_repeat` | {number} |" in (root / "docs/detectors.md").read_text()


@pytest.mark.parametrize(("old", "new", "problem"), [
    ("proto_tag = 18", "proto_tag = 17", "proto tag 17 is defined twice"),
    ('blockAt"\nkind = "count_or_off"', 'blockAt"\nkind = "counter"', "kind 'counter' is not one of"),
    ('default = 12\nafter = "warnAt"', 'default = 12\nafter = "warnAtt"', "after 'warnAtt' is not a key of loopwarden.argumentChurn"),
    ('level = "warning"\ntext = "WARNING: {tool} has', 'level = "critical"\ntext = "WARNING: {tool} has',
     "message generic_repeat_warning: a critical message starts with 'CRITICAL: '"),
])
def test_an_inconsistent_source_is_refused_naming_the_row(tmp_path: Path, old: str, new: str, problem: str) -> None:
    root = checkout(tmp_path)
    edit_source(root, old, new)
    with pytest.raises(SourceError, match=problem.replace("(", r"\(").replace(")", r"\)")):
        load(root)
    assert_refused(root, problem)


def test_the_core_and_the_config_read_the_same_tables() -> None:
    """The built core exports what its generated tables hold, and so does the Python config."""
    assert loopwarden_core.DETECTORS == config_tables.DETECTORS[1:]
    tables = load(ROOT)
    assert [d.id for d in tables.detectors] == list(config_tables.DETECTORS)
    assert [e.code for e in tables.error_codes] == list(config_tables.ERROR_CODES)
