"""Claim script (Spec B, sections 3 and 5): the softmax phase diagram P*(L, V) with its fits to
L ln^2 L and to the spec's closed form, the critical point that ends the first-order line, the
linear-attention thresholds against V and L, and the action landscapes.

Writes docs/figures/copy_phase_diagram.png, copy_linear_thresholds.png and copy_landscape.png (or
the same under --out-dir) and prints the numbers quoted in docs/claims.md as one JSON object. The
same as ``jaxattn copy phase-diagram --out docs/figures``.

Run:  python scripts/copy_phase_diagram.py      (about 2 minutes on 2 cores)
      python scripts/copy_phase_diagram.py --quick --out-dir /tmp/figs   (a smoke test: L up to
          64, a coarse P grid)
"""

import json
import os
import time

import _options

from jaxattn.copyhead.plots import landscape_figure, phase_figures

OPT = _options.parse(__doc__)
L_MAX, N_P = (64, 40) if OPT.quick else (512, 400)

if __name__ == "__main__":
    t = time.perf_counter()
    fits = phase_figures(OPT.out_dir, L_max=L_MAX, n_P=N_P, critical=True)
    fits["landscape"] = landscape_figure(os.path.join(OPT.out_dir, "copy_landscape.png"))
    fits["wall_seconds"] = round(time.perf_counter() - t, 1)
    print(json.dumps(fits, indent=1))
