"""What a network or a search thinks of a position, and games to step through in a browser.

Modules: `position` (the analysis of positions: `gcpipe analyse`, one query or a JSON-lines
stream), `review` (the self-contained HTML page of a game, its data from `position`) and `serve`
(the same board served on localhost: a person plays any player, the game goes to a ledger)."""
