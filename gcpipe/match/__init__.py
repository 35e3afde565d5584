"""Matches between players: player definitions, the resumable multi-process match runner, the
per-game ledger (one JSON line per game, summaries derived from it) and paired comparisons."""
from gcpipe.match.compare import CompareResult, compare, format_compare
from gcpipe.match.players import Player, PlayerBook, parse_spec
from gcpipe.match.runner import (FieldResult, MatchResult, format_crosstable, format_match, game_seed, match,
                                 run_match, tournament)

__all__ = ["CompareResult", "FieldResult", "MatchResult", "Player", "PlayerBook", "compare", "format_compare",
           "format_crosstable", "format_match", "game_seed", "match", "parse_spec", "run_match", "tournament"]
