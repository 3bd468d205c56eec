# the compiled pass over a TREC run file's text (_textpass.c); see prefeval.io.textpass

class Relevant:
    def __init__(self, query_ids: list[bytes], offsets: list[int], docnos: list[bytes]) -> None: ...

def positions(
    data: bytes, relevant: Relevant, max_docs: int, /
) -> tuple[bytes, bytes, bytes] | None: ...
def ranking(
    data: bytes, queries: Relevant, max_docs: int, /
) -> tuple[bytes, bytes, bytes, bytes] | None: ...
