"""The MinGRU policy (torch), the checkpoint layouts and batched network inference.

Modules: `model` (MinGRUPolicy), `checkpoint` (read, write, detect, convert .bin files), `player`
(NetworkPlayer: recurrent state per game slot, forward over slots; the `net` player kind of
gcpipe.players plays it), `bench` (`gcpipe bench net`).  Nothing is imported here, so that
importing gcpipe.nn.checkpoint's siblings stays explicit and torch loads only when used."""
