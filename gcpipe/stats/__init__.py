"""Match statistics as pure functions: game pairs in the pentanomial model, their Elo
estimates, and the sequential probability ratio test (SPRT) over them."""
from gcpipe.stats.sprt import (MODELS, PAIR_OUTCOMES, SPRT, PairElo, SPRTState, llr_logistic, llr_normalized,
                               pair_elo, pentanomial)

__all__ = ["MODELS", "PAIR_OUTCOMES", "PairElo", "SPRT", "SPRTState", "llr_logistic", "llr_normalized",
           "pair_elo", "pentanomial"]
