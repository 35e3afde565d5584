"""Games between two player runtimes, many at once, through the player protocol."""
from __future__ import annotations

import numpy as np

from gcpipe.engine import NO_SIDE, TOURNAMENT_PLY_CAP, GameBatch
from gcpipe.engine.bots import GameResults
from gcpipe.protocol import RuntimePlayer

DEFAULT_SLOTS = 256   # concurrent games: enough rows for batched networks, little memory


def play_games(guerrilla: RuntimePlayer, coin: RuntimePlayer, seeds, slots: int = DEFAULT_SLOTS,
               ply_cap: int = TOURNAMENT_PLY_CAP) -> GameResults:
    """Plays one game per generator seed from the start position (rules.md §8: no tick, no
    timeout; after `ply_cap` plies COIN wins), `slots` games at a time: a finished game's slot
    takes the next seed at once.  A game depends on its seed only, not on `slots` or on which
    games share a ply.  The Guerrilla's `play_whole_games`, where it has one, may play them all."""
    seeds = np.ascontiguousarray(seeds, dtype=np.uint32)
    whole = getattr(guerrilla, "play_whole_games", None)
    results = whole(coin, seeds, ply_cap) if whole is not None else None
    if results is not None:
        return results
    n = len(seeds)
    winners, plies, ends = np.zeros(n, np.int8), np.zeros(n, np.uint16), np.zeros(n, np.uint8)
    if n == 0:
        return GameResults(winners, plies, ends)
    slots = min(slots, n)
    games = GameBatch(slots)
    players = (guerrilla, coin)            # indexed by side: GUERRILLA 0, COIN 1
    for player in players:
        player.start(slots)
    slot_game = np.full(slots, -1, np.int64)
    next_game = 0

    def start_games(free_slots: np.ndarray) -> None:
        nonlocal next_game
        started = free_slots[:n - next_game]
        for slot in started:
            games.reset(slot, int(seeds[next_game]))
            slot_game[slot] = next_game
            next_game += 1
        if len(started):
            for player in players:
                player.new_games(started)

    start_games(np.arange(slots))
    while True:
        active = np.flatnonzero(slot_game >= 0)
        if not len(active):
            break
        to_move = games.to_move[active]
        actions = np.empty(len(active), np.int32)
        # The games of each side to move: its player chooses, the other observes the same position.
        for side, player in enumerate(players):
            movers = to_move == side
            if movers.any():
                actions[movers] = player.choose(games, active[movers])
                players[1 - side].observe(games, active[movers])
        games.apply(active, actions)
        games.declare_coin_win(active[games.plies[active] >= ply_cap], "ply_cap")   # running games only
        winner = games.winners[active]
        done = winner != NO_SIDE
        finished = active[done]
        if len(finished):
            index = slot_game[finished]
            winners[index] = winner[done]
            plies[index] = games.plies[finished]
            ends[index] = games.end_reasons[finished]
            slot_game[finished] = -1
            start_games(finished)
    return GameResults(winners, plies, ends)
