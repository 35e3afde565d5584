"""PPO self-play training of MinGRU policies (model.md §4): `config` (TrainConfig and the rules
across its settings; types, ranges and defaults are config/schema.yaml's), `ppo` (rollout over
the C environments and the update), `sequence` (the fast segment forward), `muon` (optimiser),
`pool` (frozen opponents), `evaluate` (games against a bot through the player protocol), `run`
(the run folder: metrics, checkpoints, exact resume) and `bench`."""
