"""The review page of a game: one self-contained HTML file (no server, no external URL) in which a
reader steps through a ledger game with buttons or the arrow keys.  It shows the board (stones,
coins, the last move, captures), a curve of a network's two value rows at every ply, the mover's
top moves with the net's probabilities at the current ply (and, for a search, its visits), and
the turning points: the plies where the net's expected outcome moved most.

The numbers come from gcpipe.analysis.position (the analysis `gcpipe analyse` gives), rounded to
four decimals; the board from the game's replay (gcpipe.match.replay).  Pages are written
atomically; the text depends on the ledger, the players and the analyst only.
"""
from __future__ import annotations

import json
from pathlib import Path

from gcpipe.analysis.position import Analyst
from gcpipe.engine import SIDE_NAMES, Game
from gcpipe.engine.game import action_to_string, point_name, square_name
from gcpipe.errors import UserError
from gcpipe.io import atomic_write_text
from gcpipe.match.replay import Replay, plies_of
from gcpipe.match.viewer import SIDE_LABELS, chosen_games, describe_player, draw_views
from gcpipe.players import PlayerBook

TOP_MOVES = 5          # moves listed per ply
TURNING_POINTS = 5     # plies listed as turning points
DIGITS = 4


def view_and_review(ledger, out_dir, games=None, analyst: str | None = None, book: PlayerBook | None = None
                    ) -> list[Path]:
    """`gcpipe view --html`: the SVG pictures of gcpipe.match.viewer and the review page of each of
    the same games (game-N.html, or guerrilla_win.html and coin_win.html), each game replayed once.
    Every page is made before any file is written; returns the files written."""
    analyst_player = Analyst((book or PlayerBook()).resolve(analyst)) if analyst else None
    chosen = chosen_games(ledger, games)
    pages = {}
    for stem, record, replay, notes in chosen:
        if record is None:
            pages[f"{stem}.html"] = page_html({"title": notes[0], "plies": [], "notes": [], "turning": []})
        else:
            pages[f"{stem}.html"] = page_html(review_data(record, replay, analyst_player, notes))
    files = draw_views(chosen, out_dir)
    out_dir = Path(out_dir)
    for name, text in pages.items():
        atomic_write_text(out_dir / name, text)
    return [path for pair in zip(files, [out_dir / name for name in pages]) for path in pair]


def review_data(record: dict, replay: Replay, analyst: Analyst | None, notes=()) -> dict:
    """The page's data: one entry per position (the start and after each ply)."""
    game = Game(replay.seed)
    positions = [{"to_move": SIDE_NAMES[game.current_player()], "stones": game.stones(), "coins": game.coins(),
                  "move": None, "side": None, "placed": [], "step": None, "captured": []}]
    for ply in plies_of(replay.seed, replay.actions):
        positions.append({"to_move": None if ply.to_move is None else SIDE_NAMES[ply.to_move],
                          "stones": list(ply.stones), "coins": list(ply.coins), "side": SIDE_NAMES[ply.side],
                          "move": action_to_string(ply.action, ply.side), "placed": list(ply.placed),
                          "step": list(ply.step) if ply.step else None, "captured": list(ply.captured)})
    analysis = analyst.walk(replay.seed, replay.actions, range(replay.plies + 1)) if analyst else {}
    for index, position in enumerate(positions):
        found = analysis.get(index)
        if index == len(positions) - 1:
            position["to_move"] = None      # the game is over (a ply cap ends it from outside the rules)
        position["played"] = positions[index + 1]["move"] if index + 1 < len(positions) else None
        if found and found["value"] is not None:
            position["value"] = [round(found["value"]["guerrilla"], DIGITS), round(found["value"]["coin"], DIGITS)]
            position["outcome"] = round(found["outcome"], DIGITS)
        if found and not found["terminal"]:
            position["top"] = [[m["move"], round(m["prior"], DIGITS), m.get("visits")]
                               for m in found["moves"][:TOP_MOVES]]
            position["choice"] = found["choice"]
    header = (f"{record['cell']}, game {record['game']} (seed {record['seed']}): {SIDE_LABELS[record['winner']]} "
              f"won ({record['end'].replace('_', ' ')}) after {record['plies']} plies")
    players = (f"Guerrilla {record['guerrilla']} ({describe_player(record['guerrilla_id'])}) vs COIN "
               f"{record['coin']} ({describe_player(record['coin_id'])})")
    data = {"title": header, "players": players, "notes": list(notes), "plies": positions,
            "analyst": None, "search": False}
    if analyst is not None:
        data["analyst"] = f"{analyst.player.name} ({describe_player(analyst.player.identity)})"
        data["search"] = analyst.player.kind == "search"
        if not analyst.has_value:
            data["notes"].append(f"{analyst.player.name} has no value head (a legacy file): no value curve.")
    data["turning"] = turning_points(positions)
    return data


def turning_points(positions: list[dict], count: int = TURNING_POINTS) -> list[dict]:
    """The plies whose move changed the net's expected outcome (Guerrilla's view) most, largest
    swing first (the earlier ply on a tie)."""
    swings = []
    for ply in range(1, len(positions)):
        before, after = positions[ply - 1].get("outcome"), positions[ply].get("outcome")
        if before is not None and after is not None:
            swings.append({"ply": ply, "move": positions[ply]["move"], "side": positions[ply]["side"],
                           "before": before, "after": after, "swing": round(abs(after - before), DIGITS)})
    swings.sort(key=lambda s: (-s["swing"], s["ply"]))
    return swings[:count]


def board_names() -> dict:
    """The notation names of points and squares, for the page's labels (one source: the engine)."""
    return {"points": [point_name(g) for g in range(49)], "squares": [square_name(c) for c in range(64)]}


def page_html(data: dict) -> str:
    """The page: the data as JSON inside a script element, the drawing code and styles inline."""
    payload = json.dumps({**data, **board_names()}, separators=(",", ":"), allow_nan=False)
    payload = payload.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    title = data["title"].replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return (_PAGE.replace("%STYLE%", BOARD_STYLE).replace("%BOARD%", BOARD_JS).replace("%TITLE%", title)
            .replace("%DATA%", payload))


# The page's styles and its board (the review page's and gcpipe serve's): `drawBoard(p, ply)` draws
# a position {stones, coins, placed, step, captured, side} into the <svg id="board">.
BOARD_STYLE = """body{font-family:sans-serif;font-size:14px;margin:12px;color:#222;background:#fff}
h1{font-size:16px;margin:0 0 4px}
.sub{color:#555;margin:2px 0}
#main{display:flex;flex-wrap:wrap;gap:16px;margin-top:8px}
#left{width:360px}
#right{flex:1;min-width:340px;max-width:640px}
#controls{margin:8px 0;display:flex;gap:4px;align-items:center}
button{font-size:14px;padding:3px 9px;cursor:pointer}
#plylabel{margin-left:8px;font-weight:bold}
#movetext{margin:4px 0;min-height:18px}
table{border-collapse:collapse;margin-top:4px}
td,th{padding:2px 8px;text-align:left;border-bottom:1px solid #ddd}
td.num{text-align:right;font-variant-numeric:tabular-nums}
tr.played td{background:#fde8e8}
#turning button{display:block;margin:3px 0;text-align:left;width:100%}
.legend span{display:inline-block;width:18px;height:3px;vertical-align:middle;margin:0 4px 0 10px}
#values{margin:4px 0;font-variant-numeric:tabular-nums}
"""
BOARD_JS = r"""var S=36, NS="http://www.w3.org/2000/svg";
function el(name,attrs,parent){var e=document.createElementNS(NS,name);for(var k in attrs)e.setAttribute(k,attrs[k]);
 if(parent)parent.appendChild(e);return e;}
function sq(c){return [(c%8)*S+S/2,Math.floor(c/8)*S+S/2];}
function pt(g){return [(g%7+1)*S,(Math.floor(g/7)+1)*S];}
var board=document.getElementById("board");
var base=el("g",{id:"squares"},board);
for(var y=0;y<8;y++)for(var x=0;x<8;x++)el("rect",{x:x*S,y:y*S,width:S,height:S,fill:(x+y)%2?"#c8b48a":"#f3ecd9"},base);
el("rect",{x:0,y:0,width:8*S,height:8*S,fill:"none",stroke:"#555"},base);
for(var i=0;i<8;i++){var t=el("text",{x:i*S+S/2,y:-6,"text-anchor":"middle","font-size":11},base);
 t.textContent="ABCDEFGH"[i];
 t=el("text",{x:-8,y:i*S+S/2+4,"text-anchor":"middle","font-size":11},base);t.textContent=String(i+1);}
for(i=0;i<7;i++){t=el("text",{x:(i+1)*S,y:8*S+14,"text-anchor":"middle","font-size":10,fill:"#666"},base);
 t.textContent="abcdefg"[i];
 t=el("text",{x:8*S+10,y:(i+1)*S+4,"text-anchor":"middle","font-size":10,fill:"#666"},base);t.textContent=String(i+1);}
var pieces=el("g",{id:"pieces"},board);
var defs=el("defs",{},board);var mk=el("marker",{id:"arrowhead",viewBox:"0 0 6 6",refX:5,refY:3,markerWidth:4,
 markerHeight:4,orient:"auto"},defs);
el("path",{d:"M0 0L6 3L0 6z",fill:"#1f77b4"},mk);
function cross(x,y,g){el("path",{"class":"captured",
 d:"M"+(x-7)+" "+(y-7)+"L"+(x+7)+" "+(y+7)+"M"+(x-7)+" "+(y+7)+"L"+(x+7)+" "+(y-7),stroke:"#d62728","stroke-width":3},
 g);}
function drawBoard(p,ply){
 while(pieces.firstChild)pieces.removeChild(pieces.firstChild);
 p.coins.forEach(function(c){var a=sq(c);el("circle",{"class":"coin",cx:a[0],cy:a[1],r:12,fill:"#f2c14e",
 stroke:"#7a5c00","stroke-width":2},pieces);});
 p.stones.forEach(function(g){var a=pt(g);el("circle",{"class":"stone",cx:a[0],cy:a[1],r:8,fill:"#222"},pieces);});
 p.placed.forEach(function(g){var a=pt(g);el("circle",{"class":"placed",cx:a[0],cy:a[1],r:11,fill:"none",
 stroke:"#d62728","stroke-width":3},pieces);});
 if(p.step){var a=sq(p.step[0]),b=sq(p.step[1]);el("line",{"class":"step",x1:a[0],y1:a[1],x2:b[0],y2:b[1],
 stroke:"#1f77b4","stroke-width":3,"marker-end":"url(#arrowhead)"},pieces);}
 p.captured.forEach(function(k){var a=p.side==="guerrilla"?sq(k):pt(k);cross(a[0],a[1],pieces);});
 board.setAttribute("data-ply",String(ply));
 board.setAttribute("data-stones",p.stones.join(","));board.setAttribute("data-coins",p.coins.join(","));
}
"""

_PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>%TITLE%</title>
<style>
%STYLE%</style></head>
<body>
<h1 id="title"></h1><div class="sub" id="players"></div><div class="sub" id="analyst"></div>
 <div class="sub" id="notes"></div>
<div id="main">
<div id="left">
<svg id="board" width="360" height="360" viewBox="-20 -20 340 340" role="img" aria-label="board"></svg>
<div id="controls"><button id="first" title="Start (Home)">&#x7C;&#x25C0;</button>
 <button id="prev" title="Back (Left)">&#x25C0;</button>
<button id="next" title="Forward (Right)">&#x25B6;</button><button id="last" title="End (End)">&#x25B6;&#x7C;</button>
<span id="plylabel"></span></div>
<div id="movetext"></div>
</div>
<div id="right">
<div id="valuepanel"><b>Value per ply</b><span class="legend"><span style="background:#222"></span>Guerrilla row
<span style="background:#c99a06"></span>COIN row</span>
<svg id="curve" width="600" height="180" viewBox="0 0 600 180"></svg>
<div id="values"></div></div>
<div><b id="toptitle">Top moves</b><table id="topmoves"></table></div>
<div style="margin-top:10px"><b>Turning points</b> (largest swings of the expected outcome)<div id="turning"></div>
 </div>
</div></div>
<script type="application/json" id="data">%DATA%</script>
<script>
(function(){
"use strict";
var D=JSON.parse(document.getElementById("data").textContent);
var n=D.plies.length, cur=0;
// The vertical scale fits the largest value row (an untrained net's rows may leave [-1, 1]).
var vmax=D.plies.reduce(function(m,p){return p.value?Math.max(m,Math.abs(p.value[0]),Math.abs(p.value[1])):m;},1);
var CW=600, CH=180, PAD=24, Y0=CH/2, YS=(CH/2-12)/vmax;
%BOARD%
function txt(id,s){document.getElementById(id).textContent=s;}
function fmt(v){return (v>=0?"+":"")+v.toFixed(3);}
txt("title",D.title);txt("players",D.players||"");
txt("analyst",D.analyst?"Analysis: "+D.analyst:(n?"No network chosen: no analysis (gcpipe view --analyst SPEC).":""));
txt("notes",(D.notes||[]).join(" "));
var curve=document.getElementById("curve"), hasValue=D.plies.some(function(p){return p.value;});
curve.setAttribute("data-y-zero",String(Y0));curve.setAttribute("data-y-unit",String(YS));
function xOf(k){return PAD+(n>1?k*(CW-2*PAD)/(n-1):0);}
function yOf(v){return Y0-v*YS;}
var cursor=null;
if(!hasValue){document.getElementById("valuepanel").style.display="none";}
else{
 el("line",{x1:PAD,y1:Y0,x2:CW-PAD,y2:Y0,stroke:"#aaa"},curve);
 [1,-1].forEach(function(v){el("line",{x1:PAD,y1:yOf(v),x2:CW-PAD,y2:yOf(v),stroke:"#eee"},curve);
  var t=el("text",{x:2,y:yOf(v)+4,"font-size":10,fill:"#666"},curve);t.textContent=v>0?"+1":"-1";});
 ["guerrilla","coin"].forEach(function(side,j){var pts=[];D.plies.forEach(function(p,k){
 if(p.value)pts.push(xOf(k).toFixed(2)+","+yOf(p.value[j]).toFixed(2));});
  el("polyline",{id:"curve-"+side,points:pts.join(" "),fill:"none",stroke:j?"#c99a06":"#222","stroke-width":1.5},
 curve);});
 D.turning.forEach(function(t){el("circle",{cx:xOf(t.ply),cy:yOf(D.plies[t.ply].value[0]),r:3.5,fill:"#d62728"},
 curve);});
 cursor=el("line",{id:"cursor",y1:4,y2:CH-4,stroke:"#1f77b4","stroke-width":1.5},curve);
 curve.addEventListener("click",function(ev){var r=curve.getBoundingClientRect();var x=(ev.clientX-r.left)*CW/r.width;
  go(Math.round((x-PAD)*(n-1)/(CW-2*PAD)));});
}
var tt=document.getElementById("turning");
if(!D.turning||!D.turning.length){tt.textContent=hasValue?"none":"(needs a network with a value head)";}
(D.turning||[]).forEach(function(t){var b=document.createElement("button");b.className="turn";
 b.setAttribute("data-ply",String(t.ply));
 b.textContent="Ply "+t.ply+": "+(t.side==="guerrilla"?"Guerrilla ":"COIN ")+t.move+
  "  outcome "+fmt(t.before)+" \\u2192 "+fmt(t.after);
 b.addEventListener("click",function(){go(t.ply);});tt.appendChild(b);});
function drawTop(p){var tb=document.getElementById("topmoves");while(tb.firstChild)tb.removeChild(tb.firstChild);
 if(!p.top){txt("toptitle",D.analyst?"Top moves (none: the game is over)":"Top moves (no analysis)");return;}
 txt("toptitle","Top moves of "+(p.to_move==="guerrilla"?"the Guerrilla":"COIN")+" here");
 var h=document.createElement("tr");["move","probability"].concat(D.search?["visits"]:[]).forEach(function(s){
 var th=document.createElement("th");th.textContent=s;h.appendChild(th);});tb.appendChild(h);
 p.top.forEach(function(m){var tr=document.createElement("tr");if(m[0]===p.played)tr.className="played";
  var a=document.createElement("td");a.textContent=m[0];tr.appendChild(a);
  var b=document.createElement("td");b.className="num";b.textContent=(100*m[1]).toFixed(1)+"%";tr.appendChild(b);
  if(D.search){var c=document.createElement("td");c.className="num";c.textContent=String(m[2]);tr.appendChild(c);}
  tb.appendChild(tr);});}
function go(k){if(!n)return;cur=Math.max(0,Math.min(n-1,k));var p=D.plies[cur];drawBoard(p,cur);
 txt("plylabel","Ply "+cur+" / "+(n-1));
 var m=cur?(p.side==="guerrilla"?"Guerrilla ":"COIN ")+"played "+p.move+
  (p.captured.length?", capturing "+p.captured.length:""):"Start position";
 m+=p.to_move?"; "+(p.to_move==="guerrilla"?"Guerrilla":"COIN")+" to move"+
  (p.played?" (played "+p.played+")":""):"; game over";
 txt("movetext",m);
 txt("values",p.value?"Guerrilla row "+fmt(p.value[0])+", COIN row "+fmt(p.value[1])+
  ", expected outcome (Guerrilla) "+fmt(p.outcome):"");
 if(cursor){cursor.setAttribute("x1",xOf(cur));cursor.setAttribute("x2",xOf(cur));}
 drawTop(p);}
document.getElementById("first").addEventListener("click",function(){go(0);});
document.getElementById("prev").addEventListener("click",function(){go(cur-1);});
document.getElementById("next").addEventListener("click",function(){go(cur+1);});
document.getElementById("last").addEventListener("click",function(){go(n-1);});
document.addEventListener("keydown",function(e){var k={ArrowLeft:cur-1,ArrowRight:cur+1,Home:0,End:n-1}[e.key];
 if(k!==undefined){e.preventDefault();go(k);}});
if(!n)document.getElementById("main").style.display="none";
go(0);
window.review={go:go,ply:function(){return cur;}};
})();
</script>
</body></html>
"""
