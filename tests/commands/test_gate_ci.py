"""The CI jobs and the Makefile rule of docs/ci.md do what the page says: their
commands run as written in a folder laid out as they expect (``qrels.txt``,
``runs/reference.run``, ``runs/new.run``, made from the sample data), and the job's
status follows the gate's verdict: a copy of the reference passes, a copy with its
rankings reversed fails, and the table the artifact names is written either way.

Installing (``pip install prefeval``) needs the network: that line is only checked to
install prefeval; the prefeval found on PATH is this checkout's (as in test_readme).
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from test_readme import ROOT, readme_blocks

SAMPLE = ROOT / "sample_data"
SNIPPETS = [body for _, lang, body in readme_blocks("docs/ci.md") if lang == "yaml"]
GITHUB = next(body for body in SNIPPETS if re.search(r"^jobs:", body, re.M))
GITLAB = next(body for body in SNIPPETS if re.search(r"^\s+script:", body, re.M))
MAKEFILE = next(body for _, lang, body in readme_blocks("docs/ci.md") if lang == "make")


def github_commands(text: str) -> list[str]:
    """The ``run:`` command lines of a workflow, in order."""
    return [m.group(1).strip() for m in re.finditer(r"^\s*(?:- )?run:\s*(\S.*)$", text, re.M)]


def gitlab_commands(text: str) -> list[str]:
    """The items of every ``script:`` list, in order."""
    out = []
    for block in re.finditer(r"^(\s*)script:\s*\n((?:\1\s+- .*\n)+)", text, re.M):
        out += [line.strip()[2:].strip() for line in block.group(2).splitlines()]
    return out


def test_the_commands_are_read_as_yaml_reads_them():
    """The regular expressions above find what a YAML parser finds: the snippets are
    valid YAML whose steps are these commands, and the artifact is the gate's -o table."""
    yaml = pytest.importorskip("yaml")
    github = yaml.safe_load(GITHUB)
    steps = [s for job in github["jobs"].values() for s in job["steps"]]
    assert [s["run"] for s in steps if "run" in s] == github_commands(GITHUB)
    upload = next(s for s in steps if s.get("uses", "").startswith("actions/upload-artifact"))
    assert upload["if"] == "always()"
    gitlab = yaml.safe_load(GITLAB)
    jobs = [job for job in gitlab.values() if isinstance(job, dict) and "script" in job]
    assert [line for job in jobs for line in job["script"]] == gitlab_commands(GITLAB)
    assert jobs[0]["artifacts"]["when"] == "always"
    assert jobs[0]["allow_failure"]["exit_codes"] == 3
    assert [upload["with"]["path"]] == jobs[0]["artifacts"]["paths"] == ["gate.tsv"]


def _suffixed(lines: list[str], suffix: str) -> list[str]:
    """TREC lines whose query ids end in ``suffix``: a second set of queries."""
    return [f"{line.split(' ', 1)[0]}{suffix} {line.split(' ', 1)[1]}" for line in lines]


def _doubled(path: Path) -> str:
    """The sample file with each query twice (ids ``Q`` and ``Qb``): 40 queries, past
    the gate's default minimum of 25."""
    lines = path.read_text().splitlines()
    return "\n".join(lines + _suffixed(lines, "b")) + "\n"


def _reversed(text: str) -> str:
    """A run with every ranking reversed (each score negated)."""
    rows = [line.split() for line in text.splitlines()]
    return "".join(f"{q} {it} {d} {r} {-float(s)!r} {tag}\n" for q, it, d, r, s, tag in rows)


@pytest.fixture
def project(tmp_path):
    """A folder laid out as the snippets expect; ``runs/new.run`` set by each test."""
    (tmp_path / "qrels.txt").write_text(_doubled(SAMPLE / "qrels.txt"))
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "reference.run").write_text(_doubled(SAMPLE / "runs" / "input.sys03"))
    return tmp_path


@pytest.fixture(scope="module")
def environment():
    """This interpreter's bin folder first on PATH (its ``prefeval``), no cache."""
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    env["PREFEVAL_CACHE"] = "0"
    return env


def run_job(commands: list[str], folder: Path, environment) -> tuple[int, str]:
    """Runs the job's commands as a CI runner does, stopping at the first failing one:
    (its exit status, stderr); ``pip install`` is checked, not run."""
    for command in commands:
        words = shlex.split(command)
        if words[:2] == ["pip", "install"]:
            assert words[2:] == ["prefeval"], command
            continue
        assert words[0] == "prefeval", command
        proc = subprocess.run(
            ["bash", "-c", command], cwd=folder, env=environment, capture_output=True,
            text=True, timeout=600,
        )  # fmt: skip
        assert "Traceback" not in proc.stderr, proc.stderr
        if proc.returncode:
            return proc.returncode, proc.stderr
    return 0, ""


JOBS = {"github": github_commands(GITHUB), "gitlab": gitlab_commands(GITLAB)}


@pytest.mark.parametrize("job", JOBS)
def test_a_copy_of_the_reference_passes(job, project, environment):
    new = project / "runs" / "new.run"
    new.write_bytes((project / "runs" / "reference.run").read_bytes())
    assert run_job(JOBS[job], project, environment) == (0, "")
    table = (project / "gate.tsv").read_text().splitlines()
    assert table[0].split("\t")[:3] == ["measure", "candidate", "reference"]
    assert [row.split("\t")[:4] for row in table[1:]] == [["rpp", "new", "reference", "40"]]
    assert table[1].split("\t")[-1] == "no difference"


@pytest.mark.parametrize("job", JOBS)
def test_a_reversed_copy_fails_the_job(job, project, environment):
    new = project / "runs" / "new.run"
    new.write_text(_reversed((project / "runs" / "reference.run").read_text()))
    status, stderr = run_job(JOBS[job], project, environment)
    assert status == 1
    assert "prefeval: regression: rpp: new vs reference: mean -0.8090" in stderr
    rows = (project / "gate.tsv").read_text().splitlines()  # the artifact, written anyway
    assert rows[1].split("\t")[-1] == "regression"


def test_too_few_queries_is_the_gitlab_jobs_allowed_failure(tmp_path, environment):
    """On the 20 sample queries (fewer than 25) the verdict is inconclusive: exit 3 with
    --strict (GitLab's allowed failure), 0 without (GitHub's job passes)."""
    (tmp_path / "runs").mkdir()
    (tmp_path / "qrels.txt").write_bytes((SAMPLE / "qrels.txt").read_bytes())
    for name in ("reference", "new"):
        (tmp_path / "runs" / f"{name}.run").write_bytes((SAMPLE / "runs/input.sys03").read_bytes())
    status, stderr = run_job(JOBS["gitlab"], tmp_path, environment)
    assert status == 3
    assert "1 of 1 verdicts inconclusive: 20 evaluated queries" in stderr
    assert run_job(JOBS["github"], tmp_path, environment) == (0, "")


def test_the_makefile_rule_stops_make_on_a_regression(tmp_path, environment):
    """make makes ``release`` when the gate passes; with a regressing NEW, the gate's
    status stops make before ``release`` (make's own status is then 2)."""
    (tmp_path / "sample_data").symlink_to(SAMPLE)
    (tmp_path / "Makefile").write_text(MAKEFILE)
    (tmp_path / "reversed.run").write_text(_reversed((SAMPLE / "runs/input.sys03").read_text()))

    def make(*args):
        return subprocess.run(
            ["make", "--no-print-directory", *args], cwd=tmp_path, env=environment,
            capture_output=True, text=True, timeout=600,
        )  # fmt: skip

    passed = make()
    assert passed.returncode == 0, passed.stderr
    assert "no regression: sample_data/runs/input.sys06.gz may replace" in passed.stdout
    failed = make("NEW=reversed.run")
    assert failed.returncode == 2
    assert "regression: rpp: new vs reference" in failed.stderr
    assert re.search(r"\[Makefile:\d+: regression\] Error 1", failed.stderr)
    assert "no regression" not in failed.stdout
    assert (tmp_path / "gate.tsv").read_text().splitlines()[1].endswith("\tregression")


def test_the_jobs_install_prefeval_then_gate():
    """Each job's commands are the install, then the gate (what the tests above run)."""
    for commands in JOBS.values():
        assert commands[0] == "pip install prefeval"
        assert all(c.startswith("prefeval gate --against reference ") for c in commands[1:])
