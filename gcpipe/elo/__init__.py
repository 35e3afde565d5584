"""Side-specific Bradley–Terry Elo: cross tables, the fit with confidence intervals, outputs."""
from gcpipe.elo.crosstable import (CrossTable, crosstable_from_ledgers, parse_crosstable_markdown,
                                   read_crosstable)
from gcpipe.elo.fit import Anchor, EloRatings, fit_elo
from gcpipe.elo.report import OUTPUT_FILES, elo_table, ratings_table_markdown, write_elo_outputs

__all__ = ["Anchor", "CrossTable", "EloRatings", "OUTPUT_FILES", "crosstable_from_ledgers",
           "elo_table", "fit_elo", "parse_crosstable_markdown", "ratings_table_markdown",
           "read_crosstable", "write_elo_outputs"]
