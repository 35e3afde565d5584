"""The game both review-page test files read: a net-vs-greedy ledger, its longest game and that
game's review page by the same net (`gcpipe view --analyst`)."""
import torch
from typer.testing import CliRunner

from gcpipe.cli import app
from gcpipe.match import match
from gcpipe.match.ledger import read_ledger
from gcpipe.nn.checkpoint import save
from gcpipe.nn.model import MinGRUPolicy


def reviewed_game(folder, pages) -> dict:
    """Plays the ledger into `folder` and writes the page into `pages`: ledger, record, page, net."""
    save(MinGRUPolicy(128, 2, bias=False, generator=torch.Generator().manual_seed(1)), folder / "alpha.bin", "5c")
    net = f"net:{folder / 'alpha.bin'}"
    ledger = match(net, "greedy", 4, out=folder / "alpha__greedy.jsonl", workers=1, progress=False).ledger
    record = max(read_ledger(ledger), key=lambda r: r["plies"])
    result = CliRunner().invoke(app, ["view", str(ledger), "--out", str(pages), "--game", str(record["game"]),
                                      "--analyst", net])
    assert result.exit_code == 0, result.output
    page = pages / f"game-{record['game']}.html"
    assert result.output.splitlines() == [str(pages / f"game-{record['game']}.svg"), str(page)]
    return {"ledger": ledger, "record": record, "page": page, "net": net}
