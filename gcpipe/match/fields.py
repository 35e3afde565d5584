"""The match commands: one cell (`gcpipe match`) and every cell of a field (`gcpipe tournament`;
`gcpipe compare` is compare.py).  Players are named by config name or short spec through a
PlayerBook."""
from __future__ import annotations

from dataclasses import dataclass, replace

from gcpipe import paths
from gcpipe.errors import check_int
from gcpipe.io import check_output_file
from gcpipe.match.ledger import GAME_INDEX_LIMIT
from gcpipe.match.runner import MatchResult, default_ledger_path, run_match
from gcpipe.players import Player, PlayerBook, check_own_rosters, check_roster


def match(guerrilla_spec: str, coin_spec: str, games: int, book: PlayerBook | None = None, first_game: int = 0,
          out=None, workers: int | None = None, roster_g: int | None = None, roster_c: int | None = None,
          progress: bool = True, replace_others: bool = False) -> MatchResult:
    """`gcpipe match`: the cell of two players.  Roster positions: roster_g/roster_c when given,
    else the players' own (see PlayerBook.field); replace_others as in run_match."""
    field = (book or PlayerBook()).field([guerrilla_spec, coin_spec])
    guerrilla, coin = field[0], field[-1]
    check_roster(roster_g, "--roster-g")
    check_roster(roster_c, "--roster-c")
    if roster_g is not None:
        guerrilla = replace(guerrilla, roster=roster_g)
    if roster_c is not None:
        coin = replace(coin, roster=roster_c)
    return run_match(guerrilla, coin, games, first_game, out, workers, progress, replace_others)


@dataclass(frozen=True)
class FieldResult:
    """Cells of a tournament, keyed (guerrilla name, coin name)."""
    players: list[Player]
    cells: dict


def tournament(specs, games: int, book: PlayerBook | None = None, out_dir=paths.MATCHES,
               workers: int | None = None, progress: bool = True) -> FieldResult:
    """`gcpipe tournament`: every player as Guerrilla against every player as COIN."""
    players = (book or PlayerBook()).field(specs)
    check_own_rosters({player.name: player.roster for player in players}, "with @N")
    return _play_field(players, games, out_dir, workers, progress)


def _play_field(players, games, out_dir, workers, progress) -> FieldResult:
    # Every cell's games and files checked before the first cell plays.
    check_int("--games", games, 1, GAME_INDEX_LIMIT)
    for guerrilla in players:
        for coin in players:
            check_output_file(default_ledger_path(guerrilla, coin, out_dir))
    cells = {}
    for guerrilla in players:
        for coin in players:
            cells[(guerrilla.name, coin.name)] = run_match(
                guerrilla, coin, games, out=default_ledger_path(guerrilla, coin, out_dir),
                workers=workers, progress=progress)
    return FieldResult(players=players, cells=cells)
