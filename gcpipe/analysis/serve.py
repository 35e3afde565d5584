"""`gcpipe serve`: a person plays any player on the review page's board in a browser, served on
localhost by the standard library's http.server.  Every finished game is appended to a ledger,
as a match writes it (one cell: the person and the opponent at roster positions, seeds by the
formula of rules.md §8), with its summary beside it.

The page asks the server for the position (GET /state), sends the person's moves (POST /move
{"move": "d4-d5"}) and starts the next game (POST /new); the server plays the opponent's moves
through the player protocol (gcpipe.players) on a one-game batch, as gcpipe.play does.
"""
from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np

from gcpipe.analysis.review import BOARD_JS, BOARD_STYLE, board_names
from gcpipe.engine import SIDE_NAMES, TOURNAMENT_PLY_CAP, GameBatch, action_to_string
from gcpipe.errors import UserError
from gcpipe.fingerprint import engine_fingerprint, other_engine
from gcpipe.match.ledger import LedgerWriter, cell_name, game_seed, write_summary
from gcpipe.play import legal_move_hint, read_move
from gcpipe.players import PlayerBook
from gcpipe.players.definition import check_name
from gcpipe.schema import ROSTER_POSITIONS

_SLOT = np.zeros(1, np.int32)
HUMAN_ROSTER = ROSTER_POSITIONS - 1      # the person's roster position in the seed formula


class Table:
    """One person against one player, a game at a time; finished games go to `ledger`."""

    def __init__(self, side: str, opponent_spec: str, ledger, name: str = "human", book: PlayerBook | None = None):
        if side not in SIDE_NAMES:
            raise UserError(f"side must be 'guerrilla' or 'coin', got '{side}'")
        check_name(name, where="--name")
        self.human = SIDE_NAMES.index(side)
        self.opponent = (book or PlayerBook()).field([opponent_spec])[0]
        if self.opponent.name == name:
            raise UserError(f"the opponent is also named {name!r}; give the person another --name")
        if self.opponent.roster == HUMAN_ROSTER:
            raise UserError(f"roster position {HUMAN_ROSTER} is the person's; give the opponent another (@N)")
        names = [name, self.opponent.name] if self.human == 0 else [self.opponent.name, name]
        identities = [{"kind": "human", "name": name}, self.opponent.identity]
        self.ids = identities if self.human == 0 else identities[::-1]
        self.names, self.cell = names, cell_name(*names)
        self.rosters = [HUMAN_ROSTER, self.opponent.roster][::1 if self.human == 0 else -1]
        self._runtime = self.opponent.runtime()
        self.ledger = Path(ledger)
        self._writer = LedgerWriter(self.ledger).__enter__()
        if self._writer.records and self._writer.records[0]["cell"] != self.cell:
            cell = self._writer.records[0]["cell"]
            self._writer.close()
            raise UserError(f"{self.ledger} holds games of {cell}, not {self.cell}; give another --ledger")
        other = self._writer.records and other_engine(self._writer.records[0]["engine"])
        if other:
            self._writer.close()
            raise UserError(f"{self.ledger} holds games of {other}; give another --ledger")
        self._lock = threading.Lock()
        self.games = GameBatch(1)
        self.new_game()

    def close(self) -> None:
        self._writer.close()

    def new_game(self) -> dict:
        """Starts the next game (the next free game index) and plays the opponent's opening moves."""
        self.index = max(self._writer.done_games, default=-1) + 1
        self.seed = game_seed(*self.rosters, self.index)
        self.games.reset(0, self.seed)
        self._runtime.start(1)
        self._runtime.new_games(_SLOT)
        self.plies: list[dict] = []
        self.recorded = False
        self._opponent_moves()
        return self.state()

    def move(self, text) -> dict:
        """The person's move (the notation of gcpipe play), then the opponent's replies."""
        game = self.games.game(0)
        if game.is_terminal():
            raise UserError("the game is over; start a new one")
        if game.current_player() != self.human:
            raise UserError("it is not your turn")
        if not isinstance(text, str):
            raise UserError("a move is text like d4-d5 or D3-C4")
        action = read_move(game, text)
        self._apply(action)
        self._opponent_moves()
        return self.state()

    def _opponent_moves(self) -> None:
        while not self.games.game(0).is_terminal() and self.games.game(0).current_player() != self.human:
            self._apply(int(self._runtime.choose(self.games, _SLOT)[0]))
        if not self.games.game(0).is_terminal():
            self._runtime.observe(self.games, _SLOT)
        self._record_if_over()

    def _apply(self, action: int) -> None:
        game = self.games.game(0)
        side = game.current_player()
        stones, coins = set(game.stones()), set(game.coins())
        self.games.apply(_SLOT, [action])
        self.games.declare_coin_win(_SLOT[self.games.plies[_SLOT] >= TOURNAMENT_PLY_CAP], "ply_cap")
        after = self.games.game(0)
        entry = {"side": SIDE_NAMES[side], "move": action_to_string(action, side), "placed": [], "step": None}
        if side == 0:
            entry["placed"] = sorted(set(after.stones()) - stones)
            entry["captured"] = sorted(coins - set(after.coins()))
        else:
            source, direction = divmod(action, 4)
            entry["step"] = [source, source + (-9, -7, 7, 9)[direction]]
            entry["captured"] = sorted(stones - set(after.stones()))
        self.plies.append(entry)

    def _record_if_over(self) -> None:
        game = self.games.game(0)
        if not game.is_terminal() or self.recorded:
            return
        self._writer.append({"cell": self.cell, "guerrilla": self.names[0], "coin": self.names[1],
                             "game": self.index, "seed": self.seed, "winner": SIDE_NAMES[game.winner],
                             "plies": game.plies, "end": game.end_reason, "guerrilla_id": self.ids[0],
                             "coin_id": self.ids[1], "engine": engine_fingerprint()})
        write_summary(self.ledger, records=self._writer.records)
        self.recorded = True

    def state(self) -> dict:
        game = self.games.game(0)
        last = self.plies[-1] if self.plies else {"side": None, "move": None, "placed": [], "step": None,
                                                   "captured": []}
        yours = not game.is_terminal() and game.current_player() == self.human
        return {"cell": self.cell, "game": self.index, "seed": self.seed, "you": SIDE_NAMES[self.human],
                "opponent": self.opponent.name, "ply": game.plies, "stones": game.stones(), "coins": game.coins(),
                "to_move": None if game.is_terminal() else SIDE_NAMES[game.current_player()],
                "winner": SIDE_NAMES[game.winner] if game.is_terminal() else None,
                "end": game.end_reason if game.is_terminal() else None, "last": last,
                "moves": [p["move"] for p in self.plies],
                "legal": [game.action_to_string(a) for a in game.legal_actions()] if yours else [],
                "hint": legal_move_hint(game) if yours else "", "recorded": self.recorded,
                "ledger": str(self.ledger), "games_recorded": len(self._writer.records)}

    def handle(self, method: str, path: str, body: bytes) -> tuple[int, str, bytes]:
        """(status, content type, body) of one request."""
        if method == "GET" and path == "/":
            return 200, "text/html; charset=utf-8", page_html().encode()
        if method == "GET" and path == "/state":
            with self._lock:
                return _json(200, self.state())
        if method == "POST" and path in ("/move", "/new"):
            try:
                query = json.loads(body or b"{}")
                if not isinstance(query, dict):
                    raise UserError("send a JSON object")
                with self._lock:
                    return _json(200, self.move(query.get("move")) if path == "/move" else self.new_game())
            except ValueError:
                return _json(400, {"error": "the request is not JSON"})
            except UserError as problem:
                return _json(400, {"error": str(problem)})
        return _json(404, {"error": f"no {method} {path}"})


def _json(status: int, data: dict) -> tuple[int, str, bytes]:
    return status, "application/json", json.dumps(data).encode()


def make_server(table: Table, host: str = "127.0.0.1", port: int = 8000) -> ThreadingHTTPServer:
    """An HTTP server of `table` (not started; port 0 picks a free one)."""
    class Handler(BaseHTTPRequestHandler):
        def _answer(self, method: str) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            status, kind, body = table.handle(method, self.path.split("?")[0], self.rfile.read(length))
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Cache-Control", "no-store")
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self):
            self._answer("GET")

        def do_POST(self):
            self._answer("POST")

        def log_message(self, *args):
            pass

    try:
        return ThreadingHTTPServer((host, port), Handler)
    except OSError as error:
        raise UserError(f"cannot listen on {host}:{port}: {error.strerror}") from None


def serve(side: str, opponent: str, ledger, host: str = "127.0.0.1", port: int = 8000, name: str = "human",
          book: PlayerBook | None = None, announce=print) -> None:
    """`gcpipe serve`: serves until interrupted."""
    table = Table(side, opponent, ledger, name, book)
    try:
        server = make_server(table, host, port)
        announce(f"Playing {table.opponent.name} as {side} at http://{host}:{server.server_address[1]}/ "
                 f"(games go to {ledger}); Ctrl-C stops")
        with server:
            server.serve_forever()
    finally:
        table.close()


def page_html() -> str:
    names = json.dumps(board_names(), separators=(",", ":"))
    return _PAGE.replace("%STYLE%", BOARD_STYLE).replace("%BOARD%", BOARD_JS).replace("%NAMES%", names)


_PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>gcpipe serve</title>
<style>%STYLE%
#legal button{margin:2px;font-family:monospace}
#error{color:#b00;min-height:18px}
</style></head><body>
<h1 id="title">Guerrilla Checkers</h1><div class="sub" id="status"></div>
<div id="main"><div id="left">
<svg id="board" width="360" height="360" viewBox="-20 -20 340 340" role="img" aria-label="board"></svg>
<div id="movetext"></div></div>
<div id="right">
<form id="form"><input id="moveinput" size="10" autocomplete="off" placeholder="d4-d5"> <button>Play</button>
<button type="button" id="new">New game</button></form>
<div id="error"></div><div><b>Your legal moves</b> (click one)</div><div id="legal"></div>
<div style="margin-top:8px"><b>Moves</b> <span id="moves"></span></div>
</div></div>
<script>
(function(){
"use strict";
var N=%NAMES%;
%BOARD%
function txt(id,s){document.getElementById(id).textContent=s;}
function show(s){
 drawBoard({stones:s.stones,coins:s.coins,placed:s.last.placed,step:s.last.step,captured:s.last.captured,
 side:s.last.side},s.ply);
 var st="You play "+s.you+" against "+s.opponent+", game "+s.game+" (seed "+s.seed+"). ";
 st+=s.winner?(s.winner===s.you?"You won":s.opponent+" won")+" ("+s.end.replace(/_/g,
 " ")+") after "+s.ply+" plies; recorded in "+s.ledger+".":(s.to_move===s.you?"Your move.":"Waiting.");
 txt("status",st);txt("moves",s.moves.join(" "));
 txt("movetext",s.last.move?(s.last.side==="guerrilla"?"Guerrilla ":"COIN ")+"played "+s.last.move:"Start position");
 var l=document.getElementById("legal");while(l.firstChild)l.removeChild(l.firstChild);
 s.legal.forEach(function(m){var b=document.createElement("button");b.textContent=m;b.className="legal";
  b.addEventListener("click",function(){send("/move",{move:m});});l.appendChild(b);});
 window.lastState=s;}
function send(path,body){txt("error","");
 return fetch(path,{method:body?"POST":"GET",body:body?JSON.stringify(body):undefined}).then(function(r){
 return r.json();})
 .then(function(s){if(s.error)txt("error",s.error);else show(s);});}
document.getElementById("form").addEventListener("submit",function(e){e.preventDefault();
 var i=document.getElementById("moveinput");send("/move",{move:i.value});i.value="";});
document.getElementById("new").addEventListener("click",function(){send("/new",{});});
send("/state");
})();
</script></body></html>
"""
