"""Generate a synthetic TREC-format collection (thin wrapper around prefeval.synthetic).

Usage: python bench/generate.py SHAPE OUT_DIR [--scale S] [--seed N] [--gzip]

Write large benchmark sets to a scratch folder (e.g. bench/scratch/, git-ignored), never
into the repository.
"""

import sys
from pathlib import Path

try:
    from prefeval.synthetic import main
except ImportError:  # prefeval not installed: use the checkout this script lives in
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from prefeval.synthetic import main

if __name__ == "__main__":
    sys.exit(main())
