"""The standard normal distribution, for intervals and likelihoods of superiority."""
import scipy.special

Z95 = 1.959963984540054   # two-sided 95 % quantile, Phi^-1(0.975)


def normal_cdf(x):
    """Phi(x), elementwise for arrays."""
    return scipy.special.ndtr(x)
