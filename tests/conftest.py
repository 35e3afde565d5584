"""Shared test fixtures; torch's kernels pinned as the CLI pins them (gcpipe/torch_env.py: its AVX2
kernels, MKL's COMPATIBLE branch), so the suite computes the same bits on every x86-64 CPU."""
import fcntl
import os

from gcpipe.torch_env import before_torch

before_torch()       # before torch loads

import pytest  # noqa: E402
import torch  # noqa: E402


@pytest.fixture
def one_thread():
    """Byte-identical results (resume) need a fixed thread count; one keeps the tests cheap too."""
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)


@pytest.fixture(scope="session")
def edited_engines(tmp_path_factory):
    """Engines built from copies of the sources (tests/engines.py): {"tie_break": folder,
    "neutral": folder, "compiler": the caching compiler}, each with its build record build.json."""
    from engines import NEUTRAL, TIE_BREAK, build, caching_compiler, copy_sources

    root = tmp_path_factory.mktemp("engines")
    # The xdist workers of one run share the compiler's objects: the second to build (it waits for
    # the first) compiles nothing.
    shared = tmp_path_factory.getbasetemp().parent if os.environ.get("PYTEST_XDIST_WORKER") else root
    compiler = caching_compiler(root, shared / "engine-objects")
    engines = {"compiler": compiler}
    with open(shared / "engine-objects.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        for name, edits in (("neutral", NEUTRAL), ("tie_break", [TIE_BREAK])):
            engines[name] = copy_sources(root / name, edits)
            build(engines[name], compiler)
    return engines


# pytest-xdist runs the suite on two workers (pyproject's addopts: -n 2 --dist load --maxschedchunk 1):
# each worker takes the next test in the order below when it is done with one, so the longest tests
# start first and the run's end does not wait for one of them.
LONGEST_FIRST = [
    "tests/test_workflow.py::test_smoke_dag_end_to_end",
    "tests/test_openspiel.py::test_openspiel_mcts_and_gcpipe_mcts_are_comparable_at_equal_iterations",
    "tests/test_oracle.py::test_engine_matches_the_oracle_over_random_games",
    "tests/test_faults.py::test_other_bad_arguments_are_one_line",
    "tests/test_ranks.py::test_a_rank_killed_mid_run_stops_it_in_one_line_and_the_rerun_ends_with_the_same_bytes",
    "tests/test_train.py::test_bot_mode_training_against_random_raises_the_win_rate",
    "tests/test_expert.py::test_the_search_learns_in_a_ci_sized_run",
    "tests/test_train.py::test_training_bytes_do_not_depend_on_mkls_kernels_or_the_products_code_path",
    "tests/test_faults.py::test_the_pipeline_does_not_retrain_for_evaluation_settings",
    "tests/test_distill.py::test_the_student_learns_its_teachers_in_a_ci_sized_run",
    "tests/test_faults.py::test_jobs_die_with_a_killed_snakemake_and_the_rerun_finishes_the_ledger",
    "tests/test_faults.py::test_sizes_beyond_what_can_run_are_refused_before_any_work",
    "tests/test_faults.py::test_a_second_training_of_the_same_run_folder_is_refused_naming_the_first",
    "tests/test_openspiel.py::test_openspiel_games_are_functions_of_their_seeds",
    "tests/test_fingerprint.py::test_a_training_run_of_another_engine_starts_over",
    "tests/test_ranks.py::test_ppo_over_ranks_writes_the_bytes_of_one_process_and_continues_at_another_number_of_ranks",
]


def _start_rank(item) -> int:
    """The test's place in LONGEST_FIRST (a parametrized test by its function's name); after them, the rest."""
    name = item.nodeid.partition("[")[0]
    return LONGEST_FIRST.index(name) if name in LONGEST_FIRST else len(LONGEST_FIRST)


def pytest_collection_modifyitems(config, items):
    items.sort(key=_start_rank)   # (stable: the rest keep their order)
