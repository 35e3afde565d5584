"""Match statistics as pure functions: the standard normal (normal), game pairs in the pentanomial
model with their Elo estimates and the sequential probability ratio test (sprt), and two training
settings compared over their runs (runs)."""
