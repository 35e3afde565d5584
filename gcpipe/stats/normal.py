"""The standard normal distribution, for intervals and likelihoods of superiority."""
import math

Z95 = 1.959963984540054   # two-sided 95 % quantile, Phi^-1(0.975)


def normal_cdf(x: float) -> float:
    """Phi(x)."""
    return 0.5 * math.erfc(-x / math.sqrt(2))
