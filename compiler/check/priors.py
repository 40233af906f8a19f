"""Prior families of weights (`weight w : real >= 0 = 0.3 ~ normal(0.3, 0.1)`), written once.

    family        arguments        support     log density at x
    normal        mu, sigma        (-inf, inf) -((x - mu) / sigma)^2 / 2 - log(sigma) - log(2 pi) / 2
    lognormal     mu, sigma        (0, inf)    -((log x - mu) / sigma)^2 / 2 - log(sigma) - log(x) - log(2 pi) / 2
    half_normal   sigma            [0, inf)    -(x / sigma)^2 / 2 - log(sigma) + log(2 / pi) / 2
    exponential   rate             [0, inf)    log(rate) - rate * x

The densities are Stan's (Stan Functions Reference, "Continuous distributions"):
`mu` is a location, `sigma` a scale and `rate` an inverse scale, all numeric
constants, scales strictly positive. An array weight takes a scalar prior for
each element. The density is of the CONSTRAINED value; on a constrained weight
it is truncated to the constraint, which only shifts the log density by a
constant, so the MAP weights are the same. `log_density` works over an array
module `xp` (numpy or jax.numpy), like `transforms`; nothing here imports jax.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple


class Family(NamedTuple):
    params: tuple[str, ...]   # argument names, in positional order
    example: str              # a prior of the family as written, for suggestions
    scales: tuple[str, ...]   # the arguments that must be > 0
    support_lo: float         # the support is (support_lo, inf) or [support_lo, inf)
    open_lo: bool             # True when support_lo itself has zero density (lognormal at 0)
    use: str                  # what the family is for, for docs and suggestions


FAMILIES: dict[str, Family] = {
    "normal": Family(("mu", "sigma"), "normal(0.3, 0.1)", ("sigma",), -math.inf, True,
                     "a location: any sign"),
    "lognormal": Family(("mu", "sigma"), "lognormal(0, 0.5)", ("sigma",), 0.0, True,
                        "a positive scale or gain, spread by a factor"),
    "half_normal": Family(("sigma",), "half_normal(0.5)", ("sigma",), 0.0, False,
                          "a non-negative gain that is probably small"),
    "exponential": Family(("rate",), "exponential(2)", ("rate",), 0.0, False,
                          "a non-negative gain, mean 1 / rate"),
}


def support_text(family: str) -> str:
    f = FAMILIES[family]
    if f.support_lo == -math.inf:
        return "all reals"
    return f"({f.support_lo:g}, inf)" if f.open_lo else f"[{f.support_lo:g}, inf)"


def in_support(family: str, x: float) -> bool:
    f = FAMILIES[family]
    return x > f.support_lo if f.open_lo else x >= f.support_lo


def covers(family: str, lo: float) -> bool:
    """Whether every value a weight constrained to (lo, hi) can take is in the support:
    the constraint's open lower end `lo` must not be below the support's."""
    return lo >= FAMILIES[family].support_lo


def mean(family: str, args: tuple[float, ...]) -> float:
    """The prior's mean (where `polc fit` pulls a weight the data say nothing about
    is its mode, not its mean; this is for messages and docs)."""
    if family == "normal":
        return args[0]
    if family == "lognormal":
        return math.exp(args[0] + args[1] ** 2 / 2)
    if family == "half_normal":
        return args[0] * math.sqrt(2 / math.pi)
    return 1.0 / args[0]


_LOG_2PI = math.log(2 * math.pi)


def log_density(family: str, args: tuple[float, ...], x: Any, xp: Any) -> Any:
    """The elementwise log density of `x` (constrained values, any shape)."""
    if family == "normal":
        mu, sigma = args
        return -0.5 * xp.square((x - mu) / sigma) - math.log(sigma) - 0.5 * _LOG_2PI
    if family == "lognormal":
        mu, sigma = args
        lx = xp.log(x)
        return -0.5 * xp.square((lx - mu) / sigma) - math.log(sigma) - lx - 0.5 * _LOG_2PI
    if family == "half_normal":
        (sigma,) = args
        return -0.5 * xp.square(x / sigma) - math.log(sigma) + 0.5 * math.log(2 / math.pi)
    if family == "exponential":
        (rate,) = args
        return math.log(rate) - rate * x
    raise ValueError(f"unknown prior family {family!r}")


def _plus(c: float) -> str:
    """` + c` or ` - |c|`, so the emitted source never reads `- -1.38`."""
    if c == 0:
        return ""
    return f" + {c!r}" if c > 0 else f" - {-c!r}"


def density_source(family: str, args: tuple[float, ...], x: str) -> str:
    """`log_density` as jnp source text over the expression `x`, for `emit`."""
    if family == "normal":
        mu, sigma = args
        return f"-0.5 * jnp.square(({x}{_plus(-mu)}) / {sigma!r}){_plus(-math.log(sigma) - 0.5 * _LOG_2PI)}"
    if family == "lognormal":
        mu, sigma = args
        return (f"-0.5 * jnp.square((jnp.log({x}){_plus(-mu)}) / {sigma!r}) - jnp.log({x})"
                f"{_plus(-math.log(sigma) - 0.5 * _LOG_2PI)}")
    if family == "half_normal":
        (sigma,) = args
        return f"-0.5 * jnp.square({x} / {sigma!r}){_plus(-math.log(sigma) + 0.5 * math.log(2 / math.pi))}"
    if family == "exponential":
        (rate,) = args
        return f"{math.log(rate)!r} - {rate!r} * {x}"
    raise ValueError(f"unknown prior family {family!r}")


def source(family: str, args: tuple[float, ...]) -> str:
    """`family(a, b)` as Pol writes it (for graphs, JSON and messages)."""
    return f"{family}({', '.join(f'{a:g}' for a in args)})"
