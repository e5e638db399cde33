"""What the engine runs for the single-location model, one experiment a file: online SGD
(:mod:`~jaxattn.slm.experiments._sgd`, :func:`train`) and the order-parameter ODEs and SDE
(:mod:`~jaxattn.slm.experiments._ode`, :func:`integrate`), over the axes and keys of
:mod:`~jaxattn.slm.experiments._common`.
"""

from jaxattn.core import checks
from jaxattn.slm.experiments._common import GRID_AXES, point_keys
from jaxattn.slm.experiments._ode import SLM_ODE, SLM_SDE, integrate
from jaxattn.slm.experiments._sgd import SLM_SGD, train

__all__ = ["GRID_AXES", "SLM_ODE", "SLM_SDE", "SLM_SGD", "integrate", "point_keys", "train"]

_MOVED = {
    "OnlineSGD": "jaxattn.slm.experiments._sgd.OnlineSGDExperiment (renamed)",
    "OrderParameterODE": "jaxattn.slm.experiments._ode",
    "OrderParameterSDE": "jaxattn.slm.experiments._ode",
    "measure_error": "jaxattn.slm.task",
    **{n: "jaxattn.slm.experiments._common" for n in ("AXES", "ODE_AXES", "directions_and_test_key")},
}
__getattr__ = checks.moved("jaxattn.slm.experiments", _MOVED)
