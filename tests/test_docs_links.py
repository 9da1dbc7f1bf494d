"""README.md and docs/*.md point only at things that exist.

- Every relative link (``[text](path)``, ``[text](path#anchor)``, ``[text](#anchor)``, images
  too) names a file or folder of the repository, and its anchor a heading of that file, by
  GitHub's rules (:func:`github_slug`).
- Every repository path in backticks (``hwgen/cycles.py``, ``tests/...``) exists, and every
  dotted name in backticks that starts at one of the project's packages (``hwgen.nn.Dense``,
  ``host.Accelerator``) names a module and an attribute that exist. The measurement history
  (docs/performance.md from its "Measurement history" heading on) names files as they were then,
  and is left as written.
- Nothing points outside the repository (``../``), in the docs or in the code's comments.
"""

import ast
import functools
import importlib
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
PACKAGES = ("hwgen", "host", "sim")
HISTORY = "# Measurement history"

_FENCE = re.compile(r"^```.*?^```", re.M | re.S)
_LINK = re.compile(r"!?\[(?:[^\]\\]|\\.)*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$", re.M)
_CODE = re.compile(r"`([^`\n]+)`")
_PATH = re.compile(r"(?<![\w./-])((?:hwgen|host|sim|tests|benchmarks|docs|examples|\.ci)"
                   r"/[\w./-]*\w)")
# `Board.baud`, `Accelerator.infer(...)`: an attribute of a class of the project's packages.
_MEMBER = re.compile(r"([A-Z]\w*)\.(\w+)(?:\(.*\))?")
_DOTTED = re.compile(rf"((?:{'|'.join(PACKAGES)})(?:\.\w+)+)(?:\(.*\))?")
# Dotted words in backticks that are file names, not Python names.
_FILE_SUFFIXES = (".py", ".h", ".c", ".v", ".json", ".npz", ".md", ".cpp")


def github_slug(text):
    """Return GitHub's anchor for a heading's text: the rendered text (no markup) lowercased,
    every character but letters, digits, ``_``, ``-`` and spaces dropped, spaces to ``-``."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", text)     # links and images: their text
    text = re.sub(r"<[^>]+>", "", text)                       # inline HTML
    text = text.replace("`", "").replace("*", "")
    text = re.sub(r"(?<!\w)_+|_+(?!\w)", "", text)            # emphasis, not snake_case
    text = text.strip().lower()
    text = "".join(c for c in text if c.isalnum() or c in "_- ")
    return text.replace(" ", "-")


def anchors(path):
    """Return the anchors of a Markdown file: each heading's slug, repeats numbered ``-1``,
    ``-2``, ... as GitHub does (HTML anchors do not count: GitHub rewrites their ids)."""
    text = _FENCE.sub("", path.read_text())
    seen, found = {}, set()
    for match in _HEADING.finditer(text):
        slug = github_slug(match.group(2))
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        found.add(slug if count == 0 else f"{slug}-{count}")
    return found


def _lines(text, pattern):
    """Yield ``(line, match)`` of ``pattern`` in ``text`` outside fenced code blocks."""
    for fence in _FENCE.finditer(text):  # keep line numbers: blank the fences' text
        text = text[:fence.start()] + re.sub(r"[^\n]", " ", fence.group()) + text[fence.end():]
    for match in pattern.finditer(text):
        yield text.count("\n", 0, match.start()) + 1, match


def broken_links(path):
    """Return ``["file:line: target: what is wrong"]`` of the relative links of ``path``."""
    problems = []
    for line, match in _lines(path.read_text(), _LINK):
        target = match.group(1)
        if re.match(r"[a-z][a-z0-9+.-]*:", target):   # http:, https:, mailto:
            continue
        where = f"{path.relative_to(ROOT)}:{line}: {target}"
        file_part, _, anchor = target.partition("#")
        resolved = (path.parent / file_part).resolve() if file_part else path
        if ROOT.resolve() not in (resolved, *resolved.parents):
            problems.append(f"{where}: points outside the repository")
            continue
        if not resolved.exists():
            problems.append(f"{where}: no such file")
            continue
        if anchor and (resolved.suffix != ".md" or anchor not in anchors(resolved)):
            problems.append(f"{where}: no heading with that anchor in {resolved.name}")
    return problems


def _defined(module_file, name):
    """Whether a module's source (not imported: it may need an optional package) defines or
    imports ``name`` at its top level."""
    tree = ast.parse(module_file.read_text())
    for node in tree.body:
        targets = []
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            targets = [node.name]
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            nodes = node.targets if isinstance(node, ast.Assign) else [node.target]
            targets = [n.id for n in nodes if isinstance(n, ast.Name)]
        elif isinstance(node, ast.ImportFrom | ast.Import):
            targets = [(a.asname or a.name).split(".")[0] for a in node.names]
        if name in targets:
            return True
    return False


def name_exists(dotted):
    """Whether ``dotted`` (``hwgen.nn.Dense``, ``hwgen.boards.catalog``) names a module of the
    repository or an attribute of one (attributes of attributes too, where importable)."""
    parts = dotted.split(".")
    for split in range(len(parts), 0, -1):
        base = ROOT.joinpath(*parts[:split])
        module_file = base / "__init__.py" if base.is_dir() else base.with_suffix(".py")
        if module_file.exists():
            break
    else:
        return False
    rest = parts[split:]
    if not rest:
        return True
    try:
        obj = importlib.import_module(".".join(parts[:split]))
    except ModuleNotFoundError as exc:
        if exc.name.split(".")[0] in PACKAGES:
            raise
        # An optional package (LiteX) is missing: read the source instead.
        return len(rest) == 1 and _defined(module_file, rest[0])
    for attribute in rest:
        if not hasattr(obj, attribute):
            return False
        obj = getattr(obj, attribute)
    return True


@functools.cache
def _class_index():
    """Return ``{class name: [(attributes, base names)]}`` of every class in the project's
    packages: the names its body defines and the ``self.<name>`` it assigns."""
    index = {}
    for package in PACKAGES:
        for source in (ROOT / package).rglob("*.py"):
            for node in ast.walk(ast.parse(source.read_text())):
                if not isinstance(node, ast.ClassDef):
                    continue
                names = set()
                for item in ast.walk(node):
                    if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                        names.add(item.name)
                    elif isinstance(item, ast.Name) and isinstance(item.ctx, ast.Store):
                        names.add(item.id)
                    elif isinstance(item, ast.Attribute) and isinstance(item.ctx, ast.Store) \
                            and isinstance(item.value, ast.Name) and item.value.id == "self":
                        names.add(item.attr)
                bases = [b.id if isinstance(b, ast.Name) else getattr(b, "attr", "")
                         for b in node.bases]
                index.setdefault(node.name, []).append((names, bases))
    return index


def member_exists(cls, attribute, seen=()):
    """Whether a class ``cls`` of the project has ``attribute``, or a base class from outside
    the project that may hold it; ``True`` for a name that is no class of ours."""
    index = _class_index()
    if cls not in index:
        return True
    for names, bases in index[cls]:
        if attribute in names:
            return True
        for base in bases:
            if base not in seen and (base not in index
                                     or member_exists(base, attribute, (*seen, cls))):
                return True
    return False


def missing_references(path):
    """Return ``["file:line: reference: what is wrong"]`` of the code references of ``path``."""
    text = path.read_text()
    if HISTORY in text:
        text = text[:text.index(HISTORY)]
    problems = []
    for line, match in _lines(text, _CODE):
        code = match.group(1)
        where = f"{path.relative_to(ROOT)}:{line}"
        for found in _PATH.finditer(code):
            repo_path, after = found.group(1), code[found.end():found.end() + 1]
            # A pattern (`tests/device/test_<unit>.py`, `build/*.bin`) names no one file.
            if after not in ("<", "*", "{") and not (ROOT / repo_path).exists():
                problems.append(f"{where}: `{repo_path}`: no such file")
        member = _MEMBER.fullmatch(code)
        if member and not member_exists(*member.groups()):
            problems.append(f"{where}: `{code}`: {member.group(1)} has no such attribute")
        dotted = _DOTTED.fullmatch(code)
        if dotted and not dotted.group(1).endswith(_FILE_SUFFIXES) \
                and not name_exists(dotted.group(1)):
            problems.append(f"{where}: `{dotted.group(1)}`: no such module or name")
    return problems


@pytest.mark.parametrize("path", DOCS, ids=lambda p: p.name)
def test_links_resolve(path):
    assert broken_links(path) == []


@pytest.mark.parametrize("path", DOCS, ids=lambda p: p.name)
def test_code_references_exist(path):
    assert missing_references(path) == []


def test_nothing_points_outside_the_repository():
    """No file names a document beside the repository (the contract is docs/arithmetic.md)."""
    outside = re.compile(r"\.\./shared|ARCHITECTURE\.md|architecture brief")
    tracked = [p for pattern in ("*.py", "*.md", "*.cpp", "*.v", "*.toml", "*.txt")
               for p in ROOT.rglob(pattern)
               if not {".git", "rtl_out", "build"} & set(p.relative_to(ROOT).parts)
               and p.name != Path(__file__).name]
    hits = [f"{p.relative_to(ROOT)}:{n}: {line.strip()}" for p in tracked
            for n, line in enumerate(p.read_text(errors="replace").splitlines(), 1)
            if outside.search(line)]
    assert hits == []


def test_github_slug():
    """GitHub's rules, on headings of the kinds the docs have."""
    assert github_slug("MLPerf Tiny") == "mlperf-tiny"
    assert github_slug("The link's rate") == "the-links-rate"
    assert github_slug("The `hwgen build` report (`report.json`)") == \
        "the-hwgen-build-report-reportjson"
    assert github_slug("AXI4-Stream, Wishbone: 8\u00d78 tops") == "axi4-stream-wishbone-88-tops"
    assert github_slug("[Linked](x.md) *and* **bold** snake_case") == \
        "linked-and-bold-snake_case"


def test_checks_can_fail(tmp_path, monkeypatch):
    """A broken link, anchor and reference are each found."""
    monkeypatch.setattr(f"{__name__}.ROOT", tmp_path)
    (tmp_path / "hwgen").mkdir()
    (tmp_path / "hwgen" / "__init__.py").write_text("")
    page = tmp_path / "page.md"
    page.write_text("# Title\n\n[a](missing.md) [b](page.md#nope) [c](#title) [d](../x.md)\n"
                    "`hwgen/gone.py` `hwgen.gone`\n")
    assert [p.split(": ", 2)[-1] for p in broken_links(page)] == [
        "no such file", "no heading with that anchor in page.md",
        "points outside the repository"]
    assert len(missing_references(page)) == 2
