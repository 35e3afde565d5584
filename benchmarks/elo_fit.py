"""Time the side-specific Bradley–Terry fit on a full N×N field (default 10 players, 100 games
per cell) and the whole `gcpipe elo` output stage. Usage: python benchmarks/elo_fit.py [N]"""
import sys
import tempfile
import time

import numpy as np

from gcpipe.elo import CrossTable, fit_elo, write_elo_outputs


def main(players: int = 10, games: int = 100, repeats: int = 50) -> None:
    rng = np.random.default_rng(0)
    guerrilla, coin = rng.normal(0, 2, size=(2, players))
    cells = []
    for g in range(players):
        for c in range(players):
            wins = int(rng.binomial(games, 1 / (1 + np.exp(coin[c] - guerrilla[g]))))
            cells.append((f"p{g}", f"p{c}", wins, games - wins))
    table = CrossTable.from_cells(cells)
    fit_elo(table)  # warm up imports and caches
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        ratings = fit_elo(table)
        times.append(time.perf_counter() - start)
    with tempfile.TemporaryDirectory() as folder:
        start = time.perf_counter()
        write_elo_outputs(ratings, table, folder)
        outputs = time.perf_counter() - start
    print(f"{players}x{players} field ({2 * players} entities, {players * players} cells): "
          f"fit median {1000 * np.median(times):.2f} ms, max {1000 * max(times):.2f} ms; "
          f"writing all outputs incl. PNGs {1000 * outputs:.0f} ms")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 10)
