"""What the engine runs for the copy head, one experiment a file: full-batch Adam grids
(:mod:`~jaxattn.copyhead.experiments._adam`), SGLD posterior chains
(:mod:`~jaxattn.copyhead.experiments._sgld`) and the reduced action's minima
(:mod:`~jaxattn.copyhead.experiments._theory`); the umbrella windows of the sampled landscape are
:mod:`jaxattn.copyhead.landscape._experiment`. The data they share is :mod:`jaxattn.copyhead.data`.
"""

from jaxattn.copyhead.experiments._adam import COPY_ADAM, INITS, OBSERVABLES, global_minimum, train
from jaxattn.copyhead.experiments._sgld import COPY_SGLD, SAMPLE_OBSERVABLES, STARTS, posterior_summary, sample
from jaxattn.copyhead.experiments._theory import COPY_THEORY, theory_grid
from jaxattn.core import checks

__all__ = [
    "COPY_ADAM",
    "COPY_SGLD",
    "COPY_THEORY",
    "INITS",
    "OBSERVABLES",
    "SAMPLE_OBSERVABLES",
    "STARTS",
    "global_minimum",
    "posterior_summary",
    "sample",
    "theory_grid",
    "train",
]

_MOVED = {
    **{
        n: "jaxattn.copyhead.data"
        for n in ("chain_key", "data_key", "init_key", "member_stats", "stream_data", "test_stats")
    },
    "segments": "jaxattn.engine",
    "start_params": "jaxattn.copyhead.experiments._sgld",
}
__getattr__ = checks.moved("jaxattn.copyhead.experiments", _MOVED)
