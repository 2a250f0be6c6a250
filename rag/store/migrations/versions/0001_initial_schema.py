"""initial schema

Revision ID: 0001
Revises: 
Create Date: 2026-11-29 19:09:04.499322
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op


revision = '0001'
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('activity',
    sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
    sa.Column('workspace_id', sa.String(length=64), nullable=False),
    sa.Column('actor', sa.String(length=200), nullable=False),
    sa.Column('action', sa.String(length=100), nullable=False),
    sa.Column('target', sa.String(length=1000), nullable=True),
    sa.Column('outcome', sa.String(length=32), nullable=False),
    sa.Column('detail', sa.JSON(), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('id')
    )
    with op.batch_alter_table('activity', schema=None) as batch_op:
        batch_op.create_index('ix_activity_ws_time', ['workspace_id', 'created_at'], unique=False)

    op.create_table('workspaces',
    sa.Column('id', sa.String(length=64), nullable=False),
    sa.Column('name', sa.String(length=200), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('id')
    )
    op.create_table('knowledge_bases',
    sa.Column('id', sa.String(length=40), nullable=False),
    sa.Column('workspace_id', sa.String(length=64), nullable=False),
    sa.Column('name', sa.String(length=200), nullable=False),
    sa.Column('name_key', sa.String(length=200), nullable=False),
    sa.Column('root_id', sa.String(length=40), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['workspace_id'], ['workspaces.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('workspace_id', 'name_key', name='uq_kb_name')
    )
    with op.batch_alter_table('knowledge_bases', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_knowledge_bases_workspace_id'), ['workspace_id'], unique=False)

    op.create_table('nodes',
    sa.Column('id', sa.String(length=40), nullable=False),
    sa.Column('workspace_id', sa.String(length=64), nullable=False),
    sa.Column('kb_id', sa.String(length=40), nullable=False),
    sa.Column('parent_id', sa.String(length=40), nullable=True),
    sa.Column('kind', sa.String(length=16), nullable=False),
    sa.Column('name', sa.String(length=500), nullable=False),
    sa.Column('name_key', sa.String(length=500), nullable=False),
    sa.Column('summary', sa.Text(), nullable=True),
    sa.Column('metadata', sa.JSON(), nullable=True),
    sa.Column('source_id', sa.String(length=1000), nullable=True),
    sa.Column('source_label', sa.String(length=1000), nullable=True),
    sa.Column('origin', sa.String(length=16), nullable=False),
    sa.Column('ingest_root', sa.String(length=2000), nullable=True),
    sa.Column('ingest_hash', sa.String(length=64), nullable=True),
    sa.Column('citation_count', sa.Integer(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('updated_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['kb_id'], ['knowledge_bases.id'], ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['parent_id'], ['nodes.id'], ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['workspace_id'], ['workspaces.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('parent_id', 'name_key', name='uq_sibling_name'),
    sa.UniqueConstraint('source_id')
    )
    with op.batch_alter_table('nodes', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_nodes_ingest_root'), ['ingest_root'], unique=False)
        batch_op.create_index('ix_nodes_kb_kind', ['kb_id', 'kind'], unique=False)
        batch_op.create_index(batch_op.f('ix_nodes_parent_id'), ['parent_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_nodes_workspace_id'), ['workspace_id'], unique=False)

    op.create_table('document_versions',
    sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
    sa.Column('node_id', sa.String(length=40), nullable=False),
    sa.Column('number', sa.Integer(), nullable=False),
    sa.Column('status', sa.String(length=16), nullable=False),
    sa.Column('body', sa.Text(), nullable=False),
    sa.Column('content_hash', sa.String(length=64), nullable=False),
    sa.Column('origin', sa.String(length=16), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('updated_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('published_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('archived_at', sa.DateTime(timezone=True), nullable=True),
    sa.ForeignKeyConstraint(['node_id'], ['nodes.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('node_id', 'number', name='uq_version_number')
    )
    with op.batch_alter_table('document_versions', schema=None) as batch_op:
        batch_op.create_index('ix_versions_status', ['status'], unique=False)

    op.create_table('chunks',
    sa.Column('id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), autoincrement=True, nullable=False),
    sa.Column('version_id', sa.Integer(), nullable=False),
    sa.Column('node_id', sa.String(length=40), nullable=False),
    sa.Column('kb_id', sa.String(length=40), nullable=False),
    sa.Column('ordinal', sa.Integer(), nullable=False),
    sa.Column('text', sa.Text(), nullable=False),
    sa.Column('heading_path', sa.JSON(), nullable=False),
    sa.Column('char_start', sa.Integer(), nullable=False),
    sa.Column('char_end', sa.Integer(), nullable=False),
    sa.ForeignKeyConstraint(['node_id'], ['nodes.id'], ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['version_id'], ['document_versions.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id')
    )
    with op.batch_alter_table('chunks', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_chunks_kb_id'), ['kb_id'], unique=False)
        batch_op.create_index('ix_chunks_node', ['node_id'], unique=False)
        batch_op.create_index('ix_chunks_version', ['version_id'], unique=False)

    # ### end Alembic commands ###
    _create_keyword_index()


def downgrade() -> None:
    op.execute("DROP TABLE IF EXISTS chunk_fts" if op.get_bind().dialect.name == "sqlite" else "DROP TABLE IF EXISTS chunk_tsv")
    with op.batch_alter_table('chunks', schema=None) as batch_op:
        batch_op.drop_index('ix_chunks_version')
        batch_op.drop_index('ix_chunks_node')
        batch_op.drop_index(batch_op.f('ix_chunks_kb_id'))

    op.drop_table('chunks')
    with op.batch_alter_table('document_versions', schema=None) as batch_op:
        batch_op.drop_index('ix_versions_status')

    op.drop_table('document_versions')
    with op.batch_alter_table('nodes', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_nodes_workspace_id'))
        batch_op.drop_index(batch_op.f('ix_nodes_parent_id'))
        batch_op.drop_index('ix_nodes_kb_kind')
        batch_op.drop_index(batch_op.f('ix_nodes_ingest_root'))

    op.drop_table('nodes')
    with op.batch_alter_table('knowledge_bases', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_knowledge_bases_workspace_id'))

    op.drop_table('knowledge_bases')
    op.drop_table('workspaces')
    with op.batch_alter_table('activity', schema=None) as batch_op:
        batch_op.drop_index('ix_activity_ws_time')

    op.drop_table('activity')
    # ### end Alembic commands ###


def _create_keyword_index() -> None:
    """The keyword lane's index: FTS5 on SQLite (Porter stemming), a GIN-indexed tsvector on PostgreSQL."""
    dialect = op.get_bind().dialect.name
    if dialect == "sqlite":
        op.execute(
            "CREATE VIRTUAL TABLE chunk_fts USING fts5(text, tokenize = 'porter unicode61 remove_diacritics 2')"
        )
    elif dialect == "postgresql":
        op.execute(
            "CREATE TABLE chunk_tsv (chunk_id BIGINT PRIMARY KEY REFERENCES chunks(id) ON DELETE CASCADE, "
            "tsv tsvector NOT NULL)"
        )
        op.execute("CREATE INDEX ix_chunk_tsv ON chunk_tsv USING GIN (tsv)")
