"""Generate a benchmark data set (see bench/datasets.py for the shapes).

Usage: python bench/generate.py SHAPE OUT_DIR [--scale S] [--seed N] [--gzip]

TREC-format shapes (robust, web, recsys, sample) are written by ``prefeval.synthetic``
(``--gzip`` writes gzipped runs); bench-only shapes (recsys-xl, Parquet) by their generator
in ``bench/datasets.py``.  Write large benchmark sets to a scratch folder (e.g.
bench/scratch/, git-ignored), never into the repository.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from datasets import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
