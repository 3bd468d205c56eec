"""The citations registry: every measure's paper is in it, its fields are the ones the
papers themselves print, its BibTeX parses (balanced braces, one key per entry, and
BibTeX itself where installed), ``prefeval measures NAME`` prints it, and CITATION.cff
describes this version of prefeval."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
from helpers import invoke

import prefeval
from prefeval.core.citations import METHOD_PAPERS, PAPERS, bibliography, cited
from prefeval.measures import MEASURES

ROOT = Path(__file__).resolve().parents[2]
PAPER_TEXTS = ROOT.parent / "shared" / "papers"


def entries(text: str) -> list[tuple[str, str, str]]:
    """(type, key, body) of each ``@type{key, ...}`` entry of ``text``, the body up to
    the closing brace that balances the opening one; AssertionError when a brace is
    unbalanced or text lies between entries."""
    out = []
    rest = text
    while rest.strip():
        head = re.match(r"\s*@([a-z]+)\{([^,{}\s]+),", rest)
        assert head, rest[:80]
        depth, at = 1, head.end()
        while depth:
            assert at < len(rest), f"unbalanced braces in {head.group(2)}"
            depth += {"{": 1, "}": -1}.get(rest[at], 0)
            at += 1
        out.append((head.group(1), head.group(2), rest[head.end() : at - 1]))
        rest = rest[at:]
    return out


def fields(body: str) -> dict[str, str]:
    """``name = {value}`` pairs of an entry's body (values with balanced braces)."""
    found = dict(re.findall(r"^  ([a-z]+) = \{(.*)\},?$", body, re.M))
    for value in found.values():
        assert value.count("{") == value.count("}"), value
    return found


def test_every_measure_names_a_registered_paper():
    for measure in MEASURES.values():
        assert measure.paper in PAPERS, measure.name
        assert measure.citation is PAPERS[measure.paper]
    assert set(METHOD_PAPERS.values()) <= set(PAPERS)


def test_bibliography_parses_with_unique_keys():
    parsed = entries(bibliography(PAPERS))
    keys = [key for _, key, _ in parsed]
    assert keys == list(PAPERS) and len(set(keys)) == len(keys)
    for kind, key, body in parsed:
        paper = PAPERS[key]
        assert kind == paper.kind
        got = fields(body)
        assert got["author"] == " and ".join(paper.authors)
        assert got["title"] == "{" + paper.title + "}"
        assert got["year"] == str(paper.year)
        assert got.get("doi", "") == paper.doi


def test_bibliography_and_cited_keep_registry_order_once():
    keys = ["holm1979simple", "rpp-sigir2022", "holm1979simple", "not-a-key"]
    assert [p.key for p in cited(keys)] == ["rpp-sigir2022", "holm1979simple"]
    assert [k for _, k, _ in entries(bibliography(keys))] == ["rpp-sigir2022", "holm1979simple"]


def test_short_citations():
    assert PAPERS["rpp-sigir2022"].short == "Diaz & Ferraro, SIGIR 2022"
    assert PAPERS["lexiprecision-evia2023"].short == "Diaz, EVIA 2023"
    assert PAPERS["dwork2001rank"].short == "Dwork et al., WWW 2001"


def _paper_text(name: str) -> str:
    path = PAPER_TEXTS / name
    if not path.exists():
        pytest.skip(f"{path} is not here")
    return path.read_text(encoding="utf-8")


def test_fields_are_the_papers_own():
    """Titles, authors, venue and DOI as the papers print them (their first page, or
    their reference lists for the works they cite)."""
    rpp = _paper_text("rpp-sigir2022.md")
    lexirecall = _paper_text("lexirecall-recall-robustness.md")
    lexiprecision = _paper_text("lexiprecision-evia2023.md")
    paper = PAPERS["rpp-sigir2022"]
    assert rpp.lstrip().startswith(f"# {paper.title}\n")
    assert "Fernando Diaz and Andres Ferraro. 2022." in rpp
    assert f"<https://doi.org/{paper.doi}>" in rpp and "(SIGIR '22)" in rpp
    paper = PAPERS["lexiprecision-evia2023"]
    assert lexiprecision.lstrip().startswith(f"# {paper.title}\n")
    # the lexirecall preprint, as the lexiprecision paper cites it
    assert "Fernando Diaz and Bhaskar Mitra. 2023. Recall, Robustness, and Lexicographic " \
        "Evaluation. arXiv:2302.11370" in lexiprecision  # fmt: skip
    assert PAPERS["lexirecall-recall-robustness"].eprint == "2302.11370"
    assert lexirecall.lstrip().startswith("Recall as a Measure of Ranking Robustness")
    # the methods' works, as the papers' reference lists give them
    dwork = PAPERS["dwork2001rank"]
    assert f"{dwork.title}. In *Proceedings of the 10th International Conference on World " \
        "Wide Web (WWW '01)*. Association for Computing Machinery, New York, NY, USA, " \
        "613–622." in rpp  # fmt: skip
    for key, text in [
        ("carterette2012multiple", lexirecall),
        ("smucker2007comparison", lexirecall),
        ("sakai2014metrics", lexirecall),
    ]:
        paper = PAPERS[key]
        assert f"https://doi.org/{paper.doi}" in text, key
        assert paper.title.lower() in text.lower(), key
        assert f"{paper.pages.replace('--', '–')}" in text, key


def test_bibtex_reads_the_bibliography(tmp_path):
    if shutil.which("bibtex") is None or shutil.which("pdflatex") is None:
        pytest.skip("bibtex or pdflatex is not installed")
    (tmp_path / "refs.bib").write_text(bibliography(PAPERS), encoding="utf-8")
    (tmp_path / "doc.tex").write_text(
        "\\documentclass{article}\\begin{document}\\nocite{*}"
        "\\bibliographystyle{plain}\\bibliography{refs}\\end{document}\n"
    )

    def run(*command):
        return subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=120)

    assert run("pdflatex", "-interaction=nonstopmode", "doc.tex").returncode == 0
    proc = run("bibtex", "doc")
    assert proc.returncode == 0, proc.stdout
    log = (tmp_path / "doc.blg").read_text()
    assert "error" not in log.lower() and "Warning" not in log, log
    bbl = (tmp_path / "doc.bbl").read_text()
    assert sorted(re.findall(r"\\bibitem\{([^}]+)\}", bbl)) == sorted(PAPERS)


def test_measures_command_prints_the_bibtex_by_any_alias():
    result = invoke("measures", "rpp")
    assert result.exit_code == 0, result.stderr
    assert "  doi = {10.1145/3477495.3532033}\n" in result.stdout
    assert "@inproceedings{rpp-sigir2022,\n" in result.stdout
    for alias, key in [
        ("dgcRPP", "rpp-sigir2022"), ("ST-RPP", "rpp-sigir2022"),
        ("LR", "lexirecall-recall-robustness"), ("rrLP", "lexiprecision-evia2023"),
    ]:  # fmt: skip
        result = invoke("measures", alias)
        assert result.exit_code == 0, result.stderr
        assert result.stdout.endswith(PAPERS[key].bibtex)
        assert f"  paper: {PAPERS[key].reference}\n" in result.stdout


def test_measures_listing_adds_citation_and_doi_columns():
    result = invoke("measures", "-f", "csv")
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "measure,family,aliases,paper,equation,description,citation,doi"
    assert lines[1].endswith(",rpp-sigir2022,eq. 4-5,\"recall-paired preference, p(i) = "
                             "1/m (eq. 4-5)\",\"Diaz & Ferraro, SIGIR 2022\","
                             "10.1145/3477495.3532033")  # fmt: skip


def test_citation_cff_is_this_version():
    yaml = pytest.importorskip("yaml")
    cff = yaml.safe_load((ROOT / "CITATION.cff").read_text(encoding="utf-8"))
    assert cff["cff-version"] == "1.2.0"
    assert str(cff["version"]) == prefeval.__version__
    assert cff["title"] == "prefeval" and cff["license"] == "MIT"
    assert cff["message"] and cff["authors"] and cff["date-released"]
    cited_keys = {ref.get("doi") for ref in cff.get("references", [])}
    assert PAPERS["rpp-sigir2022"].doi in cited_keys


def test_readme_names_each_measures_paper_in_full():
    readme = " ".join((ROOT / "README.md").read_text(encoding="utf-8").split())
    for key in dict.fromkeys(m.paper for m in MEASURES.values()):
        assert f"- {PAPERS[key].reference}" in readme, key
