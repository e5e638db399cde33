# --- copy head (Spec B) ---
from jaxattn.theory.copy_action import (ActionStats, CopyHyper, attention_stats, exact_action, hyper,
                                        linear_action, reduced_action, reduced_action_of_G, softmax_action,
                                        test_error)
from jaxattn.theory.copy_linear import LinearOnsets, linear_minimum, linear_onsets
from jaxattn.theory.copy_phase import (SoftmaxTransition, linear_curves, p_star_closed_form, softmax_critical_point,
                                       softmax_curves, softmax_minima, softmax_phase_diagram, softmax_transition,
                                       theory_summary)
