"""The kernels of a compiled loop (jaxattn.core.hlo), and JAX's generator lowered unrolled on
CPUs (jaxattn.core.keys.unroll_threefry): the same bits, no loop in an SGD step."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxattn import engine, slm
from jaxattn.core import hlo, keys

# A module of the shape XLA prints, built by hand: the loop of scope "step" has, per trip, a body
# of 2 fusions and a copy, a condition of 1 fusion, an inner loop of known trip count 3 (body 1
# fusion, condition 1 compare) and an inner loop of unknown trip count (body 2 fusions and a
# custom call, condition 1 fusion): 3 + 1 + 3 * 2 + 4 = 14 kernels.
MODULE = """HloModule jit_f, entry_computation_layout={(f32[4]{0})->f32[4]{0}}

%inner_body (p: (s32[], f32[4])) -> (s32[], f32[4]) {
  %p = (s32[], f32[4]{0}) parameter(0)
  %x = f32[4]{0} get-tuple-element(%p), index=1
  ROOT %f = (s32[], f32[4]{0}) fusion(%x), kind=kLoop, calls=%fc, metadata={op_name="jit(f)/while/body/step/while/body/sin"}
}

%inner_cond (p: (s32[], f32[4])) -> pred[] {
  %p = (s32[], f32[4]{0}) parameter(0)
  %i = s32[] get-tuple-element(%p), index=0
  %c = s32[] constant(3)
  ROOT %lt = pred[] compare(%i, %c), direction=LT
}

%free_body (p: (s32[], f32[4])) -> (s32[], f32[4]) {
  %p = (s32[], f32[4]{0}) parameter(0)
  %a = f32[4]{0} fusion(%p), kind=kLoop, calls=%fa, metadata={op_name="jit(f)/while/body/step/while/body/cos"}
  %b = f32[4]{0} fusion(%a), kind=kLoop, calls=%fb, metadata={op_name="jit(f)/while/body/step/while/body/exp"}
  %g = f32[4]{0} custom-call(%b), custom_call_target="gemm"
  ROOT %t = (s32[], f32[4]{0}) tuple(%p, %g)
}

%free_cond (p: (s32[], f32[4])) -> pred[] {
  %p = (s32[], f32[4]{0}) parameter(0)
  ROOT %f = pred[] fusion(%p), kind=kLoop, calls=%fd
}

%outer_body (p: (s32[], f32[4])) -> (s32[], f32[4]) {
  %p = (s32[], f32[4]{0}) parameter(0)
  %x = f32[4]{0} get-tuple-element(%p), index=1
  %y = f32[4]{0} fusion(%x), kind=kLoop, calls=%f1, metadata={op_name="jit(f)/while/body/step/mul"}
  %z = f32[4]{0} fusion(%y), kind=kLoop, calls=%f2, metadata={op_name="jit(f)/while/body/step/add"}
  %w = f32[4]{0} copy(%z)
  %bc = f32[2,2]{1,0} bitcast(%w)
  %k = (s32[], f32[4]{0}) while(%p), condition=%inner_cond, body=%inner_body, metadata={op_name="jit(f)/while/body/step/while"}, backend_config={"known_trip_count":{"n":"3"}}
  %l = (s32[], f32[4]{0}) while(%k), condition=%free_cond, body=%free_body, metadata={op_name="jit(f)/while/body/step/while"}
  ROOT %t = (s32[], f32[4]{0}) tuple(%l)
}

%outer_cond (p: (s32[], f32[4])) -> pred[] {
  %p = (s32[], f32[4]{0}) parameter(0)
  ROOT %f = pred[] fusion(%p), kind=kLoop, calls=%fe
}

ENTRY %main (x: f32[4]) -> f32[4] {
  %x = f32[4]{0} parameter(0)
  %c = s32[] constant(0)
  %t = (s32[], f32[4]{0}) tuple(%c, %x)
  %w = (s32[], f32[4]{0}) while(%t), condition=%outer_cond, body=%outer_body, metadata={op_name="jit(f)/while"}
  %e = f32[4]{0} fusion(%w), kind=kLoop, calls=%f9
  ROOT %r = f32[4]{0} get-tuple-element(%w), index=1
}
"""


def test_loop_kernels_counts_one_trip_of_a_handwritten_module():
    k = hlo.loop_kernels(MODULE, "step")
    assert k.per_trip == 14
    assert k.by_opcode == {"fusion": 9, "copy": 1, "compare": 3, "custom-call": 1}
    assert (k.inner_loops, k.unknown_trips) == (2, 1)


def test_loop_kernels_names_a_scope_it_cannot_find():
    with pytest.raises(ValueError, match="'nowhere'"):
        hlo.loop_kernels(MODULE, "nowhere")


def _draws(seed):
    k = jax.random.fold_in(jax.random.key(seed), 7)
    a, b = jax.random.split(k)
    return jax.random.normal(a, (8, 100)), jax.random.randint(b, (5,), 0, 8)


def test_threefry_unrolled_gives_the_same_bits_without_a_loop():
    def compiled():
        f = jax.jit(lambda s: _draws(s))  # a new function: nothing cached across lowerings
        return f(jnp.int32(3)), f.lower(jnp.int32(3)).compile().as_text()

    try:
        assert keys.unroll_threefry(False)
        (n0, i0), rolled = compiled()
        assert keys.unroll_threefry(True)
        (n1, i1), unrolled = compiled()
    finally:
        keys.unroll_threefry(True)  # the engine's default, for the tests after this one
    assert " while(" in rolled and " while(" not in unrolled
    np.testing.assert_array_equal(np.asarray(n0), np.asarray(n1))
    np.testing.assert_array_equal(np.asarray(i0), np.asarray(i1))


def test_an_sgd_step_runs_no_generator_loop():
    """The step loop of online SGD: the only loop inside it is the one over a stream's groups
    (a runtime trip count); the generator's rounds are unrolled into its kernels."""
    config = slm.SLMConfig(D=20, t_max=0.05, n_records=1, n_test=1)
    exp = engine.get("slm_sgd")
    text = engine.program_text(exp, config, seed=[0, 1], H=2, L=4)
    k = hlo.loop_kernels(text, exp.step_scope)
    assert (k.inner_loops, k.unknown_trips) == (1, 1)
    assert k.by_opcode.get("dot", 0) + k.by_opcode.get("fusion", 0) > 0


def test_program_text_names_a_bad_program():
    with pytest.raises(ValueError, match="program must be"):
        engine.program_text(engine.get("slm_sgd"), program="loop")
