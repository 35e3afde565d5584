"""Every training hyperparameter in one dataclass, with the reference trainer's values
(model.md §4) as defaults — except `side_value`, a fix the reference lacks (measured in the
README) — and the reader of a run's settings from the pipeline YAML."""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, fields
from pathlib import Path

import yaml

from gcpipe.errors import UserError

LAYOUTS = ("5c", "5c-bias", "legacy")
ALGORITHMS = ("ppo", "expert")
SEARCH_VARIANTS = ("gumbel", "puct")
OPPONENTS = ("random", "greedy", "mcts")
MCTS_ROLLOUTS = ("random", "greedy")


@dataclass(frozen=True)
class TrainConfig:
    # Budget.  A step is one agent decision of one slot (model.md §4 "total_agents" counts
    # envs x slots), so a self-play epoch is num_envs * 2 * horizon steps.
    total_timesteps: int = 100_000_000
    num_envs: int = 2048            # parallel games; x2 slots = 4096 agents in self-play
    horizon: int = 64               # BPTT segment length
    minibatch_size: int = 8192      # steps (128 segments of 64)
    replay_ratio: float = 1.0       # trained steps replayed per epoch / trained steps collected
    # Optimiser: Muon with cosine-annealed learning rate, no weight decay.
    learning_rate: float = 0.015
    anneal_lr: bool = True          # cosine from learning_rate to 0 over the run
    muon_momentum: float = 0.95
    max_grad_norm: float = 1.5
    # Advantages: GAE generalised with V-trace clips; rewards clamped to [-1, 1].
    gamma: float = 0.98
    gae_lambda: float = 0.90
    vtrace_rho_clip: float = 1.0
    vtrace_c_clip: float = 1.0
    # PPO losses.
    clip_coef: float = 0.2
    vf_clip_coef: float = 0.2
    vf_coef: float = 2.0
    ent_coef: float = 0.0001        # low: the mask already enforces legality
    # Prioritised segment replay: P(segment) ~ (sum |advantage|)^alpha, importance weight
    # exponent annealed from beta0 toward 1.
    prio_alpha: float = 0.8
    prio_beta0: float = 0.2
    # Environment.
    selfplay: bool = True
    side: int = 0                   # slot 0's side: 0 random per game, 1 Guerrilla, 2 COIN
    opponent: str = "greedy"        # random | greedy | mcts: bot mode's opponent, self-play's bot
    mcts_iterations: int = 256
    mcts_exploration: float = 0.7
    mcts_rollout: str = "greedy"
    max_episode_length: int = 256
    # Self-play opponents: this fraction of envs plays a frozen snapshot from the pool; the
    # snapshots are spread over `frozen_banks` banks (logged as hist_*_bank_i).
    historical_fraction: float = 0.2
    pool_size: int = 100
    frozen_banks: int = 8
    # Self-play against the built-in bot: this fraction of envs has slot 1 played by `opponent`
    # (logged as bot_*); the current policy plays slot 1 of the rest.
    bot_fraction: float = 0.0
    train_slot_1: bool = False      # also learn from slot 1 where it is the current policy
    # Self-play value per side.  Both slots see the same observations (rules.md §5), so a single
    # value output cannot tell whether a row is the Guerrilla or the COIN of its game.  With
    # this set, COIN rows read their value from decoder row 255 (the pass logit, which never
    # decides an action: it is the waiting slot's only legal action and never legal for the
    # actor) and Guerrilla rows from the value row, so the checkpoint layout is unchanged.
    # Bot mode needs no such split (the agent sees only its own turns) and ignores it.
    side_value: bool = True
    # Algorithm.  "ppo": the reference trainer (model.md §4).  "expert": expert iteration
    # (gcpipe/train/expert.py): self-play moves chosen by a Gumbel search with the current network,
    # the policy trained toward the search's improved policy, both value rows (the value row for
    # the Guerrilla, the pass logit for the COIN: side_value's convention) toward the game's
    # +-1 outcome.  An epoch is one iteration; the run lasts expert_iterations.  bot_fraction of the
    # games are against `opponent` (with the mcts_* settings); the rollout, advantage and opponent-pool settings above
    # (total_timesteps, num_envs, horizon, gamma, ..., historical_fraction) are PPO's alone.
    algorithm: str = "ppo"
    expert_iterations: int = 100
    init_run: str = ""              # start from results/runs/INIT_RUN/final.bin (else a fresh init)
    search_simulations: int = 32    # expert: simulations per self-play move
    search_variant: str = "gumbel"
    search_considered: int = 16     # expert: root actions the Gumbel search considers
    search_rollouts: int = 0        # expert: greedy playouts per leaf, mixed into the leaf value with
    search_rollout_weight: float = 0.0  # this weight (bootstraps a fresh net, whose values mean nothing)
    selfplay_games: int = 512       # expert: complete games per iteration
    replay_games: int = 1024        # expert: the newest games each update trains on
    expert_epochs: int = 2          # expert: passes over the replay games per iteration
    expert_minibatch_rows: int = 64 # expert: rows of packed whole games per minibatch
    expert_policy_coef: float = 1.0 # expert: weight of the policy loss (0: train the values alone)
    expert_target_temperature: float = 1.0  # expert: policy target pi'^(1/T), renormalised (T < 1 sharpens)
    # Outputs.
    layout: str = "5c"              # checkpoint layout: 5c | 5c-bias | legacy (bias layouts train biases)
    checkpoint_interval: int = 20   # epochs between checkpoints, pool snapshots and resume states
    eval_interval: int = 0          # epochs between evaluations against greedy (0: never)
    eval_games: int = 200           # games per side in each evaluation
    seed: int = 42
    max_epochs: int = 0             # stop (without final.bin) after this many epochs; 0 = no limit

    @property
    def num_slots(self) -> int:
        return 2 if self.selfplay else 1

    @property
    def num_agents(self) -> int:
        return self.num_envs * self.num_slots

    @property
    def steps_per_epoch(self) -> int:
        return self.num_agents * self.horizon

    @property
    def bias(self) -> bool:
        """Whether the network has (and trains) encoder and decoder bias vectors."""
        return self.layout != "5c"

    @property
    def total_epochs(self) -> int:
        if self.algorithm == "expert":
            return self.expert_iterations
        return max(1, self.total_timesteps // self.steps_per_epoch)

    @property
    def num_historical_envs(self) -> int:
        return round(self.historical_fraction * self.num_envs) if self.selfplay else 0

    @property
    def num_bot_envs(self) -> int:
        return round(self.bot_fraction * self.num_envs) if self.selfplay else 0

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


_FIELDS = {f.name: f for f in fields(TrainConfig)}


def _check(name: str, value, where: str):
    """The value converted to the field's type, or UserError naming the key."""
    kind = _FIELDS[name].type
    bad = f"{where}: '{name}' must be"
    if kind in ("int", "float") and isinstance(value, str):
        # PyYAML reads 1e6 (no dot) as a string; take it as the number it spells.
        try:
            value = float(value)
        except ValueError:
            pass
    if kind == "bool":
        if not isinstance(value, bool):
            raise UserError(f"{bad} true or false, got {value!r}")
        return value
    if kind == "int":
        if isinstance(value, bool) or not isinstance(value, int):
            if isinstance(value, float) and value.is_integer():
                value = int(value)
            else:
                raise UserError(f"{bad} an integer, got {value!r}")
        return value
    if kind == "float":
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise UserError(f"{bad} a number, got {value!r}")
        return float(value)
    if not isinstance(value, str):
        raise UserError(f"{bad} a string, got {value!r}")
    return value


_POSITIVE = ("total_timesteps", "num_envs", "horizon", "minibatch_size", "replay_ratio", "learning_rate",
             "max_grad_norm", "gamma", "vtrace_rho_clip", "vtrace_c_clip", "mcts_iterations",
             "max_episode_length", "pool_size", "frozen_banks", "checkpoint_interval", "eval_games",
             "search_simulations", "search_considered", "selfplay_games", "replay_games", "expert_epochs",
             "expert_minibatch_rows", "expert_iterations", "expert_target_temperature")
_NON_NEGATIVE = ("clip_coef", "vf_clip_coef", "vf_coef", "ent_coef", "prio_alpha", "mcts_exploration",
                 "eval_interval", "seed", "max_epochs", "gae_lambda", "prio_beta0", "search_rollouts",
                 "expert_policy_coef")
_UNIT = ("muon_momentum", "gamma", "gae_lambda", "historical_fraction", "bot_fraction", "prio_beta0",
         "search_rollout_weight")
_CHOICES = {"layout": LAYOUTS, "opponent": OPPONENTS, "mcts_rollout": MCTS_ROLLOUTS, "algorithm": ALGORITHMS,
            "search_variant": SEARCH_VARIANTS}


def make_config(settings: dict, where: str = "run config") -> TrainConfig:
    """A TrainConfig from a mapping of overrides; UserError naming any unknown key or bad value."""
    if not isinstance(settings, dict):
        raise UserError(f"{where} must be a mapping of training settings, got {type(settings).__name__}")
    values = {}
    for name, value in settings.items():
        if name not in _FIELDS:
            raise UserError(f"{where}: unknown setting '{name}' (known: {', '.join(_FIELDS)})")
        values[name] = _check(name, value, where)
    config = TrainConfig(**values)
    for name in _POSITIVE:
        if getattr(config, name) <= 0:
            raise UserError(f"{where}: '{name}' must be positive, got {getattr(config, name)!r}")
    for name in _NON_NEGATIVE:
        if getattr(config, name) < 0:
            raise UserError(f"{where}: '{name}' must not be negative, got {getattr(config, name)!r}")
    for name in _UNIT:
        if not 0 <= getattr(config, name) <= 1:
            raise UserError(f"{where}: '{name}' must lie in [0, 1], got {getattr(config, name)!r}")
    for name, choices in _CHOICES.items():
        if getattr(config, name) not in choices:
            raise UserError(f"{where}: '{name}' must be one of {', '.join(choices)}, got {getattr(config, name)!r}")
    if config.side not in (0, 1, 2):
        raise UserError(f"{where}: 'side' must be 0 (random), 1 (Guerrilla) or 2 (COIN), got {config.side!r}")
    if config.seed >= 2**32:
        raise UserError(f"{where}: 'seed' must be below 2^32, got {config.seed}")
    if config.algorithm == "expert":
        from gcpipe.search.settings import INTEGER_RANGES

        for name, (low, high) in INTEGER_RANGES.items():
            if not low <= getattr(config, f"search_{name}") <= high:
                raise UserError(f"{where}: 'search_{name}' must be from {low} to {high}, got "
                                f"{getattr(config, f'search_{name}')}")
        if not config.selfplay:
            raise UserError(f"{where}: algorithm 'expert' plays self-play games; set selfplay true")
        if config.layout == "legacy":
            raise UserError(f"{where}: algorithm 'expert' trains both value rows, which layout legacy cannot "
                            f"hold; use layout 5c or 5c-bias")
        if config.search_rollout_weight > 0 and config.search_rollouts < 1:
            raise UserError(f"{where}: 'search_rollout_weight' {config.search_rollout_weight} needs "
                            f"'search_rollouts' >= 1")
        if config.replay_games < config.selfplay_games:
            raise UserError(f"{where}: 'replay_games' ({config.replay_games}) must be at least 'selfplay_games' "
                            f"({config.selfplay_games}): each update trains on the newest games")
        return config
    if config.minibatch_size % config.horizon:
        raise UserError(f"{where}: 'minibatch_size' ({config.minibatch_size}) must be a multiple of "
                        f"'horizon' ({config.horizon}): minibatches are whole segments")
    if config.bot_fraction > 0 and not config.selfplay:
        raise UserError(f"{where}: 'bot_fraction' applies to self-play only (bot mode plays the bot everywhere)")
    for name, envs in (("historical_fraction", config.num_historical_envs), ("bot_fraction", config.num_bot_envs)):
        fraction = getattr(config, name)
        if config.selfplay and fraction > 0 and envs == 0:
            raise UserError(f"{where}: '{name}' {fraction} of {config.num_envs} envs "
                            f"rounds to no env; raise num_envs or set the fraction to 0")
    if config.num_bot_envs + config.num_historical_envs > config.num_envs:
        raise UserError(f"{where}: 'bot_fraction' + 'historical_fraction' must not exceed 1, got "
                        f"{config.bot_fraction} + {config.historical_fraction}")
    if config.steps_per_epoch > config.total_timesteps:
        raise UserError(f"{where}: 'total_timesteps' ({config.total_timesteps}) is below one epoch "
                        f"({config.steps_per_epoch} steps = num_envs x slots x horizon)")
    return config


def load_run_config(path, run: str) -> TrainConfig:
    """The settings of `run` from the `runs:` mapping of the pipeline YAML at `path`."""
    path = Path(path)
    try:
        document = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as error:
        raise UserError(f"cannot read config {path}: {error.strerror or error}") from None
    except yaml.YAMLError as error:
        raise UserError(f"config {path} is not valid YAML: {str(error).splitlines()[0]}") from None
    runs = document.get("runs") if isinstance(document, dict) else None
    if not isinstance(runs, dict):
        raise UserError(f"config {path} has no 'runs:' mapping")
    if run not in runs:
        known = ", ".join(map(str, runs)) or "none"
        raise UserError(f"config {path} has no run '{run}' (runs: {known})")
    return make_config(runs[run] or {}, where=f"{path} runs.{run}")
