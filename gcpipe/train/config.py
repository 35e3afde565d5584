"""Every training hyperparameter in one dataclass.  Their types, ranges, defaults and meanings are the
`run` settings of config/schema.yaml (the defaults are the reference trainer's values, model.md §4, except
`side_value`, a fix the reference lacks, measured: docs/experiments.md); `make_config` reads a run's
settings through that schema and adds the rules that span several settings."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from gcpipe.engine.bots import MCTS_MAX_ITERATIONS, kinds_by_side
from gcpipe.engine.game import MAX_GAMES_AT_ONCE, SIDE_NAMES
from gcpipe.errors import UserError
from gcpipe.schema import check, numbers_as_float, load_schema
from gcpipe.search.settings import SETTINGS_SCHEMA

# Expert iteration's search_X settings are checked as a search player's X.
_SEARCH_SETTINGS = ("simulations", "variant", "considered", "rollouts", "rollout_weight")


def run_schema() -> dict:
    """config/schema.yaml's `run` (JSON Schema of a run's settings, with their defaults), the
    search_* settings' types and ranges filled in from gcpipe.search.settings and the sparring
    MCTS's iterations bounded as an MCTS player's are."""
    run = load_schema()["$defs"]["run"]
    for name in ("mcts_iterations", "mcts_iterations_from"):
        run["properties"][name]["maximum"] = MCTS_MAX_ITERATIONS
    for name in ("num_envs", "selfplay_games", "replay_games"):   # games held at once, as everywhere
        run["properties"][name]["maximum"] = MAX_GAMES_AT_ONCE
    for name in _SEARCH_SETTINGS:
        run["properties"][f"search_{name}"] = {**SETTINGS_SCHEMA[name], **run["properties"][f"search_{name}"]}
    return run


@dataclass(frozen=True)
class TrainConfig:
    """A run's settings: one field per `run` setting of config/schema.yaml, whose description says what
    it means (config/README.md lists them with their types, ranges and defaults)."""

    total_timesteps: int
    num_envs: int
    horizon: int
    minibatch_size: int
    replay_ratio: float
    learning_rate: float
    anneal_lr: bool
    muon_momentum: float
    max_grad_norm: float
    reward_shaping: float | dict
    reward_shaping_from: float
    coin_mobility_reward: float
    gamma: float
    gae_lambda: float
    vtrace_rho_clip: float
    vtrace_c_clip: float
    clip_coef: float
    vf_clip_coef: float
    vf_coef: float
    ent_coef: float
    prio_alpha: float
    prio_beta0: float
    selfplay: bool
    side: str
    opponent: str | dict
    mcts_iterations: int
    mcts_exploration: float
    mcts_rollout: str
    max_episode_length: int
    historical_fraction: float
    pool_size: int
    frozen_banks: int
    bot_fraction: float | dict
    train_slot_1: bool
    side_value: bool
    algorithm: str
    teacher_runs: dict
    teacher_search: dict
    distill_student_fraction: float
    expert_iterations: int
    init_run: str
    search_simulations: int
    search_variant: str
    search_considered: int
    search_rollouts: int
    search_rollout_weight: float
    selfplay_games: int
    replay_games: int
    expert_epochs: int
    expert_minibatch_rows: int
    expert_policy_coef: float
    expert_target_temperature: float
    expert_value_mix: float
    layout: str
    checkpoint_interval: int
    eval_interval: int
    eval_games: int
    seed: int
    device: str
    rollout_net: str
    update_precision: str
    max_epochs: int
    # How, not what: absent from config.json and from the settings a run's weights depend on.  Last:
    # the schema has no default for it, so existing configs resolve to the same text.
    ranks: int = 1
    # What, but optional: absent from config.json when unset, so a run without it records the text it
    # always did.  No schema default, for the same reason.
    mcts_iterations_from: int | None = None

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
        if self.algorithm != "ppo":
            return self.expert_iterations
        return max(1, self.total_timesteps // self.steps_per_epoch)

    @property
    def num_historical_envs(self) -> int:
        return round(self.historical_fraction * self.num_envs) if self.selfplay else 0

    @property
    def num_bot_envs(self) -> int:
        return sum(self.bot_games(self.num_envs)) if self.selfplay else 0

    @property
    def bot_per_side(self) -> bool:
        return isinstance(self.bot_fraction, dict)

    @property
    def total_bot_fraction(self) -> float:
        return sum(self.bot_fraction.values()) if self.bot_per_side else self.bot_fraction

    def bot_games(self, n: int) -> tuple[int, int]:
        """Of n games (PPO: envs), how many the bot plays as the Guerrilla and as the COIN; with one
        bot_fraction the split is an expectation (PPO draws the sides per game; expert iteration
        alternates them, the network's Guerrilla first)."""
        if self.bot_per_side:
            return tuple(round(self.bot_fraction[side] * n) for side in SIDE_NAMES)
        total = round(self.bot_fraction * n)
        return total // 2, total - total // 2

    @property
    def mcts_pool_iterations(self) -> int:
        """The most iterations a sparring search makes in the run (its node pools' size)."""
        return max(self.mcts_iterations, self.mcts_iterations_from or 0)

    def sparring_iterations(self, epoch: int) -> int:
        """The sparring MCTS's iterations in epoch `epoch` (from 0): mcts_iterations, or with
        mcts_iterations_from a straight line from it at the first epoch to mcts_iterations at the last."""
        start = self.mcts_iterations_from
        if start is None:
            return self.mcts_iterations
        return round(start + (self.mcts_iterations - start) * epoch / max(1, self.total_epochs - 1))

    def shaping_scales(self, epoch: int) -> tuple[float, float]:
        """The scale of the Guerrilla's and of the COIN's capture rewards in epoch `epoch` (from 0):
        reward_shaping's from epoch reward_shaping_from * total_epochs on, the reference's before."""
        if epoch < round(self.reward_shaping_from * self.total_epochs):
            return 1.0, 1.0
        if isinstance(self.reward_shaping, dict):
            return tuple(self.reward_shaping[side] for side in SIDE_NAMES)
        return self.reward_shaping, self.reward_shaping

    def to_dict(self) -> dict:
        """The settings a run records (config.json): all but `ranks`, which says how many processes
        play the games, as the thread count does, and not what the run is."""
        return {key: value for key, value in dataclasses.asdict(self).items()
                if key != "ranks" and not (key == "mcts_iterations_from" and value is None)}


# Settings that cannot change a run's weights (checkpoints, final.bin): evaluation plays its own
# games on a copy of the weights with its own seeds and touches no training stream (a test
# trains with and without it and compares the bytes), and max_epochs only says where a run
# stops.  Changing them neither retrains a finished run nor restarts a stopped one.
# checkpoint_interval is not among them: PPO's opponent pool takes its snapshots at checkpoints.
# `device`, like the thread count, says where the sums run rather than what the run is: a finished
# run is not retrained on another device, and a stopped one continues only on the device it was
# saved on (gcpipe/train/run.py starts it over elsewhere, saying so).
# `ranks` spreads the same games over more processes (docs/distributed.md).
RESULT_NEUTRAL_SETTINGS = ("eval_interval", "eval_games", "max_epochs", "device", "ranks")


def result_settings(settings: dict) -> dict:
    """The settings of a run that its weights depend on (all but RESULT_NEUTRAL_SETTINGS)."""
    return {key: value for key, value in settings.items() if key not in RESULT_NEUTRAL_SETTINGS}


def torch_device(config: TrainConfig, where: str = "run config"):
    """The torch device of training's tensors: `device` resolved (auto: CUDA where torch sees a GPU).
    UserError naming the key for cuda where torch sees none, so a run fails before its first step."""
    import torch

    if config.device == "cuda" and not torch.cuda.is_available():
        raise UserError(f"{where}: 'device' is cuda but torch sees no GPU here (torch {torch.__version__}, "
                        f"CUDA build: {torch.version.cuda or 'no'}); use cpu or auto")
    return torch.device("cuda" if config.device == "cuda" or (config.device == "auto" and torch.cuda.is_available())
                        else "cpu")


def make_config(settings: dict | None = None, where: str = "run config") -> TrainConfig:
    """A TrainConfig from a mapping of settings (the schema's defaults for the rest); UserError
    naming `where` and the key for any unknown key or bad value."""
    schema = run_schema()
    values = check(dict(settings) if isinstance(settings, dict) else {} if settings is None else settings,
                   schema, where)
    values = numbers_as_float(values, schema["properties"])
    # A number or a mapping of numbers per side: floats; a mapping is recorded with the run
    # (config.json) in SIDE_NAMES' order, whatever order the config wrote.
    for key in ("bot_fraction", "reward_shaping"):
        value = values[key]
        values[key] = {side: float(value[side]) for side in SIDE_NAMES} if isinstance(value, dict) else float(value)
    for key in ("teacher_runs", "teacher_search"):
        values[key] = {side: values[key][side] for side in SIDE_NAMES}
    config = TrainConfig(**values)
    _check_across(config, where)
    return config


def _check_across(config: TrainConfig, where: str) -> None:
    """The rules that span several settings."""
    if config.rollout_net == "c" and config.algorithm != "ppo":
        raise UserError(f"{where}: 'rollout_net' c is PPO's rollout step; algorithm '{config.algorithm}' plays its "
                        f"games through the C network already, so leave it torch")
    if config.rollout_net == "c" and config.device != "cpu":
        raise UserError(f"{where}: 'rollout_net' c steps the rollout on the CPU; set 'device' cpu (got "
                        f"{config.device})")
    if config.update_precision == "bfloat16" and (config.algorithm != "ppo" or config.device != "cpu"):
        raise UserError(f"{where}: 'update_precision' bfloat16 is for PPO's update on the CPU (its fixed-order "
                        f"products); got algorithm '{config.algorithm}', device '{config.device}'")
    if config.algorithm != "distill" and (any(config.teacher_runs.values()) or any(config.teacher_search.values())):
        # Teachers say distillation was meant: without `algorithm: distill` the run trained from scratch.
        raise UserError(f"{where}: 'teacher_runs' and 'teacher_search' are distillation's; set 'algorithm' distill "
                        f"(got {config.algorithm}), or leave them out")
    if config.algorithm != "ppo":
        if not config.selfplay:
            raise UserError(f"{where}: algorithm '{config.algorithm}' plays self-play games; set selfplay true")
        if config.layout == "legacy":
            raise UserError(f"{where}: algorithm '{config.algorithm}' trains both value rows, which layout legacy "
                            f"cannot hold; use layout 5c or 5c-bias")
        if config.algorithm == "distill":
            missing = [side for side in SIDE_NAMES if not config.teacher_runs[side]]
            if missing:
                raise UserError(f"{where}: algorithm 'distill' needs a teacher for each side; set 'teacher_runs' "
                                f"{' and '.join(missing)} to a run's name")
            if config.expert_value_mix > 0:
                raise UserError(f"{where}: 'expert_value_mix' mixes in a search's value, which algorithm 'distill' "
                                f"has not; set it to 0")
        if config.search_rollout_weight > 0 and config.search_rollouts < 1:
            raise UserError(f"{where}: 'search_rollout_weight' {config.search_rollout_weight} needs "
                            f"'search_rollouts' >= 1")
        if config.mcts_iterations_from is not None:
            raise UserError(f"{where}: 'mcts_iterations_from' schedules PPO's sparring MCTS; algorithm "
                            f"'{config.algorithm}' plays mcts_iterations throughout, so leave it out")
        if config.replay_games < config.selfplay_games:
            raise UserError(f"{where}: 'replay_games' ({config.replay_games}) must be at least 'selfplay_games' "
                            f"({config.selfplay_games}): each update trains on the newest games")
        return   # the rest are PPO's settings
    if config.mcts_iterations_from is not None and "mcts" not in kinds_by_side(config.opponent):
        raise UserError(f"{where}: 'mcts_iterations_from' schedules the sparring MCTS, but 'opponent' names no "
                        f"mcts bot (got {config.opponent}); set opponent, or leave mcts_iterations_from out")
    if config.ranks > config.num_envs:
        raise UserError(f"{where}: 'ranks' ({config.ranks}) is more than 'num_envs' ({config.num_envs}): a PPO "
                        f"rank steps at least one env")
    if config.ranks > 1 and (config.device == "cuda" or config.rollout_net == "torch"):
        raise UserError(f"{where}: 'ranks' ({config.ranks}) steps PPO's rollouts in C on the CPU; set device "
                        f"cpu or auto and rollout_net c or auto")
    if config.minibatch_size % config.horizon:
        raise UserError(f"{where}: 'minibatch_size' ({config.minibatch_size}) must be a multiple of "
                        f"'horizon' ({config.horizon}): minibatches are whole segments")
    if config.total_bot_fraction > 0 and not config.selfplay:
        raise UserError(f"{where}: 'bot_fraction' applies to self-play only (bot mode plays the bot everywhere)")
    if config.bot_per_side and config.side != "random":
        raise UserError(f"{where}: 'bot_fraction' per side sets the network's side in the bot envs; "
                        f"set 'side' to random (got {config.side})")
    fractions = [("historical_fraction", config.historical_fraction, config.num_historical_envs)]
    if config.bot_per_side:
        fractions += [(f"bot_fraction.{side}", config.bot_fraction[side], envs)
                      for side, envs in zip(SIDE_NAMES, config.bot_games(config.num_envs))]
    else:
        fractions.append(("bot_fraction", config.bot_fraction, config.num_bot_envs))
    for name, fraction, envs in fractions:
        if config.selfplay and fraction > 0 and envs == 0:
            raise UserError(f"{where}: '{name}' {fraction} of {config.num_envs} envs "
                            f"rounds to no env; raise num_envs or set the fraction to 0")
    if config.num_bot_envs + config.num_historical_envs > config.num_envs:
        raise UserError(f"{where}: 'bot_fraction' + 'historical_fraction' must not exceed 1, got "
                        f"{config.bot_fraction} + {config.historical_fraction}")
    if config.steps_per_epoch > config.total_timesteps:
        raise UserError(f"{where}: 'total_timesteps' ({config.total_timesteps}) is below one epoch "
                        f"({config.steps_per_epoch} steps = num_envs x slots x horizon)")
