"""Layer 3: formats in (TREC text, Parquet, in-memory frames) and out (tables, writers).
Builds core objects from columns, never the reverse."""
