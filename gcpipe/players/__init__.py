"""Players: bots, networks — every kind — defined once and driven through one batched protocol.

Definition.  A player is a named entry of the pipeline config's `players:` (`{kind: mcts,
iterations: 2000, roster: 3}`) or a short spec on the command line (`random`, `greedy`,
`mcts:2000:0.7:random`, `net:path/to/file.bin`, `search:path/to/file.bin:200`, optionally
`NAME=SPEC` and `SPEC@ROSTER`).  Either
becomes a `Player` (definition.py): name, kind, settings checked against the kind's settings
schema with its defaults filled in, the identity the ledger records, and the roster position of
rules.md §8.  Everything that can be wrong with a player — a bad setting, a missing or
malformed checkpoint, a SHA-256 mismatch — is found when it is defined, before any game.

Runtime.  `player.runtime()` builds the object that plays, in the process that plays (each match
worker builds its own).  The match runner, `gcpipe play` and training evaluation drive every
kind only through this protocol, over the slots of a GameBatch (slot i holds game i; `slots` is
an int array):

    start(n_slots)          per-slot state for n_slots concurrent games
    new_games(slots)        new games start in these slots (a network zeroes their recurrent state)
    observe(games, slots)   in these slots the OTHER side is about to move: a full-turn (standard
                            5c) network steps on the position, output discarded (rules.md §9);
                            bots and actor-only networks do nothing.  It reads the position
                            only (no draw from the game's generator), so the observe and choose
                            calls of one ply may come in any order
    choose(games, slots)    this player is to move in these slots: one action per slot (int32).
                            It may draw from each game's own generator (rules.md §8) but leaves
                            the positions alone; the caller applies the moves (GameBatch.apply).

`play_games(guerrilla, coin, seeds)` (games.py) is the loop that plays games through it.  One
capability is optional: a Guerrilla runtime's `play_whole_games(coin, seeds, ply_cap)` may play
the games itself and return their results, or return None; the engine bots play each other
wholly in C this way.

Kinds: random, greedy, mcts (bots.py), net (network.py), search (gcpipe/search/player.py) and
openspiel (openspiel.py: OpenSpiel's algorithms, with the `openspiel` extra).
Adding a kind: one subclass of `gcpipe.protocol.RuntimePlayer` — its `kind` name, the JSON Schema
of its settings (`schema`, checked for config entries and short specs alike), the short-spec
fields, `define` (check the settings against the world; say what the ledger records), `build`
(the runtime from those settings) and the protocol methods — plus its entry in `KINDS`
(definition.py).  The config schema's `players:` section is assembled from KINDS.  The base class
sits in gcpipe/protocol.py, right above the engine, so a kind can live beside the machinery it
plays with.
"""
from gcpipe.protocol import RuntimePlayer
from gcpipe.players.definition import (CHECKPOINT_KINDS, KINDS, Player, PlayerBook, check_own_rosters, check_roster,
                                       define, from_identity, parse_spec, player_schema, roster_positions)
from gcpipe.players.games import play_games

__all__ = ["CHECKPOINT_KINDS", "KINDS", "Player", "PlayerBook", "RuntimePlayer", "check_own_rosters", "check_roster",
           "define", "from_identity", "parse_spec", "play_games", "player_schema", "roster_positions"]
