"""Matches between players: the resumable multi-process runner of a cell (runner.py, its worker
pool in pool.py), the commands over fields of players (fields.py), paired comparisons with
SPRT (compare.py), the per-game ledger (ledger.py: one JSON line per game, summaries derived
from it), and replays of ledger games (replay.py, drawn by viewer.py)."""
from gcpipe.match.compare import CompareResult, compare
from gcpipe.match.fields import FieldResult, match, tournament
from gcpipe.match.ledger import game_seed
from gcpipe.match.runner import MatchResult, run_match

__all__ = ["CompareResult", "FieldResult", "MatchResult", "compare", "game_seed", "match", "run_match", "tournament"]
