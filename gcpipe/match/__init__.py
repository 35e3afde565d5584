"""Matches between players: player definitions, the resumable multi-process match runner and the
per-game ledger (one JSON line per game, summaries derived from it)."""
from gcpipe.match.players import Player, PlayerBook, parse_spec
from gcpipe.match.runner import (FieldResult, MatchResult, compare, format_compare, format_crosstable,
                                 format_match, game_seed, match, run_match, tournament)

__all__ = ["FieldResult", "MatchResult", "Player", "PlayerBook", "compare", "format_compare", "format_crosstable",
           "format_match", "game_seed", "match", "parse_spec", "run_match", "tournament"]
