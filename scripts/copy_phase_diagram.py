"""Claim script (Spec B, sections 3 and 5): the softmax phase diagram P*(L, V) with its fits to
L ln^2 L and to the spec's closed form, the critical point that ends the first-order line, the
linear-attention thresholds against V and L, and the action landscapes.

Writes docs/figures/copy_phase_diagram.png, copy_linear_thresholds.png and copy_landscape.png and
prints the numbers quoted in docs/claims.md as one JSON object. The same as
``jaxattn copy phase-diagram --out-dir docs/figures``.

Run:  python scripts/copy_phase_diagram.py      (about 2 minutes on 2 cores)
"""

import json
import os
import time

from jaxattn.copyhead.plots import landscape_figure, phase_figures

OUT = os.path.join(os.path.dirname(__file__), "..", "docs", "figures")

if __name__ == "__main__":
    t = time.perf_counter()
    fits = phase_figures(OUT, L_max=512, n_P=400, critical=True)
    fits["landscape"] = landscape_figure(os.path.join(OUT, "copy_landscape.png"))
    fits["wall_seconds"] = round(time.perf_counter() - t, 1)
    print(json.dumps(fits, indent=1))
