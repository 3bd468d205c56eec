"""compare on partitions of complete queries, in this process or on a Dask cluster.

:func:`compare_partition` is the kernel: a plain function from the rows of complete
queries (pandas DataFrames: judgments ``query_id, iteration, doc_id, relevance``, runs
``run, query_id, doc_id, score``) to the partition's per-query preferences and its
partial sums (:class:`~prefeval.engine.job.PartitionResult`).  :class:`DaskEngine`
runs it on Dask workers, one task per query partition of
:func:`prefeval.engine.local.query_ranges`:
the partitions are the local engine's, so the per-query rows come in the same order
and the summary, added block by block in query order, is the same bits.  Spark's
``mapInArrow`` could call the kernel just as well (see the README).
"""

from __future__ import annotations

from .cluster import DaskEngine
from .kernel import QRELS_COLUMNS, RUN_COLUMNS, compare_partition

__all__ = ["DaskEngine", "QRELS_COLUMNS", "RUN_COLUMNS", "compare_partition"]
