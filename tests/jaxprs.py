"""Every equation of a jaxpr, its sub-jaxprs' included (``pjit``, ``scan``, ``while``, ``cond``'s
branches, ``custom_*``): for the tests that look for a primitive wherever a program holds it."""


def _subjaxprs(value):
    if hasattr(value, "jaxpr") and hasattr(value, "consts"):  # a ClosedJaxpr (pjit, scan, while, custom_*)
        yield value.jaxpr
    elif hasattr(value, "eqns"):  # a Jaxpr
        yield value
    elif isinstance(value, (tuple, list)):  # cond's branches
        for v in value:
            yield from _subjaxprs(v)


def equations(jaxpr):
    """The equations of ``jaxpr`` (a ``Jaxpr`` or ``ClosedJaxpr``) in program order, each followed
    by those of the jaxprs in its parameters."""
    jaxpr = getattr(jaxpr, "jaxpr", jaxpr)
    for eqn in jaxpr.eqns:
        yield eqn
        for value in eqn.params.values():
            for sub in _subjaxprs(value):
                yield from equations(sub)
