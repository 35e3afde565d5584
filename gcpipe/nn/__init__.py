"""The MinGRU policy (torch), the checkpoint layouts and batched network players.

Modules: `model` (MinGRUPolicy), `checkpoint` (read, write, detect, convert .bin files), `player`
(NetworkPlayer, NetworkBot), `bench` (`gcpipe bench net`).  Nothing is imported here, so that
importing gcpipe.nn.checkpoint's siblings stays explicit and torch loads only when used."""
