"""How closely a distilled network (the student) plays as its teachers do, side by side.

    python benchmarks/distill_kl.py STUDENT.bin --guerrilla-teacher G.bin --coin-teacher C.bin --games 400

Plays --games fresh games of the teachers against each other (each side by its own teacher, its
moves drawn from its policy, as in distillation's teacher games; seeds from --seed, which no
training uses) and prints, per side, the mean KL divergence KL(teacher || student) per ply in nats
and the share of plies where the student's most probable move is the teacher's.  The student with
the smaller divergence on a side plays that side more like its teacher: the measure behind the
distillation measurements of docs/experiments.md, cheaper than a strength cell (seconds, no search)."""
import argparse
import sys

import numpy as np
import torch

from gcpipe.engine import COIN, GUERRILLA, NO_SIDE
from gcpipe.errors import UserError, run_script
from gcpipe.nn.checkpoint import load
from gcpipe.nn.inference import net_arrays
from gcpipe.nn.select import mask_logits
from gcpipe.players import define
from gcpipe.train.distill import TeacherExpert
from gcpipe.train.expert import game_seed, pack_rows, play_games, stack_rows
from gcpipe.train.sequence import forward_segments


def teacher_games(guerrilla_teacher, coin_teacher, games: int, seed: int):
    """`games` games of the two teachers (Checkpoints) against each other."""
    expert = TeacherExpert(tuple((net_arrays(t.model), t.full_turn, None) for t in (guerrilla_teacher, coin_teacher)))
    seeds = np.array([game_seed(seed, 0, j) for j in range(games)], np.uint32)
    unused = define("opponent", {"kind": "random"})     # no bot plays: every game is the teachers'
    return play_games(expert, seeds, np.full(games, NO_SIDE, np.int64), (unused, unused))


@torch.inference_mode()
def divergence_by_side(student, records) -> dict[int, tuple[float, float, int]]:
    """side -> (mean KL per ply in nats, share of plies with the teacher's top move, plies)."""
    rows = pack_rows(records, np.arange(len(records)))
    batch = stack_rows(records, rows)
    # stack_rows lays the games' plies out row by row in packing order, marked by `valid`.
    movers = np.full(batch["valid"].shape, NO_SIDE, np.int64)
    movers[batch["valid"].numpy()] = np.concatenate([records[g].movers for row in rows for g in row])
    state = torch.zeros(student.layers, len(rows), student.hidden)
    logits = forward_segments(student, batch["obs"], state, batch["starts"])[0]
    log_probs = torch.log_softmax(mask_logits(logits, batch["masks"]), dim=-1)
    targets = batch["targets"]
    kl = torch.where(targets > 0, targets * (targets.clamp_min(1e-30).log() - log_probs), 0.0).sum(-1)
    same_top = log_probs.argmax(-1) == targets.argmax(-1)
    out = {}
    for side in (GUERRILLA, COIN):
        plies = torch.from_numpy(movers == side) & batch["searched"]
        out[side] = (kl[plies].mean().item(), same_top[plies].float().mean().item(), int(plies.sum()))
    return out


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("student")
    parser.add_argument("--guerrilla-teacher", required=True)
    parser.add_argument("--coin-teacher", required=True)
    parser.add_argument("--games", type=int, default=400)
    parser.add_argument("--seed", type=int, default=9001)
    args = parser.parse_args(argv)
    if args.games < 1:
        raise UserError(f"--games must be at least 1, got {args.games}")
    student = load(args.student)
    if not student.full_turn:
        raise UserError(f"{args.student}: a legacy network; a student is standard 5c")
    records = teacher_games(load(args.guerrilla_teacher), load(args.coin_teacher), args.games, args.seed)
    for side, (kl, same, plies) in divergence_by_side(student.model, records).items():
        name = "Guerrilla" if side == GUERRILLA else "COIN"
        kl = max(kl, 0.0)   # a student equal to the teacher gives float rounding's -1e-9, not -0.0000
        print(f"{name}: KL {kl:.4f} nats per ply, teacher's top move {100 * same:.1f} % of {plies} plies")
    return 0


if __name__ == "__main__":
    sys.exit(run_script(main, sys.argv[1:], "distill_kl"))
