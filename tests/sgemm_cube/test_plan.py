"""sgemm_cube.plan: make_request, the one validator of the product options (its defaults, refusals, cache)."""
import pytest

from sgemm_cube.plan import Plan, Request, make_request


def test_defaults_are_the_documented_ones():
    assert make_request() == Request(scheme="auto", sb=12, scale="auto", order="termwise", accumulate=None,
                                     fixup=True, backend="auto")
    assert make_request(sb="auto").sb == 12


@pytest.mark.parametrize("kwargs, exc, match", [
    (dict(scheme="fp16x5"), ValueError, "unknown scheme 'fp16x5'"),
    (dict(scale="columns"), ValueError, "unknown scale 'columns'"),
    (dict(order="blockwise"), ValueError, "unknown order 'blockwise'"),
    (dict(accumulate="kahan"), ValueError, "unknown accumulation model 'kahan'"),
    (dict(fixup=1), TypeError, "fixup must be True or False"),
    (dict(backend="tpu"), ValueError, "unknown backend 'tpu'"),
    (dict(accumulate="sequential", backend="native"), ValueError, "arithmetic model of the CPU backend"),
    (dict(sb=12.0), (TypeError, ValueError), "sb"),
    (dict(sb=25), ValueError, "sb"),
])
def test_each_bad_option_is_refused_by_name(kwargs, exc, match):
    with pytest.raises(exc, match=match):
        make_request(**kwargs)


def test_equal_but_differently_typed_options_do_not_share_a_cached_request():
    """The cache is typed: True == 1, so an untyped cache would hand sb=True the request of sb=1."""
    assert make_request(sb=1).sb == 1
    with pytest.raises((TypeError, ValueError), match="sb"):
        make_request(sb=True)
    assert make_request(sb=0, fixup=False).fixup is False


def test_a_plan_holds_every_decision_and_config_overrides():
    """Plan fields beyond the first five default to matmul's defaults; with_config adds launch overrides."""
    plan = Plan("fp16x3", 12, "auto", "cuda", "why")
    assert (plan.order, plan.fixup, plan.accumulate, plan.config) == ("termwise", True, None, None)
    forced = plan.with_config(variant="ptr").with_config(BLOCK_M=16)
    assert forced.config == (("BLOCK_M", 16), ("variant", "ptr")) and hash(forced)
    assert forced._replace(config=None) == plan
