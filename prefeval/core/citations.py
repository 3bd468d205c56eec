"""The works prefeval implements or uses, one registry for the ``measures`` command, the
report's references and the README: per work its authors, title, venue, year, DOI where
it has one, and its BibTeX entry.

The keys are BibTeX keys; a preference measure names its paper by one of them
(:attr:`prefeval.measures.Measure.paper`).  Every field is taken from the paper itself
or from a citation of it in the papers the measures come from; a field none of them
gives is left out (the EVIA 2023 workshop paper has no DOI; Holm's 1979 article has
none).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Paper:
    """One work.  ``kind``: its BibTeX entry type; ``venue``: the journal or the
    proceedings in full, ``short_venue`` as a short citation names it; ``volume``,
    ``number``, ``pages``, ``series``, ``publisher``, ``doi``, ``eprint`` (an arXiv
    identifier) where known, else empty; ``note``: a remark printed with it."""

    key: str
    kind: str
    authors: tuple[str, ...]
    title: str
    venue: str
    short_venue: str
    year: int
    volume: str = ""
    number: str = ""
    pages: str = ""
    series: str = ""
    publisher: str = ""
    doi: str = ""
    eprint: str = ""
    note: str = ""

    @property
    def surnames(self) -> list[str]:
        return [author.split()[-1] for author in self.authors]

    @property
    def short(self) -> str:
        """A short citation: ``Diaz & Ferraro, SIGIR 2022``, ``Dwork et al., WWW 2001``."""
        names = self.surnames
        if len(names) > 2:
            who = f"{names[0]} et al."
        else:
            who = " & ".join(names)
        return f"{who}, {self.short_venue} {self.year}"

    @property
    def text(self) -> str:
        """The full reference without its identifier: authors, year, title, venue
        (volume, number, pages)."""
        if len(self.authors) > 1:
            who = ", ".join(self.authors[:-1]) + " and " + self.authors[-1]
        else:
            who = self.authors[0]
        where = self.venue
        if self.kind == "article":
            if self.volume:
                where += f" {self.volume}"
                if self.number:
                    where += f"({self.number})"
            if self.pages:
                where += f", {self.pages.replace('--', '–')}"
        else:
            if self.series and self.volume:
                where += f", {self.series} {self.volume}"
            if self.pages:
                where += f", pages {self.pages.replace('--', '–')}"
        where = ("In " if self.kind != "article" else "") + where
        return f"{who}. {self.year}. {self.title}. {where}."

    @property
    def identifier(self) -> str:
        """``doi:...``, else ``arXiv:...``, else empty."""
        if self.doi:
            return f"doi:{self.doi}"
        return f"arXiv:{self.eprint}" if self.eprint else ""

    @property
    def reference(self) -> str:
        """The full reference, one line: :attr:`text`, then :attr:`identifier`."""
        return f"{self.text} {self.identifier}" if self.identifier else self.text

    @property
    def bibtex(self) -> str:
        """Its BibTeX entry (title in double braces, so that a style keeps its case)."""
        venue_field = {"article": "journal", "misc": "howpublished"}.get(self.kind, "booktitle")
        fields = [
            ("author", " and ".join(self.authors)),
            ("title", "{" + self.title + "}"),
            (venue_field, self.venue),
            ("series", self.series),
            ("volume", self.volume),
            ("number", self.number),
            ("pages", self.pages),
            ("publisher", self.publisher),
            ("year", str(self.year)),
            ("doi", self.doi),
            ("eprint", self.eprint),
            ("archiveprefix", "arXiv" if self.eprint else ""),
            ("note", self.note),
        ]
        body = ",\n".join(f"  {name} = {{{value}}}" for name, value in fields if value)
        return f"@{self.kind}{{{self.key},\n{body}\n}}\n"


_ACM = "ACM"
_SPRINGER = "Springer"

#: every work, measures' papers first, then the methods prefeval applies
PAPERS: dict[str, Paper] = {
    p.key: p
    for p in [
        Paper(
            "rpp-sigir2022",
            "inproceedings",
            ("Fernando Diaz", "Andres Ferraro"),
            "Offline Retrieval Evaluation Without Evaluation Metrics",
            "Proceedings of the 45th International ACM SIGIR Conference on Research and "
            "Development in Information Retrieval (SIGIR '22)",
            "SIGIR",
            2022,
            publisher=_ACM,
            doi="10.1145/3477495.3532033",
        ),
        Paper(
            "lexirecall-recall-robustness",
            "article",
            ("Fernando Diaz", "Michael D. Ekstrand", "Bhaskar Mitra"),
            "Recall, Robustness, and Lexicographic Evaluation",
            "ACM Transactions on Recommender Systems",
            "ACM TORS",
            2025,
            volume="4",
            number="1",
            doi="10.1145/3728373",
            eprint="2302.11370",
            note="Preprint: Fernando Diaz and Bhaskar Mitra, 2023, arXiv:2302.11370, "
            "first titled Recall as a Measure of Ranking Robustness",
        ),
        Paper(
            "lexiprecision-evia2023",
            "inproceedings",
            ("Fernando Diaz",),
            "Best-Case Retrieval Evaluation: Improving the Sensitivity of Reciprocal Rank "
            "with Lexicographic Precision",
            "Proceedings of the 10th International Workshop on Evaluating Information "
            "Access (EVIA 2023), co-located with the 17th NTCIR Conference",
            "EVIA",
            2023,
            eprint="2306.07908",
        ),
        Paper(
            "dwork2001rank",
            "inproceedings",
            ("Cynthia Dwork", "Ravi Kumar", "Moni Naor", "D. Sivakumar"),
            "Rank Aggregation Methods for the Web",
            "Proceedings of the 10th International Conference on World Wide Web (WWW '01)",
            "WWW",
            2001,
            pages="613--622",
            publisher=_ACM,
            doi="10.1145/371920.372165",
        ),
        Paper(
            "kendall1938new",
            "article",
            ("Maurice G. Kendall",),
            "A New Measure of Rank Correlation",
            "Biometrika",
            "Biometrika",
            1938,
            volume="30",
            number="1-2",
            pages="81--93",
            doi="10.1093/biomet/30.1-2.81",
        ),
        Paper(
            "sakai2014metrics",
            "incollection",
            ("Tetsuya Sakai",),
            "Metrics, Statistics, Tests",
            "Bridging Between Information Retrieval and Databases: PROMISE Winter School "
            "2013, Revised Tutorial Lectures",
            "LNCS",
            2014,
            series="Lecture Notes in Computer Science",
            pages="116--163",
            publisher=_SPRINGER,
            doi="10.1007/978-3-642-54798-0_6",
        ),
        Paper(
            "carterette2012multiple",
            "article",
            ("Benjamin A. Carterette",),
            "Multiple Testing in Statistical Analysis of Systems-Based Information "
            "Retrieval Experiments",
            "ACM Transactions on Information Systems",
            "ACM TOIS",
            2012,
            volume="30",
            number="1",
            pages="4:1--4:34",
            doi="10.1145/2094072.2094076",
        ),
        Paper(
            "smucker2007comparison",
            "inproceedings",
            ("Mark D. Smucker", "James Allan", "Ben Carterette"),
            "A Comparison of Statistical Significance Tests for Information Retrieval Evaluation",
            "Proceedings of the Sixteenth ACM Conference on Information and Knowledge "
            "Management (CIKM '07)",
            "CIKM",
            2007,
            pages="623--632",
            publisher=_ACM,
            doi="10.1145/1321440.1321528",
        ),
        Paper(
            "holm1979simple",
            "article",
            ("Sture Holm",),
            "A Simple Sequentially Rejective Multiple Test Procedure",
            "Scandinavian Journal of Statistics",
            "Scand. J. Statist.",
            1979,
            volume="6",
            pages="65--70",
        ),
        Paper(
            "benjamini1995controlling",
            "article",
            ("Yoav Benjamini", "Yosef Hochberg"),
            "Controlling the False Discovery Rate: A Practical and Powerful Approach to "
            "Multiple Testing",
            "Journal of the Royal Statistical Society: Series B (Methodological)",
            "J. R. Stat. Soc. B",
            1995,
            volume="57",
            number="1",
            pages="289--300",
            doi="10.1111/j.2517-6161.1995.tb02031.x",
        ),
        Paper(
            "benjamini2001control",
            "article",
            ("Yoav Benjamini", "Daniel Yekutieli"),
            "The Control of the False Discovery Rate in Multiple Testing under Dependency",
            "The Annals of Statistics",
            "Ann. Statist.",
            2001,
            volume="29",
            number="4",
            pages="1165--1188",
            doi="10.1214/aos/1013699998",
        ),
        Paper(
            "macavaney2022streamlining",
            "inproceedings",
            ("Sean MacAvaney", "Craig Macdonald", "Iadh Ounis"),
            "Streamlining Evaluation with ir-measures",
            "Advances in Information Retrieval: 44th European Conference on IR Research "
            "(ECIR 2022)",
            "ECIR",
            2022,
            volume="13186",
            series="Lecture Notes in Computer Science",
            pages="305--310",
            publisher=_SPRINGER,
            doi="10.1007/978-3-030-99739-7_38",
        ),
    ]
}

#: the work behind each method a report may apply: the MC4 ordering, Kendall's tau,
#: discriminative power, the baselines (ir-measures), the tests and the corrections
#: (Bonferroni's, the sign test and the t-test are textbook methods, cited by none)
METHOD_PAPERS: dict[str, str] = {
    "mc4": "dwork2001rank",
    "tau": "kendall1938new",
    "discpower": "sakai2014metrics",
    "baselines": "macavaney2022streamlining",
    "hsd": "carterette2012multiple",
    "randomization": "smucker2007comparison",
    "holm": "holm1979simple",
    "bh": "benjamini1995controlling",
    "by": "benjamini2001control",
}


def bibliography(keys) -> str:
    """The BibTeX entries of ``keys`` (each once, in :data:`PAPERS` order; keys not in
    it are skipped), separated by blank lines."""
    wanted = set(keys)
    return "\n".join(p.bibtex for key, p in PAPERS.items() if key in wanted)


def cited(keys) -> list[Paper]:
    """The papers of ``keys`` (each once, in :data:`PAPERS` order; others skipped)."""
    wanted = set(keys)
    return [p for key, p in PAPERS.items() if key in wanted]
