"""The documentation does what it says: every shell and Python block of README.md and docs/ runs, each page's
blocks in order, each within a timeout, so that a recipe that fails or never ends fails the tests.

How blocks are run (docs/README.md, "How the docs are tested", says the same for writers):

- Every fenced block names its language. ``bash`` (or ``sh``) blocks run with ``bash -e -o pipefail``, ``python``
  blocks with this Python; any other language (``text`` for output, ``json``, ``yaml``, ...) is not run.
- The blocks of one page run in order in one new folder, so a block may use the files an earlier one wrote. The
  folder stands in for the repository root: ``config``, ``demo.sh`` and ``.venv`` (the environment the tests run
  in) are links to the real ones. ``ROS_HOME`` and ``TMPDIR`` are inside it, DDS stays on this host in the test
  run's domain, and the ``affordance-ros`` of this environment is first on ``PATH``.
- An HTML comment on the line before a block (blank lines between are allowed) changes how it is run:
  ``<!-- not run: REASON -->`` skips it (a REASON is required: why it cannot run here);
  ``<!-- timeout: SECONDS -->`` allows it longer than the default (60 s);
  ``<!-- file: NAME -->`` writes it to NAME in the folder instead of running it (a later block runs it);
  ``<!-- output: checked -->`` before a ``text`` block: it shows what the run block before it prints, and is
  compared with that (``shown_in``): each of its lines is a line of the output, in order (lines of the output may
  be left out); whitespace is compared as a space, ``...`` stands for any text, a decimal number matches one
  within 3 in its last digit (a few ulps of the printed precision: another machine's arithmetic), and a number of
  seconds ("4.8 s") any number. Whole numbers and all other text must be as shown. ``<!-- ulps: N -->`` beside it
  widens the 3 to N, for figures that another machine prints further off (scikit-learn's tree ensembles: the same
  versions of everything printed 6.982 on one machine and 6.977 on another).
- A block that is still running at its timeout fails the page; so does a non-zero exit status. Whatever a block
  left running in the background (a node started with ``&``) is stopped when it ends.

The pages are also checked for what they promise: README.md has at most 200 lines, every page of docs/ at most 300
and a block that runs (but the index and architecture.md), every page with sections has a table of contents,
relative links lead to files and headings that exist, a time a page promises ("under a minute") is the timeout of
the block it is said of and vague ones ("about 25 s", "a few minutes") are only in the benchmarks' pages, where each
is a measurement, docs/interfaces.md shows every .msg/.srv/.action file as it is, docs/parameters.md has a row for
every parameter the nodes declare, with its type and default, docs/model-format.md one for every learning option,
with its default, and docs/architecture.md names every module of every layer.
"""

import json
import os
import re
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
import rclpy

from affordance_ros.core import LearningOptions
from affordance_ros.nodes.learner.learner_node import LearnerNode
from affordance_ros.nodes.simulation.simulated_robot import SimulatedRobot
from affordance_ros.share import ros_home, share_directory

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
DEFAULT_TIMEOUT = 60.0
RUN = {"bash": "bash", "sh": "bash", "python": "python"}
FENCE = re.compile(r"^(\s*)```(.*)$")
DIRECTIVE = re.compile(r"^<!--\s*(not run|timeout|file|output|ulps):\s*(.*?)\s*-->$")
NUMBER = r"-?\d+(?:\.\d+)?(?:e[+-]?\d+)?"
# in a shown line: a decimal number (group 1), seconds (group 2: any number), '...' or whitespace
SHOWN_PART = re.compile(r"(-?\d+\.\d+(?:e[+-]?\d+)?)(?!\d|\s*s\b)|(-?\d+(?:\.\d+)?)(?=\s*s\b)|(\.\.\.)|(\s+)")
ULPS = 3  # a shown decimal number matches one this many units of its last digit away


@dataclass
class Block:
    page: Path
    line: int          # of the opening fence, 1-based
    language: str
    text: str
    directives: dict

    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def blocks(page: Path) -> list:
    """The fenced blocks of ``page`` with the directives in the comments right before them."""
    lines = page.read_text(encoding="utf-8").splitlines()
    out, k = [], 0
    while k < len(lines):
        fence = FENCE.match(lines[k])
        if not fence:
            k += 1
            continue
        indent, language = fence.group(1), fence.group(2).strip()
        end = next((j for j in range(k + 1, len(lines)) if lines[j].strip() == "```"), None)
        assert end is not None, f"{page.relative_to(ROOT)}:{k + 1}: the block is not closed"
        directives, j = {}, k - 1
        while j >= 0 and (not lines[j].strip() or DIRECTIVE.match(lines[j].strip())):
            match = DIRECTIVE.match(lines[j].strip())
            if match:
                directives[match.group(1)] = match.group(2)
            j -= 1
        text = "\n".join(line[len(indent):] if line.startswith(indent) else line for line in lines[k + 1:end])
        out.append(Block(page, k + 1, language, text + "\n", directives))
        k = end + 1
    return out


def page_id(page: Path) -> str:
    return str(page.relative_to(ROOT))


def in_a_venv() -> bool:
    return sys.prefix != sys.base_prefix


def environment(folder: Path) -> dict:
    env = dict(os.environ)
    env.update(ROS_HOME=str(folder / "ros_home"), TMPDIR=str(folder / "tmp"), ROS_AUTOMATIC_DISCOVERY_RANGE="LOCALHOST",
               PATH=str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", ""))
    if in_a_venv():
        env["VIRTUAL_ENV"] = sys.prefix
    return env


def stop_what_is_left(process: subprocess.Popen) -> None:
    """SIGINT to the block's process group (nodes left in the background), then SIGKILL to what is left."""
    for sig, grace in ((signal.SIGINT, 10.0), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            return
        try:
            process.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            pass


def run_block(block: Block, folder: Path, env: dict) -> str:
    timeout = float(block.directives.get("timeout", DEFAULT_TIMEOUT))
    script = folder / f".block-{block.line}{'.py' if block.language == 'python' else '.sh'}"
    script.write_text(block.text, encoding="utf-8")
    command = ([sys.executable, "-P", str(script)] if RUN[block.language] == "python"
               else ["bash", "-e", "-o", "pipefail", str(script)])
    log = folder / f".block-{block.line}.log"
    with log.open("w") as output:
        process = subprocess.Popen(command, cwd=folder, env=env, stdout=output, stderr=subprocess.STDOUT,
                                   stdin=subprocess.DEVNULL, start_new_session=True)
        try:
            status = process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            status = None
        finally:
            stop_what_is_left(process)
    output = log.read_text(errors="replace")
    shown = "\n".join(output.splitlines()[-40:])
    assert status is not None, f"{block.where()}: still running after {timeout:g} s (timeout); its output:\n{shown}"
    assert status == 0, f"{block.where()}: exit status {status}; its output:\n{shown}"
    return output


def shown_pattern(line: str) -> tuple[re.Pattern, list]:
    """The regular expression of a shown output line (``<!-- output: checked -->``) and, for each of its groups,
    the shown decimal number it stands for (None: any number, e.g. of seconds)."""
    pattern, numbers, end = "", [], 0
    for part in SHOWN_PART.finditer(line):
        pattern += re.escape(line[end:part.start()])
        decimal, seconds, dots, _ = part.groups()
        if decimal or seconds:
            pattern += f"({NUMBER})"
            numbers.append(decimal)
        else:
            pattern += ".*?" if dots else r"\s+"
        end = part.end()
    return re.compile(pattern + re.escape(line[end:])), numbers


def near(shown: str | None, printed: str, ulps: int = ULPS) -> bool:
    """A printed number as a shown one: within ``ulps`` units of its last digit (any, for None)."""
    if shown is None:
        return True
    mantissa, _, exponent = shown.lower().partition("e")
    unit = 10.0 ** (int(exponent or 0) - len(mantissa.partition(".")[2]))
    return abs(float(printed) - float(shown)) <= ulps * unit * (1 + 1e-9)


def shown_in(shown: str, output: str, ulps: int = ULPS) -> str:
    """'' if every line of ``shown`` is a line of ``output``, in order (``shown_pattern``, ``near``); else which
    line is not, and the printed line it differs from in numbers only, if there is one."""
    printed = [" ".join(line.split()) for line in output.splitlines()]
    k = 0
    for line in shown.splitlines():
        line = " ".join(line.split())
        if not line:
            continue
        pattern, numbers = shown_pattern(line)
        matches = [(j, m) for j in range(k, len(printed)) if (m := pattern.fullmatch(printed[j]))]
        good = next((j for j, m in matches if all(near(a, b, ulps) for a, b in zip(numbers, m.groups()))), None)
        if good is None:
            differing = f"; it prints {printed[matches[0][0]]!r}" if matches else ""
            return f"the line {line!r} is not in what it prints (or not in that order){differing}"
        k = good + 1
    return ""


@pytest.mark.parametrize("page", PAGES, ids=page_id)
def test_every_shell_and_python_block_runs(page, tmp_path):
    folder = tmp_path / "work"
    (folder / "tmp").mkdir(parents=True)
    for name in ("config", "demo.sh"):
        (folder / name).symlink_to(ROOT / name)
    (folder / ".venv").symlink_to(sys.prefix)
    env = environment(folder)
    output = None  # of the block run last
    for block in blocks(page):
        assert block.language, (f"{block.where()}: name the block's language (bash or python to run it, text for "
                                 "output, json, ...)")
        if "output" in block.directives:
            assert block.directives["output"] == "checked" and block.language not in RUN, (
                f"{block.where()}: <!-- output: checked --> is said of a text block that shows what the block "
                "before it prints")
            if output is not None:  # (None: that block was not run)
                wrong = shown_in(block.text, output, int(block.directives.get("ulps", ULPS)))
                assert not wrong, f"{block.where()}: shows what the block before it prints, but {wrong}"
            output = None
            continue
        if "file" in block.directives:
            (folder / block.directives["file"]).write_text(block.text, encoding="utf-8")
            continue
        if block.language not in RUN:
            continue
        output = None
        if "not run" in block.directives:
            assert block.directives["not run"], f"{block.where()}: say why it is not run (<!-- not run: why -->)"
            continue
        if ".venv" in block.text and not in_a_venv():
            continue  # (a colcon install has no .venv: the blocks for it are the ROS 2 ones)
        output = run_block(block, folder, env)


def test_the_readme_is_short_and_every_page_has_a_table_of_contents():
    assert len((ROOT / "README.md").read_text().splitlines()) <= 200
    for page in PAGES[1:]:
        text = page.read_text(encoding="utf-8")
        sections = [anchor(h) for h in re.findall(r"^## (.+)$", text, flags=re.M)]
        if len(sections) >= 3:
            contents = next((paragraph for paragraph in text.split("\n\n") if paragraph.startswith("Contents:")), "")
            assert contents, f"{page_id(page)}: a 'Contents:' paragraph linking its sections"
            assert re.findall(r"\]\(#([^)]+)\)", contents) == sections, f"{page_id(page)}: Contents != sections"


MAX_PAGE_LINES = 300  # a page of docs/ a reader finishes (the benchmarks' detail pages, records of runs, aside)
# Pages without a block that runs: the index of the pages, and the layers' map
WITHOUT_EXAMPLES = {"docs/README.md", "docs/architecture.md"}


def task_and_reference_pages() -> list:
    """docs/*.md: the pages a reader follows or looks things up in (not docs/benchmarks/ nor docs/bench/)."""
    return sorted((ROOT / "docs").glob("*.md"))


def test_every_page_is_short_and_has_an_example_that_runs():
    for page in task_and_reference_pages():
        lines = len(page.read_text(encoding="utf-8").splitlines())
        assert lines <= MAX_PAGE_LINES, f"{page_id(page)}: {lines} lines; split it by task (at most {MAX_PAGE_LINES})"
        if page_id(page) not in WITHOUT_EXAMPLES:
            assert any(block.language in RUN and "not run" not in block.directives for block in blocks(page)), (
                f"{page_id(page)}: no block that test_docs runs; show what the page says with one")


# "about 25 s", "~2 min", "a few minutes", "10-20 s": a time a page cannot hold to; in the benchmarks' pages each is
# a measurement (a run, its date and machine), elsewhere it is a promise nothing checks
VAGUE_TIME = re.compile(r"\b(?:about|around|roughly|nearly)\s+(?:\d[\d.,]*(?:\s*[–-]\s*\d[\d.,]*)?\s*"
                        r"(?:s|ms|seconds?|min|minutes?|hours?)|an?\s+(?:second|minute|hour))\b"
                        r"|~\s*\d[\d.,]*\s*(?:s|ms|min|minutes?|hours?)\b"
                        r"|\ba\s+few\s+(?:seconds|minutes|hours)\b"
                        r"|\b\d+(?:\.\d+)?\s*[–-]\s*\d+(?:\.\d+)?\s*(?:s|min|minutes)\b", re.I)
# "under a minute", "under 90 s": a promise, held by the timeout of the block it is said of (the nearest that runs)
UNDER_TIME = re.compile(r"\bunder\s+(a|one|\d+)\s+(minute|minutes|s|seconds)\b")


def prose(page: Path) -> str:
    """The page with its fenced blocks blanked (their lines kept, so that line numbers stay)."""
    return re.sub(r"```.*?```", lambda m: "\n" * m.group(0).count("\n"), page.read_text(encoding="utf-8"), flags=re.S)


def test_a_time_a_page_promises_is_the_timeout_of_the_block_that_holds_it():
    for page in [ROOT / "README.md", *task_and_reference_pages()]:
        text = prose(page)
        if page.name != "benchmarks.md":
            vague = [m.group(0) for m in VAGUE_TIME.finditer(text)]
            assert not vague, (f"{page_id(page)}: {vague}: a time no test holds; say 'under N s' of a block whose "
                               "timeout is N, or give the measurement on a benchmarks page, or leave it out")
        run = [b for b in blocks(page)
               if b.language in RUN and "not run" not in b.directives and "file" not in b.directives]
        for match in UNDER_TIME.finditer(text):
            line = text.count("\n", 0, match.start()) + 1
            amount, unit = match.groups()
            seconds = (1 if amount in ("a", "one") else float(amount)) * (60 if unit.startswith("minute") else 1)
            assert run, f"{page_id(page)}:{line}: '{match.group(0)}' with no block that runs to hold it"
            block = min(run, key=lambda b: abs(b.line - line))
            timeout = float(block.directives.get("timeout", DEFAULT_TIMEOUT))
            assert timeout <= seconds, (f"{page_id(page)}:{line}: '{match.group(0)}', but the block at line "
                                        f"{block.line} may take {timeout:g} s (its timeout)")


def test_the_time_checks_tell_a_promise_from_a_setting():
    promises = ["takes about 25 s", "about 0.1-0.3 s more", "~2 min", "a few minutes", "(10-20 s; its first run",
                "5–10 s for an edited module", "about a minute"]
    settings = ["about as fast as when idle", "resend_timeout 5 s", "every 0.1 s", "its lease, 20 s",
                "within 10 s", "at most 100 parts"]
    assert all(VAGUE_TIME.search(text) for text in promises)
    assert not any(VAGUE_TIME.search(text) for text in settings)
    assert UNDER_TIME.search("It ends in under a minute.").groups() == ("a", "minute")


def test_every_page_is_in_its_index():
    """docs/README.md lists every page of docs/, and docs/benchmarks.md every page of docs/benchmarks/: no page a
    reader cannot find."""
    index = (ROOT / "docs" / "README.md").read_text(encoding="utf-8")
    assert not [p.name for p in task_and_reference_pages() if p.name != "README.md" and f"({p.name})" not in index]
    summary = (ROOT / "docs" / "benchmarks.md").read_text(encoding="utf-8")
    details = sorted((ROOT / "docs" / "benchmarks").glob("*.md"))
    assert details and not [p.name for p in details if f"(benchmarks/{p.name})" not in summary]


# What a run block writes: --out FILE, --db FILE, a node's database_path/model_path, `record BAG`, Python's .save()
WRITES = re.compile(r"--out\s+([\w./-]+)|--db\s+([\w./-]+)|(?:database|model)_path:=([\w./-]+)"
                    r"|affordance-ros record\s+([\w./-]+)|\.save\([\"']([^\"']+)[\"']\)")


def test_no_two_pages_write_the_same_file():
    """Every page says to run its examples from the repository root: followed one after another there, no page's
    example may fail on (or overwrite) a file another page's wrote."""
    writers = {}
    for page in PAGES:
        for block in blocks(page):
            if block.language in RUN and "not run" not in block.directives:
                for match in WRITES.finditer(block.text):
                    writers.setdefault(next(name for name in match.groups() if name), set()).add(page_id(page))
    shared = {name: sorted(pages) for name, pages in writers.items() if len(pages) > 1}
    assert not shared, f"files written by more than one page (give each page's its own name): {shared}"


def anchor(heading: str) -> str:
    """GitHub's anchor of a heading."""
    text = re.sub(r"[`*]|\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip()).lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def test_relative_links_lead_to_files_and_headings_that_exist():
    for page in PAGES:
        text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.S)
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"[a-z]+:", target):
                continue
            path, _, fragment = target.partition("#")
            linked = (page.parent / path).resolve() if path else page
            assert linked.exists(), f"{page_id(page)}: link to {target}: no such file"
            if fragment and linked.suffix == ".md":
                headings = [anchor(h) for h in re.findall(r"^#+ (.+)$", linked.read_text(), flags=re.M)]
                assert fragment in headings, f"{page_id(page)}: link to {target}: no such heading"


def test_interfaces_page_shows_every_interface_file_as_it_is():
    page = ROOT / "docs" / "interfaces.md"
    shown = {}
    text = page.read_text(encoding="utf-8")
    for match in re.finditer(r"^### `?((?:msg|srv|action)/\w+\.(?:msg|srv|action))`?\n+```\w*\n(.*?)```", text,
                             flags=re.M | re.S):
        shown[match.group(1)] = match.group(2)
    files = sorted(str(p.relative_to(ROOT)) for d in ("msg", "srv", "action") for p in (ROOT / d).iterdir())
    assert sorted(shown) == files
    for name in files:
        assert shown[name].rstrip() == (ROOT / name).read_text().rstrip(), f"docs/interfaces.md differs from {name}"


def test_parameters_page_says_which_learner_parameters_can_be_set_at_run_time(tmp_path, monkeypatch):
    monkeypatch.setenv("ROS_HOME", str(tmp_path))
    context = rclpy.Context()
    rclpy.init(context=context)
    try:
        node = LearnerNode(context=context)
        try:
            settable = {n for n in declared_names(node) if not node.describe_parameter(n).read_only}
        finally:
            node.destroy_node()
    finally:
        rclpy.try_shutdown(context=context)
    text = (ROOT / "docs" / "parameters.md").read_text(encoding="utf-8")
    body = text.split("## `affordance_learner` (executable `learner_node`)\n", 1)[1].split("\n## ", 1)[0]
    said = {}
    for line in body.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 5 and cells[0].startswith("`"):
            said[cells[0].strip("`")] = cells[3].startswith("yes")
    assert settable == {"structure", "prior_strength"}
    assert {name for name, yes in said.items() if yes} == settable


def declared_names(node) -> list:
    """The names of the parameters ``node`` declares (ROS's own left out)."""
    return [n for n in node.get_parameters_by_prefix("") if n not in ("use_sim_time", "start_type_description_service")]


def declared(node_class) -> dict:
    """{name: (type, default, description)} of the parameters ``node_class`` declares (ROS's own left out), with
    its defaults."""
    context = rclpy.Context()
    rclpy.init(context=context)
    try:
        node = node_class(context=context)
        try:
            params = node.get_parameters_by_prefix("")
            names = declared_names(node)
            assert all(node.describe_parameter(n).description for n in names), "a parameter without a description"
            return {n: (params[n].type_.name.lower(), params[n].value, node.describe_parameter(n).description)
                    for n in names}
        finally:
            node.destroy_node()
    finally:
        rclpy.try_shutdown(context=context)


def documented(section: str) -> dict:
    """{name: (type, default cell's first code span)} of the parameter table under the heading ``section``."""
    text = (ROOT / "docs" / "parameters.md").read_text(encoding="utf-8")
    body = text.split(f"## {section}\n", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in body.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 4 and cells[0].startswith("`"):
            rows[cells[0].strip("`")] = (cells[1], re.search(r"`([^`]*)`", cells[2]).group(1))
    return rows


def shown_default(value) -> str:
    """How parameters.md writes a default: true/false, numbers as declared, paths from $ROS_HOME and share/."""
    if isinstance(value, bool):
        return str(value).lower()
    if value == "":
        return '""'
    return str(value).replace(str(ros_home()), "$ROS_HOME").replace(str(share_directory()), "share/affordance_ros")


TYPES = {"string": "string", "double": "double", "integer": "int", "bool": "bool"}


@pytest.mark.parametrize("node_class, section", [
    (LearnerNode, "`affordance_learner` (executable `learner_node`)"),
    (SimulatedRobot, "`simulated_robot`"),
])
def test_parameters_page_has_every_declared_parameter_with_its_type_and_default(node_class, section, tmp_path,
                                                                                 monkeypatch):
    monkeypatch.setenv("ROS_HOME", str(tmp_path))  # (where the learner's default database goes)
    params = declared(node_class)
    rows = documented(section)
    assert sorted(rows) == sorted(params), f"docs/parameters.md, {section}: not the declared parameters"
    for name, (kind, default, _) in params.items():
        assert rows[name] == (TYPES[kind], shown_default(default)), f"docs/parameters.md, {section}: {name}"


def learning_table() -> dict:
    """{option: its default as shown} of the table of docs/model-format.md, 'The learning options' (a row of
    several options, `tol`, `max_iter`, shows their defaults in that order, separated by commas)."""
    text = (ROOT / "docs" / "model-format.md").read_text(encoding="utf-8")
    body = text.split("## The learning options\n", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in body.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 3 and cells[0].startswith("`"):
            names = re.findall(r"`([^`]+)`", cells[0])
            rows.update(zip(names, [cells[1]] if len(names) == 1 else cells[1].split(", "), strict=True))
    return rows


# Defaults of None that the page describes instead: K2's order when none is given
DESCRIBED_DEFAULTS = {"order": "actions, objects, effects", "entity_column": "none"}


def shown_option(text: str):
    """A default as model-format.md shows it, read: JSON (numbers, false, lists) or else the text, backticks off."""
    text = text.strip("`")
    try:
        return json.loads(text)
    except ValueError:
        return text


def test_model_format_has_every_learning_option_with_its_default():
    rows, defaults = learning_table(), LearningOptions().to_dict()
    assert sorted(rows) == sorted(defaults), "docs/model-format.md, The learning options: not LearningOptions' fields"
    for name, default in defaults.items():
        shown = DESCRIBED_DEFAULTS[name] if default is None else default
        assert shown_option(rows[name]) == shown, f"docs/model-format.md, The learning options: {name}"


def test_architecture_names_every_module_of_every_layer():
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    for layer in ("core", "data", "nodes", "tools"):
        row = next(line for line in text.splitlines() if line.startswith(f"| `{layer}/` |"))
        named = set(re.findall(r"`(\w+)/?`", row))
        folder = ROOT / "affordance_ros" / layer
        modules = {p.stem for p in folder.glob("*.py") if p.stem != "__init__"}
        modules |= {p.name for p in folder.iterdir() if (p / "__init__.py").exists()}
        assert modules <= named, f"docs/architecture.md, the {layer}/ row does not name {sorted(modules - named)}"


def test_shown_output_is_compared_with_what_is_printed_numbers_within_a_few_in_their_last_digit():
    printed = ("leave one object_id out (2 folds), 240 cases, 4.8 s; learning options: {\"structure\":\"k2\",\"x\":1}\n"
               "Action     log-loss           0.429*    1.386 \n"
               "Effect     RMSE dx            4.530*    5.802 \n")
    assert shown_in("leave one object_id out (2 folds), 240 cases, 22.1 s; learning options: {\"structure\":...}\n"
                    "Effect RMSE dx 4.532* 5.800\n", printed) == ""
    assert "it prints 'Action log-loss 0.429* 1.386'" in shown_in("Action log-loss 0.444* 1.386", printed)
    assert "is not in what it prints" in shown_in("leave one object_id out (3 folds), 240 cases, 4.8 s", printed)
    assert "not in that order" in shown_in("Effect RMSE dx 4.530* 5.802\nAction log-loss 0.429* 1.386", printed)
    assert shown_in("Effect RMSE dx 4.526* 5.802", printed) != ""  # (4 in the last digit)
    assert shown_in("x: 1.5e-03", "x: 0.0015\n") == "" and shown_in("x: 1.5e-03", "x: 0.0019\n") != ""
    assert shown_in("Effect RMSE dx 4.521* 5.802", printed, ulps=10) == ""  # (9: <!-- ulps: 10 -->)
    assert shown_in("Effect RMSE dx 4.519* 5.802", printed, ulps=10) != ""
