"""The keyword lane: BM25 over SQLite FTS5 in the store's own database.

Only chunks of published versions are ranked, and the scope (knowledge bases, and for a folder
scope the documents under it) is applied inside the query, so top-k fills with in-scope hits.
"""

from __future__ import annotations

import re
from typing import Sequence

from sqlalchemy import bindparam, text
from sqlalchemy.orm import Session

from rag.retrieve.types import LaneHit, Scope

# A short English stop list: these words only make the OR query slower and noisier.
STOPWORDS = frozenset(
    """a about above after again all also am an and any are as at be been before being below between both but by
    can could did do does doing down during each few for from further had has have having he her here hers him his
    how i if in into is it its itself just me more most my no nor not now of off on once only or other our ours out
    over own same she should so some such than that the their theirs them then there these they this those through
    to too under until up very was we were what when where which while who whom why will with would you your yours
    yourself""".split()
)
_WORD = re.compile(r"\w+", re.UNICODE)


def query_terms(query: str, max_terms: int = 32) -> list[str]:
    """Distinct lower-case terms of the query, stop words removed, in order of first appearance."""
    seen: dict[str, None] = {}
    for word in _WORD.findall(query.lower()):
        if word not in STOPWORDS and word not in seen:
            seen[word] = None
    return list(seen)[:max_terms]


def match_expression(terms: Sequence[str]) -> str:
    # Each term is quoted, so no query text is ever read as FTS5 syntax.
    return " OR ".join('"' + t.replace('"', '""') + '"' for t in terms)


class SqliteKeywordLane:
    name = "text"

    def add(self, session: Session, rows: Sequence[tuple[int, str]]) -> None:
        if rows:
            session.execute(
                text("INSERT INTO chunk_fts (rowid, text) VALUES (:id, :text)"),
                [{"id": chunk_id, "text": body} for chunk_id, body in rows],
            )

    def delete(self, session: Session, chunk_ids: Sequence[int]) -> None:
        ids = list(chunk_ids)
        for i in range(0, len(ids), 500):
            session.execute(
                text("DELETE FROM chunk_fts WHERE rowid IN :ids").bindparams(bindparam("ids", expanding=True)),
                {"ids": ids[i:i + 500]},
            )

    def search(self, session: Session, query: str, scope: Scope, k: int) -> list[LaneHit]:
        terms = query_terms(query)
        if not terms or not scope.kb_ids:
            return []
        params: dict[str, object] = {"match": match_expression(terms), "kbs": list(scope.kb_ids), "k": k}
        scope_sql = "c.kb_id IN :kbs"
        binds = [bindparam("kbs", expanding=True)]
        if scope.node_ids is not None:
            if not scope.node_ids:
                return []
            scope_sql += " AND c.node_id IN :nodes"
            params["nodes"] = list(scope.node_ids)
            binds.append(bindparam("nodes", expanding=True))
        sql = text(
            f"""
            SELECT f.rowid AS id, bm25(chunk_fts) AS rank
            FROM chunk_fts AS f
            JOIN chunks AS c ON c.id = f.rowid
            JOIN document_versions AS v ON v.id = c.version_id
            WHERE chunk_fts MATCH :match AND v.status = 'published' AND {scope_sql}
            ORDER BY rank
            LIMIT :k
            """
        ).bindparams(*binds)
        # bm25() is lower-is-better; the lane reports higher-is-better.
        return [LaneHit(int(row.id), -float(row.rank)) for row in session.execute(sql, params)]
