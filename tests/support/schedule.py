"""The order a two-worker run (``pytest -n 2``) starts the tests in: the longest first.

pytest-xdist's default scheduler hands each worker a long run of consecutive tests at the start,
so the order of collection decides which worker gets which long test, and a long test that
starts late sets the run's tail. With :func:`hand_out_one_at_a_time`, each worker takes the next
test when it has few left, and :func:`longest_first` puts the tests below first: each worker
takes a long one in turn and the short ones fill the end.

:data:`LONGEST` names tests by node id prefix, in the order they start, from the CI run's
durations (docs/performance.md, "CI time"). A test missing from it only starts later; a
prefix that matches no test is harmless, and ``tests/test_schedule.py`` checks that each names
a test module and function that exist. The first two start together: the 12F smoke build
compiles YoWASP's Yosys on a new machine (about 45 s, one process at a time: see
:mod:`hwgen.toolcache`), so the other worker starts with long tests that need none of YoWASP's
tools rather than wait for it.
"""

#: Node id prefixes of the longest tests, in the order they should start.
LONGEST = (
    # Compiles YoWASP's Yosys (about 45 s) and the ECP5 tools (seconds) on a new machine.
    "tests/boards/test_flow.py::test_build_smoke[ulx3s-12f-device]",
    # Meanwhile, the other worker: Amaranth simulations, then Verilog and Verilator, but none
    # of the YoWASP tools.
    "tests/device/test_bf16_datapath.py::test_random_layers",
    # The graph importer's tests against torch.
    "tests/nn/test_import_graph.py::test_from_onnx_equals_torch",
    "tests/nn/test_import_graph.py::test_zoo_resnet8_from_onnx",
    "tests/nn/test_import_graph.py::test_random_graphs_equal_torch",
    "tests/nn/test_import_graph.py::test_zoo_resnet8_from_torch",
    "tests/nn/test_import_graph.py::test_from_torch_equals_torch",
    "tests/sim/test_tb_network.py::test_network_fewer_requant_lanes",
    "tests/sim/test_tb_bf16_network.py::test_drawn_bf16_mlps",
    "tests/sim/test_tb_bf16_network.py::test_random_bf16_graphs",
    "tests/sim/test_tb_network.py::test_network",
    # The other builds, their tools compiled by then or compiling one at a time.
    "tests/boards/test_flow.py::test_build_smoke[tang-nano-9k-device]",
    "tests/boards/test_flow.py::test_build_smoke[icebreaker-device]",
    "tests/dse/test_driver.py::test_a_build_tier_point_in_a_dask_worker",
    "tests/examples/test_offload.py::test_offload_example_script",
    "tests/cli/test_demo.py::test_demo_bf16_device_equals_bf16_reference",
    "tests/compiler/test_wide_reductions.py::test_a_1568_input_classifier_runs_on_the_simulated_board",
    "tests/formal/test_executor.py::test_command_layer",
    "tests/formal/test_controller.py::test_pass_starts_with_whole_geometry",
    "tests/sim/test_tb_axis.py::test_axis",
    "tests/formal/test_framing.py::test_frame_layer",
    "tests/test_benchmarks.py::test_benchmark_runs_quick_and_records",
    "tests/cli/test_generate.py::test_verify_passes_on_small_design",
    # Builds the output-stationary board: its first case only, or the other worker would take
    # the second and wait for that build.
    "tests/host/test_accelerator.py::test_random_networks_are_bit_exact_on_the_board[os-1]",
    "tests/sim/test_tb_engine.py::test_engine",
    "tests/sim/board/test_bf16_board.py::test_bf16_mlps_on_the_simulated_board",
)


def _rank(nodeid):
    return next((i for i, prefix in enumerate(LONGEST) if nodeid.startswith(prefix)),
                len(LONGEST))


def longest_first(items):
    """Reorder the collected ``items`` in place: those :data:`LONGEST` names first, in its
    order, the others after them in the order of collection."""
    items.sort(key=lambda item: _rank(item.nodeid))   # stable: ties keep their order


def hand_out_one_at_a_time(config, log):
    """Return pytest-xdist's scheduler that hands out one test at a time in the order of
    collection (``--dist loadgroup``: every test its own group unless marked ``xdist_group``)
    when the run asked for the default ``load``, else None (the scheduler asked for)."""
    if config.getvalue("dist") != "load":
        return None
    from xdist.scheduler import LoadGroupScheduling

    return LoadGroupScheduling(config, log)
