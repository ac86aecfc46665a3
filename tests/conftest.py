"""Shared fixtures: seeds, and random data of several distributions and exponent ranges.

Test data are fixed by default and fresh on request:

* ``SGEMM_CUBE_TEST_SEED`` unset: session seed 0, so every run sees the same numbers.  This is what
  CI runs (``.ci/run``, README's test command).
* ``SGEMM_CUBE_TEST_SEED=random``: a fresh session seed, printed in pytest's header; ``.ci/fresh_seeds``
  runs the suite this way (opt-in, by hand or on a schedule).
* ``SGEMM_CUBE_TEST_SEED=<int>``: that session seed, to replay a failure of a fresh-seed run.

Every test that draws random data takes it from the session seed and its own node id, so a test's
data do not depend on which tests ran before it: the ``rng`` fixture (``numpy.random.Generator``),
``node_seed`` (an integer, for code that takes a seed), ``torch_gen`` (a ``torch.Generator``).  The
global generators (``random``, ``numpy.random``, torch's default one) are seeded the same way before
every test.  Hypothesis tests are derandomized by default (the same examples every run) and draw
fresh examples, seeded from the session seed, under ``SGEMM_CUBE_TEST_SEED`` set.
"""
import os
import random
import re
import secrets
import sys
import zlib

import numpy as np
import pytest

# Without a GPU the Triton kernels run on Triton's CPU interpreter.  The flag must
# be set before triton is first imported, which any test module may do.
if "TRITON_INTERPRET" not in os.environ:
    try:
        import torch

        if not torch.cuda.is_available():
            os.environ["TRITON_INTERPRET"] = "1"
    except ImportError:
        pass


def _subnormals_survive() -> bool:
    """Whether float32 arithmetic keeps subnormals here: a process running with flush-to-zero or
    denormals-are-zero (a library built with -ffast-math, ``torch.set_flush_denormal(True)``) changes
    every FP32 result near underflow, the tests' references included."""
    tiny = np.float32(2.0 ** -140)
    return bool(tiny * np.float32(0.5) > 0 and np.float32(2.0 ** -126) - np.float32(2.0 ** -126 * 1.5) != 0)


def pytest_sessionstart(session):
    if not _subnormals_survive():
        raise pytest.UsageError("float32 subnormals flush to zero in this process (FTZ/DAZ): the accuracy "
                                "tests' references and the underflow generators assume IEEE arithmetic")


_SEED_ENV = os.environ.get("SGEMM_CUBE_TEST_SEED", "").strip()


def _session_seed() -> int:
    """0 unless ``SGEMM_CUBE_TEST_SEED`` says otherwise: ``random`` draws a fresh seed, an integer replays one."""
    if _SEED_ENV.lower() == "random":
        # One draw per run: pytest-xdist's workers start after the main process imported this module, and
        # inherit its environment, so every worker uses the seed the header prints.
        return int(os.environ.setdefault("SGEMM_CUBE_TEST_SEED_DRAWN", str(secrets.randbits(32))))
    try:
        return int(_SEED_ENV) if _SEED_ENV else 0
    except ValueError:
        raise ValueError(f"SGEMM_CUBE_TEST_SEED={_SEED_ENV!r}: expected 'random' or an integer") from None


#: Fixed data by default (every run sees the same numbers); ``SGEMM_CUBE_TEST_SEED=random`` draws fresh
#: data, ``SGEMM_CUBE_TEST_SEED=<int>`` replays a run (the header prints the seed either way).
SESSION_SEED = _session_seed()


#: True when the seed was asked for (``random`` or an integer): hypothesis then draws its examples from it.
SEEDED_BY_ENV = bool(_SEED_ENV)


def pytest_report_header(config):
    how = "fresh: SGEMM_CUBE_TEST_SEED=random" if _SEED_ENV.lower() == "random" else \
        ("SGEMM_CUBE_TEST_SEED" if _SEED_ENV else "fixed default")
    return f"sgemm_cube test data seed {SESSION_SEED} ({how}): replay with SGEMM_CUBE_TEST_SEED={SESSION_SEED}"


def pytest_terminal_summary(terminalreporter):
    """A run on an asked-for seed ends with the header's replay line: ``-q`` (README's command,
    ``.ci/fresh_seeds``) leaves the header out."""
    if SEEDED_BY_ENV:
        terminalreporter.write_line(pytest_report_header(terminalreporter.config))


def seed_for_node(nodeid: str) -> int:
    """A 32-bit seed from the session seed and a test's node id (independent of the order tests run in)."""
    return int(np.random.SeedSequence([SESSION_SEED, zlib.crc32(nodeid.encode())]).generate_state(1)[0])


# ---- hypothesis: derandomized by default, fresh examples from the session seed when one is asked for
try:
    import hypothesis
except ImportError:  # the property tests skip themselves
    hypothesis = None
else:
    hypothesis.settings.register_profile("sgemm_cube_fixed", derandomize=True, database=None)
    hypothesis.settings.register_profile("sgemm_cube_seeded", derandomize=False, database=None, print_blob=True)
    hypothesis.settings.load_profile("sgemm_cube_seeded" if SEEDED_BY_ENV else "sgemm_cube_fixed")


#: The quick run, ``pytest -m "not slow"``: under 2 minutes on the 2-core CI machine, with some test of
#: every area left in it (API, CPU model, guarantee, switch, CLI, tuner, a small executed-kernel smoke, a
#: small Triton-interpreter smoke).  README's test command (what CI runs) runs everything.  What the quick
#: run leaves out is said here, in one place, rather than marked in each file:
#:
#: * :data:`SLOW_MODULES`: modules whose tests are all ``slow`` (compiling and executing the AscendC kernels
#:   in their stand-in, or running the Triton kernels under the interpreter), except :data:`QUICK_TESTS`;
#: * :data:`SLOW_TESTS`: single tests of the other modules (a few seconds each or more).
#:
#: An entry is a node id, or a node id's beginning that ends at a test's name or at ``[`` (then it
#: covers every case of the test, or those whose id starts so); ``*`` stands for any characters.
SLOW_MODULES = (
    "tests/ascendc_kernels/test_executed_kernels.py",
    "tests/ascendc_kernels/test_executed_guard.py",
    "tests/ascendc_kernels/test_exec_arithmetic.py",
    "tests/ascendc_kernels/test_guarantee_alternatives.py",
    "tests/ascendc_kernels/test_probes.py",
    "tests/ascendc_kernels/test_ascend_build.py",
    "tests/sgemm_cube/backends/cuda/test_cuda_backend.py",
    "tests/sgemm_cube/backends/cuda/test_fixup_exact_cuda.py",
    "tests/distributed/test_dtensor.py",     # a process group per module (gloo, 2 ranks)
    "tests/distributed/test_example.py",
)
#: Tests of other modules that take seconds each: interpreter runs, fresh interpreters, plots, sweeps.
SLOW_TESTS = (
    "tests/sgemm_cube/test_guarantee.py::*[cuda*",  # the Triton kernels under the interpreter
    "tests/sgemm_cube/test_call_path.py::test_the_cuda_path_travels_one_way_under_the_interpreter",
    "tests/sgemm_cube/test_cpu_bounded_memory.py::test_tiny_budget_gives_the_same_bits[bf16",
    "tests/sgemm_cube/test_cpu_bounded_memory.py::test_long_k_runs_within_the_budget",
    "tests/sgemm_cube/test_torch_ops.py::test_documented_names_work_after_import_sgemm_cube",
    "tests/sgemm_cube/test_torch_switch.py::test_compiled_code_follows_the_switch_when_it_runs",
    "tests/sgemm_cube/test_torch_switch.py::test_environment_variable_turns_the_switch_on_at_import",
    "tests/sgemm_cube/test_torch_example.py::test_loss_curves_agree",
    "tests/sgemm_cube/test_torch_example.py::test_main_writes_the_plot",
    "tests/sgemm_cube/cli/test_cli_inputs.py::test_accuracy_plot_of_a_report_honours_out",
    "tests/sgemm_cube/cli/test_bench_tools.py::test_matrix_dry_run_on_the_cpu",
    "tests/sgemm_cube/cli/test_bench_tools.py::test_tiny_model_bench_on_the_cpu",
    "tests/sgemm_cube/cli/test_accuracy_studies.py::test_all_writes_the_report",
    "tests/sgemm_cube/cli/test_accuracy_studies.py::test_cuda_backend_path_under_the_triton_interpreter",
    "tests/sgemm_cube/cli/test_accuracy_studies.py::test_condition_study_sgemm_cube_beats_native_fp32_on_average",
    "tests/sgemm_cube/backends/test_npu_tilings.py::test_the_runtime_does_not_import_the_tuner_in_a_fresh_interpreter",
    "tests/cpu_fallback/test_two_level.py::test_error_is_flat_in_k",
    "tests/tuning/test_tuning_gpu.py::test_real_triton_backend_under_the_interpreter",
    "tests/tuning/test_pipeline_model.py::test_best_kernel_picks_the_mode_per_shape",
    "tests/tuning/test_pipeline_model.py::test_best_kernel_picks_the_models_best_of_every_candidate",
    "tests/tuning/test_pipeline_model.py::test_screen_picks_the_best_tiling_of_the_full_ranking",
    "tests/tuning/test_tilings.py::test_model_table_of_a_small_grid",
    "tests/tuning/test_package_model.py::test_report_tables_and_targets_are_the_models",
    "tests/tuning/test_package_model.py::test_tune_design_package",
    "tests/tuning/test_package_model.py::test_serial_replay_is_the_program_replay",
    "tests/tuning/test_tuning_cli.py::test_plot_fig5_writes_a_png",
    "tests/test_quick_run.py::test_the_quick_run_keeps_every_area_and_every_quick_test",  # collects in a subprocess
)
#: Tests that stay in the quick run although :data:`SLOW_TESTS` or :data:`SLOW_MODULES` cover them.
QUICK_TESTS = (
    # the executed AscendC kernels, both chips: the bring-up's first check, K groups with tails, one pass per
    # term, batches (each well under a second; the build is shared with test_npu_backend.py's)
    "tests/ascendc_kernels/test_executed_kernels.py::test_kernels_bit_exact[one_fractal-",
    "tests/ascendc_kernels/test_executed_kernels.py::test_kernels_bit_exact[groups3_tails-",
    "tests/ascendc_kernels/test_executed_kernels.py::test_kernels_bit_exact[per_term_groups3_fp16x4-",
    "tests/ascendc_kernels/test_executed_kernels.py::test_kernels_bit_exact[batch3_one_group_sb10_fp16x4-",
    # the Triton kernels under the interpreter: the split, one GEMM, the guarantee through the public API
    "tests/sgemm_cube/backends/cuda/test_cuda_backend.py::test_split_is_the_cpu_model_bit_for_bit[contiguous-normal-0]",
    "tests/sgemm_cube/backends/cuda/test_cuda_backend.py::test_gemm_variants_match_the_model[ptr-normal-shape0]",
    "tests/sgemm_cube/test_guarantee.py::test_default_options_meet_the_guarantee[cuda-cond_phi5]",
    # README's own import line, in a fresh interpreter
    "tests/sgemm_cube/test_torch_ops.py::test_documented_names_work_after_import_sgemm_cube[import torch, sgemm_cube]",
)


def _covers(entry: str, nodeid: str) -> bool:
    """Whether a :data:`SLOW_TESTS` / :data:`QUICK_TESTS` entry covers a test's node id."""
    if "*" in entry:
        return re.fullmatch(".*".join(map(re.escape, entry.split("*"))) + r"(\[.*)?", nodeid) is not None
    return nodeid == entry or nodeid.startswith(entry if entry.endswith("[") or "[" in entry else entry + "[")


def is_slow(nodeid: str) -> bool:
    """Whether the quick run (``-m "not slow"``) leaves the test out."""
    if any(_covers(q, nodeid) for q in QUICK_TESTS):
        return False
    return nodeid.split("::")[0] in SLOW_MODULES or any(_covers(e, nodeid) for e in SLOW_TESTS)


#: Node ids of the tests that pytest-xdist sends to one worker together (:func:`pytest_xdist_make_scheduler`):
#: the AscendC kernels' planted-bug tests (``tests/ascendc_kernels/conftest.py`` checks their names).
TOGETHER = "::test_planted_"


@pytest.hookimpl(optionalhook=True)  # pytest-xdist's hook, on the controller
def pytest_xdist_make_scheduler(config, log):
    """Under ``--dist load`` (what ``-n auto`` means), schedule test by test as it does, except that the tests
    named in :data:`TOGETHER` go to one worker, first: every process that runs a planted-bug test builds the
    binaries of all of the session's planted bugs (a process cannot know which tests it will be sent), so
    two workers built every binary twice.  (The ``xdist_group`` mark does not reach pytest 9.2's node ids
    with pytest-xdist 3.8.)"""
    if config.getoption("dist") != "load":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class TogetherScheduling(LoadScopeScheduling):
        """LoadScopeScheduling with one scope per test, except one for all the tests of TOGETHER (the
        largest scope, so sent first)."""

        def _split_scope(self, nodeid: str) -> str:
            return TOGETHER if TOGETHER in nodeid else nodeid

    return TogetherScheduling(config, log)


def pytest_collection_modifyitems(config, items):
    """Mark the slow tests ``slow`` (:func:`is_slow`); under ``SGEMM_CUBE_TEST_SEED``, each hypothesis test
    draws from the session seed and its node id."""
    for item in items:
        if is_slow(item.nodeid):
            item.add_marker(pytest.mark.slow)
    if hypothesis is None or not SEEDED_BY_ENV:
        return
    for item in items:
        fn = getattr(item, "obj", None)
        if getattr(fn, "is_hypothesis_test", False):
            hypothesis.seed(seed_for_node(item.nodeid))(fn)


@pytest.fixture(autouse=True)
def _seed_global_generators(request):
    """Seed ``random``, ``numpy.random`` and torch's default generator (if torch is loaded) per test."""
    seed = seed_for_node(request.node.nodeid)
    random.seed(seed)
    np.random.seed(seed)
    torch = sys.modules.get("torch")
    if torch is not None and hasattr(torch, "manual_seed"):
        torch.manual_seed(seed)


#: name -> generator(rng, shape) of float32 data (never zeros, never constant).
DISTRIBUTIONS = {
    "normal": lambda rng, s: rng.standard_normal(s),
    "uniform01": lambda rng, s: rng.uniform(0.0, 1.0, s),
    "uniform_pm1": lambda rng, s: rng.uniform(-1.0, 1.0, s),
    # signed log-normal, sigma 2, clipped at 2**14 so that it stays inside the FP16 split's range (sb=12)
    "lognormal": lambda rng, s: np.minimum(rng.lognormal(0.0, 2.0, s), 2.0 ** 14) * rng.choice([-1.0, 1.0], s),
    "wide_exponent": lambda rng, s: rng.uniform(-1.0, 1.0, s) * 2.0 ** rng.integers(-12, 12, s),
}


def draw(rng, name, shape, scale_exp=0):
    """float32 array of the named distribution, times 2**scale_exp."""
    return (DISTRIBUTIONS[name](rng, shape) * 2.0 ** scale_exp).astype(np.float32)


@pytest.fixture
def rng(request):
    """A generator per test, from the session seed (printed in the header) and the test's id."""
    return np.random.default_rng([SESSION_SEED, zlib.crc32(request.node.nodeid.encode())])


@pytest.fixture
def node_seed(request):
    """An integer seed per test (for APIs that take one), from the session seed and the test's id."""
    return seed_for_node(request.node.nodeid)


@pytest.fixture
def torch_gen(node_seed):
    """A ``torch.Generator`` (CPU) per test, from the session seed and the test's id."""
    torch = pytest.importorskip("torch")
    return torch.Generator().manual_seed(node_seed)


@pytest.fixture
def shipped_npu_tilings_only(monkeypatch, tmp_path):
    """The NPU tiling tables as shipped: a user's own (``$SGEMM_CUBE_TUNING_DIR/npu``) points at an empty
    temporary folder, and the lookups' caches are cleared before and after."""
    from sgemm_cube.backends import npu

    monkeypatch.setenv("SGEMM_CUBE_TUNING_DIR", str(tmp_path / "user"))
    npu.choose_tiling.cache_clear()
    npu._predicted_tflops.cache_clear()
    yield
    npu.choose_tiling.cache_clear()
    npu._predicted_tflops.cache_clear()
