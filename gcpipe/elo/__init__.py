"""Side-specific Bradley–Terry Elo: cross tables, the fit with confidence intervals, rating
differences and superiority, an Ordo-style one-rating-per-player summary, outputs."""
from gcpipe.elo.crosstable import (CrossTable, crosstable_from_ledgers, parse_crosstable_markdown,
                                   read_crosstable)
from gcpipe.elo.fit import Anchor, EloRatings, fit_elo
from gcpipe.elo.ordo import ORDO_FILES, PlayerRatings, fit_players
from gcpipe.elo.report import OUTPUT_FILES, elo_table, ratings_table_markdown, write_elo_outputs

__all__ = ["Anchor", "CrossTable", "EloRatings", "ORDO_FILES", "OUTPUT_FILES", "PlayerRatings",
           "crosstable_from_ledgers", "elo_table", "fit_elo", "fit_players", "parse_crosstable_markdown",
           "ratings_table_markdown", "read_crosstable", "write_elo_outputs"]
