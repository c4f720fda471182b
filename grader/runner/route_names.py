"""torch's routes to what an exercise builds, by name: which operators and functions each one is, and what a
worker runs without. Free of torch, so that the judge can say what to switch off before torch is imported
(grader.runner.routes switches them off)."""

from dataclasses import dataclass

# Each route by the fragments of the names that make it; names that hold a fragment by chance are excepted.
ROUTES: dict[str, tuple[str, ...]] = {
    "softmax": ("softmax",),
    "attention": ("attention",),
    "solvers": ("lstsq", "pinv", "solve", "inverse", "linalg_inv", "tensorinv"),
}
NOT_A_ROUTE = frozenset({"resolve_conj", "resolve_neg", "slice_inverse"})
STAND_IN_KERNEL = "_scaled_dot_product_attention_math"  # what stage 6's stand-in runs where attention is off
# How a refused call ends its message: "aten::conv1d is switched off here: it is outside the operators ..."
SWITCHED_OFF_HERE = " is switched off here: "
OUTSIDE_THE_LIST = "it is outside the operators these exercises need"  # grader.runner.operators' refusal


@dataclass(frozen=True)
class SwitchedOff:
    """What a worker runs without: ``routes`` (keys of ROUTES), except the operators named in ``kept``."""

    routes: tuple[str, ...] = ()
    kept: tuple[str, ...] = ()

    @classmethod
    def from_wire(cls, sent: dict | None) -> "SwitchedOff":
        """The value the judge sent as dataclasses.asdict (None: nothing switched off)."""
        return cls(tuple((sent or {}).get("routes", ())), tuple((sent or {}).get("kept", ())))

    def __bool__(self) -> bool:
        return bool(self.routes)

    def covers(self, name: str) -> bool:
        """Whether an operator or function called ``name`` belongs to a switched-off route: a backward kernel
        too, which computes the route's work from other inputs (exp(q @ k.T) from a zero log-sum-exp)."""
        if name in NOT_A_ROUTE or name in self.kept:
            return False
        return any(fragment in name for route in self.routes for fragment in ROUTES[route])

    def includes(self, other: "SwitchedOff") -> bool:
        """Whether everything ``other`` switches off, this switches off too."""
        return set(other.routes) <= set(self.routes) and set(self.kept) <= set(other.kept)
