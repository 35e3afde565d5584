"""Network-guided tree search (csrc/gc_search.h): its settings, the batched C searcher, the search
player of matches and `gcpipe play`, the value calibration of checkpoints and `gcpipe bench search`.

Modules: `settings` (SearchSettings: what a search does, checked before any game), `searcher`
(Searcher: one C workspace searching many games at once), `player` (SearchPlayer: the `search`
player kind, the player protocol over a GameBatch), `calibration` (fit and store how a file's
value outputs map to win probabilities), `bench`.  (`gcpipe values`, which measures values on
the expert trainer's self-play, is gcpipe.train.values.)"""
